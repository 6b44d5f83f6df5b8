"""``lessonledger bench sync``: clone, pull and erasure propagation over ZeroMQ.

- ``clone_vs_raw``: a full clone of an N-event hub (every envelope and body verified
  against its segment id and commitment, the segment ids against the hub's Merkle root,
  the chain recomputed to the hub's head link, all imported and committed) against a
  raw ZeroMQ chunked transfer of the same bytes with the same credit, each chunk hashed
  with SHA-256 and written to a file: the physical limit of moving those bytes through
  ZeroMQ here. Both servers are separate processes on 127.0.0.1, and neither side
  fsyncs (the clone commits to the OS, as with ``LESSONLEDGER_SYNC=os``; the raw copy
  writes without fsync). The clone is ``clone --fold background``'s: timed from its
  first request until ``pull`` returns, when every object is stored and verified and
  queries on the replica answer (each folding what the saved views lack). Such a clone
  stores each checked chunk as one pack; the log's rows (envelopes and links, bodies, the
  id and stream indexes) are laid out from the packs by the first process that opens the
  replica, the fold below, whose time holds it. ``clone_cpu_s`` is the CPU time the
  cloning process spent in it (the rest of ``clone_s`` it waited).
- ``clone_fold_s``: the fold that follows, as ``lessonledger fold`` (the process
  ``clone --fold background`` starts) reports it: the packs laid out as rows, then the
  views and the vector index folded over the whole log and saved. ``clone_ready_s``:
  from the clone's first request until that process has exited: when queries answer
  from saved views without folding.
  ``clone_now_s``: a second clone with ``--fold now`` (folds before it returns), for
  comparison. ``transfer_vs_raw`` is the timed clone less any fold it did (none unless
  an erasure came).
- ``pull_bytes_ratio``: bytes on the wire (both ways) for a pull of 1,000 new events,
  over the stored bytes of those events (envelopes and bodies).
- ``erase_propagation_s``: from the erasure of one principal at the hub until two
  replicas have each pulled it, deleted the bodies, refolded, compacted and
  acknowledged it at the hub.

The hub is built with the Python API (outcome commands in batches, policies and all),
so building 100,000 events takes about a minute.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

import zmq
from lessonledger.commands import open_ledger
from lessonledger.commands.messages import ObserveOutcome, command_from
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.sync.client import RemoteLedger
from lessonledger.sync.exchange import DEFAULT_CREDIT
from lessonledger.sync.replica import prepare_clone, pull
from lessonledger.sync.snapshots import erasures
from lessonledger.sync.transport import ZmqExchange

__all__ = ["raw_serve", "run"]

_PROJECT = "3f9a0c1b2d4e5f60"
_PRINCIPALS = ("ana", "ben", "cy", "dee")


def _commands(start: int, count: int, rng: random.Random) -> list[ObserveOutcome]:
    return [command_from({
        "key": f"bench-{i}", "principal": _PRINCIPALS[i % len(_PRINCIPALS)],
        "session": f"s{i % 97}", "project": _PROJECT, "passed": i % 3 != 0,
        "task": "task " + "".join(rng.choices("abcdefghijklmnop", k=160)),
        "operations": [{"op": f"op-{i % 7}", "target": f"t{i % 5}", "ok": True,
                        "order": 0}]}, ObserveOutcome) for i in range(start, start + count)]


def _grow(home: str, events: int, say: Callable[[str], None]) -> None:
    """Write outcome commands until the hub's log holds ``events`` events."""
    rng = random.Random(14)
    with open_ledger(home, sync=False) as ledger:
        made = ledger.head()
        while ledger.head() < events:
            batch = min(1000, events - ledger.head())
            ledger.execute_all(_commands(made, batch, rng))
            made += batch
            if made % 20_000 < batch:
                say(f"bench sync: hub at {ledger.head():,} events")


