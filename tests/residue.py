"""Shared by the erasure tests: a process that holds a home open, a residue scan, and an
erasure at the log's level (bodies deleted and an ``Erased`` record naming them)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt
from lessonledger.ledger.events import Erased
from lessonledger.ledger.log import EventLog
from lessonledger.ledger.submission import new_event

__all__ = ["WINDOW", "erase", "found", "holder", "secret", "windows", "windows_left"]

#: A process that opens the home given as argv[1], says so, and keeps it open until its
#: stdin closes. With a second argument it also appends version 0 of that stream before
#: saying so, and version 2 just before it exits.
HOLDER = """
import sys
from lessonledger.ledger import EventLog, NewEvent
from lessonledger.ledger.lmdb_env import acquire, release
home = acquire(sys.argv[1])
log = EventLog(home, "ledger")
stream = sys.argv[2] if len(sys.argv) > 2 else None
if stream:
    log.append([NewEvent(stream, 0, "held", b"from the holder, first")])
print("open", flush=True)
sys.stdin.read()
if stream:
    log.append([NewEvent(stream, 2, "held", b"from the holder, last")])
release(home)
"""


@contextmanager
def holder(path: str, stream: str = "") -> Iterator[None]:
    """Keep the home open in another process for the length of the block."""
    argv = [sys.executable, "-c", HOLDER, path, *([stream] if stream else [])]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        assert proc.stdout.readline() == "open\n"
        try:
            yield
        finally:
            proc.stdin.close()
            assert proc.wait(timeout=30) == 0


def secret() -> bytes:
    """A unique byte string to look for in files."""
    return b"SECRET<" + uuid.uuid4().hex.encode() + b">"


def found(path: str, secrets: list[bytes]) -> set[bytes]:
    """The secrets that occur anywhere in any file under ``path``."""
    hits: set[bytes] = set()
    for top, _, files in os.walk(path):
        for name in files:
            data = Path(top, name).read_bytes()
            hits.update(s for s in secrets if s in data)
    return hits


#: The width of a residue window: no 16 consecutive bytes of erased content may remain.
WINDOW = 16


#: Bytes of a file keyed at a time, bounding the scan's memory to some tens of MB.
_CHUNK = 1 << 18


def windows(payloads: list[bytes], width: int = WINDOW) -> set[bytes]:
    """Every ``width``-byte window of every payload."""
    return {p[i:i + width] for p in payloads for i in range(len(p) - width + 1)}


def _keys(data: bytes, width: int) -> npt.NDArray[np.uint64]:
    """A 64-bit key of every ``width``-byte window of ``data``: equal windows, equal keys.

    From 8 to 16 bytes wide, a window is covered by the 8 bytes at its start and the 8 at
    its end, read as two unaligned integers straight from ``data`` (no copy per window);
    other widths mix every byte.
    """
    count = len(data) - width + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        if 8 <= width <= 16:
            head = np.ndarray((count,), dtype="<u8", buffer=data, offset=0, strides=(1,))
            tail = np.ndarray((count,), dtype="<u8", buffer=data, offset=width - 8,
                              strides=(1,))
            mixed = head * np.uint64(0x9E3779B97F4A7C15)
            keys: npt.NDArray[np.uint64] = (mixed ^ (mixed >> np.uint64(29))) ^ tail
            return keys
        raw = np.frombuffer(data, dtype=np.uint8)
        rows = np.lib.stride_tricks.sliding_window_view(raw, width)
        weights = np.arange(1, width + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        spread = (rows.astype(np.uint64) + np.uint64(1)) * weights
        keys = np.bitwise_xor.reduce(spread * (spread >> np.uint64(29) | np.uint64(1)), axis=1)
    return keys


def windows_left(path: str, wanted: set[bytes], width: int = WINDOW) -> dict[str, int]:
    """For each file under ``path``, how many of the ``wanted`` windows occur in it.

    Every offset of every file is compared: a key filter finds the candidates, and each
    candidate is then checked byte for byte, so nothing is reported that is not there.
    """
    hits: dict[str, int] = {}
    if not wanted:
        return hits
    # Sorted once, so each chunk's keys are looked up by bisection (np.isin sorted the
    # wanted keys again for every chunk).
    wanted_keys = np.unique(_keys(b"".join(wanted), width)[::width])
    for top, _, files in os.walk(path):
        for name in files:
            data = Path(top, name).read_bytes()
            found_here: set[bytes] = set()
            for start in range(0, max(len(data) - width + 1, 0), _CHUNK):
                chunk = data[start:start + _CHUNK + width - 1]
                keys = _keys(chunk, width)
                at = np.minimum(np.searchsorted(wanted_keys, keys), len(wanted_keys) - 1)
                candidates = np.flatnonzero(wanted_keys[at] == keys)
                found_here.update(chunk[i:i + width] for i in candidates.tolist())
            found_here &= wanted
            if found_here:
                hits[str(Path(top, name).relative_to(path))] = len(found_here)
    return hits


def erase(log: EventLog, positions: Sequence[int]) -> int:
    """Delete the bodies at ``positions`` and append the ``Erased`` record naming them.

    What ``Ledger.erase`` does at the log's level, in one transaction: ``verify`` takes a
    missing body for an erasure only when an ``Erased`` record names it. Returns how many
    bodies were present and are now gone.
    """
    eid = uuid.uuid4()
    record = new_event(Erased(what="session", subject="test", by="test", reason="test",
                              positions=list(positions)),
                       stream=eid, version=0, event_id=eid, actor="test")
    with log.writing() as writing:
        gone = writing.erase_bodies(positions)
        writing.append([record])
    return gone
