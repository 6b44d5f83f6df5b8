"""A writer process for the real-process ledger tests (run as a script, never forked).

Usage::

    python writer_proc.py batch HOME WRITER COUNT SEED ACKS BARRIER [--sync]
    python writer_proc.py forever HOME WRITER SEED [--sync]
    python writer_proc.py hold HOME WRITER
    python writer_proc.py verify HOME

``batch`` appends events ``0..COUNT-1`` of writer ``WRITER`` once the file ``BARRIER``
exists, in single appends and small batches, and records every acknowledged
``seq position`` pair in ``ACKS`` (flushed and fsynced after every append). It creates
``ACKS + ".ready"`` once its home is open, so the test can start all writers together.

``forever`` appends events ``0, 1, 2, ...`` until it is killed, printing ``seq position``
on stdout (flushed) for every acknowledged event.

``hold`` appends its event ``0`` but, inside the write transaction, prints ``holding``
and sleeps: it keeps LMDB's write lock until it is killed, and never commits.

``verify`` opens the home afresh, verifies the log and prints the report as JSON.

What writer ``w`` sends as event ``seq`` is fixed by :func:`make_event`, so a reader
can check any stored event against it from its event id alone.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

import msgspec
from lessonledger.ledger import EventLog, NewEvent
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.verify import verify

LOG_NAME = "proc"
EVENT_TYPE = "ProcessTested"
STREAMS_PER_WRITER = 7
MAX_BATCH = 5
_ID_TAG = b"LP"


def event_id(writer: int, seq: int) -> bytes:
    """Return the 16-byte event id of writer ``writer``'s event ``seq``."""
    return _ID_TAG + writer.to_bytes(2, "big") + seq.to_bytes(12, "big")


def parse_event_id(raw: bytes) -> tuple[int, int]:
    """Return ``(writer, seq)`` from an id made by :func:`event_id`."""
    if len(raw) != 16 or raw[:2] != _ID_TAG:
        msg = f"not a test event id: {raw!r}"
        raise ValueError(msg)
    return int.from_bytes(raw[2:4], "big"), int.from_bytes(raw[4:], "big")


def stream_of(writer: int, seq: int) -> str:
    return f"w{writer}-s{seq % STREAMS_PER_WRITER}"


def payload_of(writer: int, seq: int) -> bytes:
    return f"writer={writer} seq={seq};".encode() * (1 + seq % 5)


def make_event(writer: int, seq: int) -> NewEvent:
    """Return exactly what writer ``writer`` sends as its event ``seq``."""
    return NewEvent(
        stream=stream_of(writer, seq),
        version=seq // STREAMS_PER_WRITER,
        type=EVENT_TYPE,
        payload=payload_of(writer, seq),
        event_id=event_id(writer, seq),
        actor=f"writer-{writer}",
    )


def batch_sizes(rng: random.Random) -> Iterator[int]:
    """Half single appends, half batches of 2 to ``MAX_BATCH`` events."""
    while True:
        yield 1 if rng.random() < 0.5 else rng.randint(2, MAX_BATCH)


def _ack(out: TextIO, first: int, positions: Sequence[int], durable: bool) -> None:
    out.write("".join(f"{first + i} {p}\n" for i, p in enumerate(positions)))
    out.flush()
    if durable:
        os.fsync(out.fileno())


def run_batch(args: argparse.Namespace) -> int:
    home = acquire(args.home, sync=args.sync)
    try:
        log = EventLog(home, LOG_NAME)
        with open(args.acks + ".ready", "w"):
            pass
        deadline = time.monotonic() + 30
        while not os.path.exists(args.barrier):
            if time.monotonic() > deadline:
                print("barrier never opened", file=sys.stderr)
                return 3
            time.sleep(0.001)
        rng = random.Random(args.seed)
        sizes = batch_sizes(rng)
        seq = 0
        with open(args.acks, "w") as acks:
            while seq < args.count:
                n = min(next(sizes), args.count - seq)
                positions = log.append([make_event(args.writer, s) for s in range(seq, seq + n)])
                _ack(acks, seq, positions, durable=True)
                seq += n
    finally:
        release(home)
    return 0


def run_forever(args: argparse.Namespace) -> int:
    home = acquire(args.home, sync=args.sync)
    log = EventLog(home, LOG_NAME)
    sizes = batch_sizes(random.Random(args.seed))
    seq = 0
    while True:
        n = next(sizes)
        positions = log.append([make_event(args.writer, s) for s in range(seq, seq + n)])
        _ack(sys.stdout, seq, positions, durable=False)
        seq += n


def run_hold(args: argparse.Namespace) -> int:
    home = acquire(args.home, sync=False)
    log = EventLog(home, LOG_NAME)

    def hold(_txn: object) -> None:
        sys.stdout.write("holding\n")
        sys.stdout.flush()
        time.sleep(3600)

    log.append([make_event(args.writer, 0)], also=hold)
    return 4  # not reached unless the sleep ends


def run_verify(args: argparse.Namespace) -> int:
    home = acquire(args.home, sync=False)
    try:
        report = verify(EventLog(home, LOG_NAME))
    finally:
        release(home)
    sys.stdout.write(msgspec.json.encode(report).decode())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    batch = sub.add_parser("batch")
    batch.add_argument("home")
    batch.add_argument("writer", type=int)
    batch.add_argument("count", type=int)
    batch.add_argument("seed", type=int)
    batch.add_argument("acks")
    batch.add_argument("barrier")
    batch.add_argument("--sync", action="store_true")
    forever = sub.add_parser("forever")
    forever.add_argument("home")
    forever.add_argument("writer", type=int)
    forever.add_argument("seed", type=int)
    forever.add_argument("--sync", action="store_true")
    hold = sub.add_parser("hold")
    hold.add_argument("home")
    hold.add_argument("writer", type=int)
    check = sub.add_parser("verify")
    check.add_argument("home")
    args = parser.parse_args(argv)
    modes = {"batch": run_batch, "forever": run_forever, "hold": run_hold,
             "verify": run_verify}
    return modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