def _rows(home: str, after: int = 0) -> list[tuple[bytes, bytes | None]]:
    lmdb_home = acquire(home, sync=False)
    try:
        return [(e, b) for p, e, b, _ in EventLog(lmdb_home, LOG_NAME).raw(after + 1)]
    finally:
        release(lmdb_home)


def _size(rows: list[tuple[bytes, bytes | None]]) -> int:
    return sum(len(envelope) + len(body or b"") for envelope, body in rows)


class _Server:
    """A process whose first line of output says where it serves, or what it did."""

    def __init__(self, argv: list[str]) -> None:
        env = {**os.environ, "LESSONLEDGER_SYNC": "os"}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"tcp://[\d.]+:\d+", line)
        self.url = found.group(0) if found else ""
        try:
            self.reported: dict[str, Any] = {} if found else json.loads(line)
        except json.JSONDecodeError:
            self.stop()
            msg = f"the bench process did not start: {line!r}"
            raise RuntimeError(msg) from None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _Hub:
    """``lessonledger serve`` on free ports of 127.0.0.1, once it answers."""

    def __init__(self, cli: list[str], home: str) -> None:
        ports = []
        for _ in range(2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        self.url = f"tcp://127.0.0.1:{ports[0]}"
        env = {**os.environ, "LESSONLEDGER_SYNC": "os"}
        self.proc = subprocess.Popen(
            [*cli, "--home", home, "serve", "--bind", self.url, "--pub",
             f"tcp://127.0.0.1:{ports[1]}"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=env)
        try:
            with RemoteLedger(self.url, timeout=1.0, deadline=60.0) as probe:
                probe.status()
            # A query waits for a query worker, which folds the whole log as it starts:
            # that start-up is over before anything is timed, as the raw server has read
            # its file before it answers.
            with RemoteLedger(self.url, timeout=300.0) as probe:
                probe.catalogue(_PROJECT)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def raw_serve(path: str) -> None:
    """Serve byte ranges of the file at ``path`` to DEALERs: the raw baseline's server."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    port = socket.bind_to_random_port("tcp://127.0.0.1")
    data = Path(path).read_bytes()
    print(f"serving raw on tcp://127.0.0.1:{port}", flush=True)
    while True:
        peer, request = socket.recv_multipart()
        if not request:
            break
        offset, length = int.from_bytes(request[:8], "big"), int.from_bytes(request[8:], "big")
        socket.send_multipart([peer, data[offset:offset + length]])
    socket.close()
    context.term()


def _raw_clone(url: str, total: int, chunk: int, into: str) -> tuple[float, str]:
    """Fetch ``total`` bytes in ``chunk``-byte pieces, credit-limited, hash and write them."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.connect(url)
    digest = sha256()
    started = time.perf_counter()
    with open(into, "wb") as out:
        queue = deque(range(0, total, chunk))
        flying = 0
        while queue or flying:
            while queue and flying < DEFAULT_CREDIT:
                offset = queue.popleft()
                socket.send(offset.to_bytes(8, "big") + min(chunk, total - offset).to_bytes(
                    8, "big"))
                flying += 1
            piece = socket.recv()
            flying -= 1
            digest.update(piece)
            out.write(piece)
    seconds = time.perf_counter() - started
    socket.send(b"")  # the server stops
    socket.close(linger=1000)
    context.term()
    return seconds, digest.hexdigest()


def run(events: int = 100_000, pull_events: int = 1_000,
        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure the figures in the module docstring; return them with their inputs."""
    say = progress or (lambda line: None)
    cli = [sys.executable, "-m", "lessonledger.ops"]
    with tempfile.TemporaryDirectory(prefix="lessonledger-bench-sync-") as work:
        hub = os.path.join(work, "hub")
        _grow(hub, events, say)
        rows = _rows(hub)
        size = _size(rows)
        flat = os.path.join(work, "flat.bin")
        with open(flat, "wb") as f:
            for envelope, body in rows:
                f.write(envelope)
                f.write(body or b"")
        segments = -(-len(rows) // 256)
        say(f"bench sync: raw transfer of {size:,} bytes")
        raw = _Server([sys.executable, "-c",
                       f"from lessonledger.ops.bench.sync import raw_serve; raw_serve({flat!r})"])
        try:
            raw_seconds, _ = _raw_clone(raw.url, size, -(-size // segments),
                                        os.path.join(work, "copy.bin"))
        finally:
            raw.proc.wait(timeout=60)
            if raw.proc.stdout is not None:
                raw.proc.stdout.close()
        server = _Hub(cli, hub)
        try:
            say(f"bench sync: clone of {len(rows):,} events")
            r1, r2 = os.path.join(work, "r1"), os.path.join(work, "r2")
            prepare_clone(server.url, r1, "r1")
            started = time.perf_counter()
            cpu = time.process_time()
            with ZmqExchange(server.url) as exchange:
                cloned = pull(r1, exchange, sync=False, fold=False)
            clone_seconds = time.perf_counter() - started
            clone_cpu = time.process_time() - cpu
            say("bench sync: folding the clone's views, as `clone --fold background` does")
            folding = _Server([*cli, "--home", r1, "fold", "--json"])
            fold_seconds = folding.reported["seconds"]
            folding.proc.wait(timeout=600)
            ready_seconds = time.perf_counter() - started
            if folding.proc.stdout is not None:
                folding.proc.stdout.close()
            say("bench sync: a second clone, with --fold now")
            prepare_clone(server.url, r2, "r2")
            started = time.perf_counter()
            with ZmqExchange(server.url) as exchange:
                pull(r2, exchange, sync=False)
            now_seconds = time.perf_counter() - started
            before = len(_rows(hub))
            _grow(hub, before + pull_events, say)
            new = _rows(hub, before)
            with ZmqExchange(server.url) as exchange:
                pulled = pull(r1, exchange, sync=False)
            with ZmqExchange(server.url) as exchange:
                pull(r2, exchange, sync=False)
            say("bench sync: erasing one principal")
            started = time.perf_counter()
            with open_ledger(hub, sync=False) as ledger:
                ledger.erase(key="bench-erase", what="principal", subject=_PRINCIPALS[0],
                             reason="bench")
            for replica in (r1, r2):
                with ZmqExchange(server.url) as exchange:
                    applied = pull(replica, exchange, sync=False)
                if not applied.erasures:
                    msg = f"replica {replica} did not apply the erasure: {applied}"
                    raise RuntimeError(msg)
            erase_seconds = time.perf_counter() - started
            acked = erasures(hub)[-1].acked_by
        finally:
            server.stop()
    clone_rate = size / clone_seconds
    raw_rate = size / raw_seconds
    return {
        "events": len(rows), "bytes": size,
        "clone_s": round(clone_seconds, 3), "clone_mb_s": round(clone_rate / 1e6, 1),
        "raw_s": round(raw_seconds, 3), "raw_mb_s": round(raw_rate / 1e6, 1),
        "clone_vs_raw": round(clone_rate / raw_rate, 3),
        "clone_cpu_s": round(clone_cpu, 3),
        "clone_fold_s": round(fold_seconds, 3), "clone_ready_s": round(ready_seconds, 3),
        "clone_now_s": round(now_seconds, 3),
        "transfer_vs_raw": round(size / (clone_seconds - cloned.fold_seconds) / raw_rate, 3),
        "clone_fetched": cloned.fetched,
        "pull_events": pulled.fetched, "pull_event_bytes": _size(new),
        "pull_wire_bytes": pulled.received + pulled.sent,
        "pull_bytes_ratio": round((pulled.received + pulled.sent) / max(_size(new), 1), 3),
        "erase_propagation_s": round(erase_seconds, 3), "erase_acked_by": acked,
    }
