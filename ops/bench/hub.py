"""``lessonledger bench hub``: many agent processes through one hub, against the baselines.

All measured in one run, on fresh homes, on this machine:

- ``hub16``: 16 publisher processes, each sending its ``observe_outcome`` commands one
  at a time through a hub (``lessonledger serve``, durable, group commit);
- ``local_nosync``: one in-process ``Ledger`` with fsync off running the same commands;
- ``local1``: one in-process ``Ledger``, durable, running them one at a time;
- ``events_hub16``: 16 processes each submitting single events (``parse_submission``
  JSON) through the hub, durable; ``sqlite16``: 16 processes each appending the same
  events one at a time into eventsourcing's SQLite application recorder on one file
  (WAL, ``synchronous=FULL``, as eventsourcing ships it);
- ``query_p99_ms_under_load``: the p99 of recall round trips a 17th client makes while
  the 16 publishers run.

The machine is shared: the load average before and after is part of the result.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import ObserveOutcome, Operation, command_from
from lessonledger.ledger.events import OUTCOME_OBSERVED
from lessonledger.ledger.secrets import warm_up
from lessonledger.sync.client import HubUnavailableError, RemoteLedger

__all__ = ["run", "worker"]

PUBLISHERS = 16
PROJECTS = tuple(f"{i:x}" * 32 for i in range(10, 14))
FORMS = [(f"tool{i}:old", f"tool{i}:new", f"target{i}", f"error {i}") for i in range(6)]


def _outcome(agent: int, i: int) -> ObserveOutcome:
    """An agent's ``i``-th outcome: the loop's signal on one of six targets, or a pass."""
    failing, working, target, error = FORMS[(agent * 5 + i) % len(FORMS)]
    ops = [Operation(op=working, target=target, ok=True)] if i % 4 == 3 else [
        Operation(op=failing, target=target, ok=False, error=error),
        Operation(op=working, target=target, ok=True, order=1)]
    return command_from({"key": f"bench{agent}-{i}", "project": PROJECTS[(agent + i) % 4],
                         "session": f"b{agent}-s{i // 10}", "passed": True,
                         "operations": ops, "task": "run the build and the tests"},
                        ObserveOutcome)


def _submission(agent: int, i: int) -> bytes:
    """A single event as a publisher submits it: an outcome, in a stream of its own."""
    failing, _working, target, error = FORMS[(agent + i) % len(FORMS)]
    return msgspec.json.encode({
        "event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
        "occurred_at": "2026-12-01T00:00:00Z", "actor": "agent",
        "session": f"e{agent}-s{i // 10}",
        "event": {"type": OUTCOME_OBSERVED, "outcome_id": str(uuid4()),
                  "project": PROJECTS[i % 4], "task": "run the build and the tests",
                  "passed": i % 3 != 0, "signal": "verification",
                  "operations": [{"op": failing, "target": target, "ok": False,
                                  "error": error, "order": 0}]}})


# -- worker processes ----------------------------------------------------------------------


def worker() -> None:
    """A publisher process (run by :func:`run`): its arguments are one JSON argv item."""
    job = json.loads(sys.argv[1])
    kind, agent, count = job["kind"], job["agent"], job["count"]
    if kind == "sqlite":
        send = _sqlite_sender(job["target"], agent, count)
        close: Callable[[], None] = lambda: None  # noqa: E731 - the file closes at exit
    else:
        client = RemoteLedger(job["target"], timeout=30.0, deadline=600.0)
        client.head()  # connected before the start
        close = client.close
        if kind == "commands":
            items: list[Any] = [_outcome(agent, i) for i in range(count)]
            send = lambda i: client.execute(items[i])  # noqa: E731
        else:
            data = [_submission(agent, i) for i in range(count)]
            send = lambda i: client.submit(data[i])  # noqa: E731
    Path(job["ready"]).touch()
    while not os.path.exists(job["go"]):
        time.sleep(0.001)
    started = time.monotonic()
    for i in range(count):
        send(i)
    ended = time.monotonic()  # the system's clock: the parent compares it with its own
    close()
    Path(job["out"]).write_text(json.dumps({"seconds": ended - started, "count": count,
                                            "ended": ended}))


def _sqlite_sender(path: str, agent: int, count: int) -> Callable[[int], object]:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    datastore = SQLiteDatastore(path, lock_timeout=60)
    recorder = SQLiteApplicationRecorder(datastore)
    events = [StoredEvent(uuid4(), 0, OUTCOME_OBSERVED, _submission(agent, i))
              for i in range(count)]

    def send(i: int) -> object:
        for _ in range(1000):
            try:
                return recorder.insert_events([events[i]])
            except Exception as e:  # a writer lock held too long by another process
                if "locked" not in str(e):
                    raise
                time.sleep(0.001)
        msg = "SQLite stayed locked"
        raise RuntimeError(msg)

    return send


def _workers(kind: str, target: str, count: int, work: Path,
             during: Callable[[Callable[[], bool]], object] | None = None) -> float:
    """Run 16 workers from one start signal; their combined rate (items per second).

    Timed from the start signal to the last reply any worker got (its ``ended``, on
    the system's monotonic clock): the workers' exit (16 interpreters shutting down,
    about a second on 2 loaded cores) is not the work being measured.
    """
    work.mkdir(parents=True)
    procs = []
    for agent in range(PUBLISHERS):
        job = {"kind": kind, "target": target, "agent": agent, "count": count,
               "ready": str(work / f"{agent}.ready"), "go": str(work / "go"),
               "out": str(work / f"{agent}.json")}
        procs.append(subprocess.Popen(
            [sys.executable, "-c", "from lessonledger.ops.bench.hub import worker; worker()",
             json.dumps(job)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    try:
        deadline = time.monotonic() + 300
        while not all((work / f"{a}.ready").exists() for a in range(PUBLISHERS)):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed:
                raise RuntimeError(failed[0].communicate()[1].decode()[-2000:])
            if time.monotonic() > deadline:
                msg = "the workers did not start in 300 s"
                raise RuntimeError(msg)
            time.sleep(0.01)
        started = time.monotonic()
        (work / "go").touch()
        if during is not None:
            during(lambda: all(p.poll() is not None for p in procs))
        for proc in procs:
            _, err = proc.communicate(timeout=1200)
            if proc.returncode != 0:
                raise RuntimeError(err.decode()[-2000:])
        elapsed = max(float(json.loads((work / f"{a}.json").read_text())["ended"])
                      for a in range(PUBLISHERS)) - started
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return PUBLISHERS * count / elapsed


# -- the hub -----------------------------------------------------------------------------


def _ports() -> tuple[int, int]:
    a, b = socket.socket(), socket.socket()
    try:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        return a.getsockname()[1], b.getsockname()[1]
    finally:
        a.close()
        b.close()


class _Hub:
    def __init__(self, home: Path, log: Path) -> None:
        port, pub = _ports()
        self.endpoint = f"tcp://127.0.0.1:{port}"
        Ledger(home).close()
        self._err = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lessonledger.ops", "--home", str(home), "serve",
             "--bind", self.endpoint, "--pub", f"tcp://127.0.0.1:{pub}"],
            stdout=subprocess.DEVNULL, stderr=self._err)
        try:
            with RemoteLedger(self.endpoint, timeout=1.0, deadline=120.0) as client:
                while True:
                    try:
                        client.status()
                        return
                    except HubUnavailableError:
                        if self.proc.poll() is not None:
                            raise
        except BaseException:
            self.proc.kill()  # a hub that never answered is not left running
            self.proc.wait()
            self._err.close()
            raise

    def status(self) -> Any:
        with RemoteLedger(self.endpoint) as client:
            return client.status()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def _queries(endpoint: str, latencies: list[float]) -> Callable[[Callable[[], bool]], None]:
    def ask(done: Callable[[], bool]) -> None:
        with RemoteLedger(endpoint, timeout=30.0) as client:
            n = 0
            while not done():
                started = time.perf_counter()
                client.recall(PROJECTS[n % 4], "run the build and the tests",
                              session=f"q{n // 20}")
                latencies.append(time.perf_counter() - started)
                n += 1
                time.sleep(0.005)  # an agent plans, then asks: not a flood
    return ask


def _local(home: Path, commands: list[ObserveOutcome], *, sync: bool) -> float:
    warm_up()  # as the hub does before it serves: neither side times the detector's build
    with Ledger(home, sync=sync) as ledger:
        started = time.perf_counter()
        for command in commands:
            ledger.execute(command)
        return len(commands) / (time.perf_counter() - started)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(*, commands: int = 250, events: int = 500, local1_commands: int = 1000,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure everything in the module doc; ``commands`` and ``events`` per process.

    Returns:
        The rates (per second), the ratios against the targets of issue 13, the
        latencies, events per commit and the load average before and after.
    """
    load_before = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="lessonledger-bench-hub-"))
    try:
        interleaved = [_outcome(agent, i) for i in range(commands)
                       for agent in range(PUBLISHERS)]
        progress(f"local, fsync off: {len(interleaved)} commands")
        local_nosync = _local(workdir / "nosync", interleaved, sync=False)
        progress(f"local, durable, one at a time: {local1_commands} commands")
        local1 = _local(workdir / "local1", interleaved[:local1_commands], sync=True)

        progress(f"hub: {PUBLISHERS} publishers x {commands} commands, recall alongside")
        hub = _Hub(workdir / "hub", workdir / "hub.log")
        latencies: list[float] = []
        try:
            hub16 = _workers("commands", hub.endpoint, commands, workdir / "pub",
                             during=_queries(hub.endpoint, latencies))
            commit = hub.status()
        finally:
            hub.stop()

        progress(f"events: {PUBLISHERS} processes x {events} single events, hub and SQLite")
        hub = _Hub(workdir / "events", workdir / "events.log")
        try:
            events_hub16 = _workers("submit", hub.endpoint, events, workdir / "sub")
            events_commit = hub.status()
        finally:
            hub.stop()
        sqlite_file = workdir / "events.sqlite"
        _create_sqlite(str(sqlite_file))
        sqlite16 = _workers("sqlite", str(sqlite_file), events, workdir / "sqlite")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "hub16_commands_per_s": round(hub16),
        "local_nosync_commands_per_s": round(local_nosync),
        "local1_commands_per_s": round(local1),
        "hub16_vs_local_nosync": round(hub16 / local_nosync, 3),
        "hub16_vs_local1": round(hub16 / local1, 3),
        "events_hub16_per_s": round(events_hub16),
        "sqlite16_events_per_s": round(sqlite16),
        "events_hub16_vs_sqlite16": round(events_hub16 / sqlite16, 3),
        "query_p50_ms_under_load": round(_p(latencies, 0.5) * 1000, 2),
        "query_p99_ms_under_load": round(_p(latencies, 0.99) * 1000, 2),
        "queries_under_load": len(latencies),
        "commands_per_commit": round(commit.mean_batch_size, 2),
        "events_per_commit": round(commit.events_per_commit, 2),
        "submissions_per_commit": round(events_commit.mean_batch_size, 2),
        "targets": {"hub16_vs_local_nosync": ">= 0.7", "hub16_vs_local1": ">= 1.5",
                    "events_hub16_vs_sqlite16": ">= 3", "query_p99_ms_under_load": "<= 10"},
        "publishers": PUBLISHERS, "commands_each": commands, "events_each": events,
        "cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "sqlite": f"{sqlite3.sqlite_version}, WAL, synchronous=FULL (eventsourcing default)",
    }


def _create_sqlite(path: str) -> None:
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    datastore = SQLiteDatastore(path)
    try:
        SQLiteApplicationRecorder(datastore).create_table()
    finally:
        datastore.close()

