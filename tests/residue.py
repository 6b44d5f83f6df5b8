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

from lessonledger.ledger.events import Erased
from lessonledger.ledger.log import EventLog
from lessonledger.ledger.submission import new_event

__all__ = ["erase", "found", "holder", "secret"]

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
