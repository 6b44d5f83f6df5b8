"""The hub's query workers: real processes that answer as the hub did and outlive nothing.

Each test runs ``lessonledger serve`` in a process of its own and finds its workers
through ``/proc`` (the hub's children whose command line runs the worker module).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from hubtools import HubProcess, outcome
from in_process import cli
from lessonledger.commands.read_side import Reader
from lessonledger.sync import RemoteLedger

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds the workers through /proc")

P = "a" * 32


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def workers(pid: int) -> list[int]:
    return [c for c in children(pid) if b"query_worker" in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet has exited: not alive)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(check: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def started(tmp_path: Path, count: int) -> HubProcess:
    server = HubProcess(tmp_path / "hub", tmp_path / "hub.log", "--query-workers", str(count))
    server.start()
    assert server.proc is not None
    with RemoteLedger(server.endpoint, timeout=30.0) as client:
        client.execute(outcome(0, 0))
        # A worker is ready once one answered. Recording nothing: a recall that showed
        # a lesson queues a `lesson.recalled` record in the worker, which its own thread
        # commits later, so a test comparing the log or a usage clock read before it
        # lands with one read after would see a write nobody in the test made.
        client.recall(P, "run the tests", record=False)
    pid = server.proc.pid
    wait_for(lambda: len(workers(pid)) == count)
    return server


def test_sigterm_drains_the_hub_and_its_workers(tmp_path: Path) -> None:
    server = started(tmp_path, 2)
    assert server.proc is not None
    pids = workers(server.proc.pid)
    try:
        assert server.terminate() == 0
        wait_for(lambda: not any(alive(p) for p in pids), 15)
    finally:
        server.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_workers_exit_when_the_hub_is_sigkilled(tmp_path: Path) -> None:
    server = started(tmp_path, 2)
    assert server.proc is not None
    pids = workers(server.proc.pid)
    try:
        server.kill()
        # No orphan answers queries for a hub that is gone, nor holds the home open.
        wait_for(lambda: not any(alive(p) for p in pids), 15)
        server.start()  # and the home opens again at once
    finally:
        server.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_killed_worker_is_replaced_and_queries_go_on(tmp_path: Path) -> None:
    server = started(tmp_path, 1)
    assert server.proc is not None
    hub_pid = server.proc.pid
    try:
        (first,) = workers(hub_pid)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: any(p != first for p in workers(hub_pid)))
        with RemoteLedger(server.endpoint, timeout=30.0) as client:
            assert client.recall(P, "run the tests").lessons
        assert "query worker w1 exited" in server.log.read_text()
    finally:
        server.kill()


def test_answers_are_the_bytes_a_local_read_gives(tmp_path: Path) -> None:
    server = started(tmp_path, 2)
    try:
        with RemoteLedger(server.endpoint, timeout=30.0) as client:
            for i in range(1, 8):
                client.execute(outcome(0, i))
            lesson = client.catalogue(everything=True)[0].lesson_id

        def head() -> int:
            with Reader(server.home) as reader:
                return reader.head()

        def both(*verb: str) -> tuple[str, str]:
            # By main() in this process: the answers' bytes are under test, and the hub
            # and its workers are the processes.
            before = head()
            remote = cli(*verb, "--to", server.endpoint)
            local = cli("--home", str(server.home), *verb)
            assert (remote.returncode, local.returncode) == (0, 0), remote.stderr + local.stderr
            # Else the two read different logs, and a difference says nothing of the hub.
            assert head() == before, f"the log moved while {verb} was asked twice"
            return remote.stdout, local.stdout

        for verb in (["log", "--json"], ["lessons", "show", str(lesson), "--json"],
                     ["why", str(lesson), "--json"]):
            remote, local = both(*verb)
            assert remote == local, verb
            assert json.loads(remote.splitlines()[0])
    finally:
        server.kill()


def test_a_sigkilled_hub_leaves_no_ipc_directory(tmp_path: Path) -> None:
    server = started(tmp_path, 2)
    assert server.proc is not None
    pids = workers(server.proc.pid)
    endpoint = _cmdline(pids[0]).split(b"\0")[3].decode()
    assert endpoint.startswith("ipc://")
    private = Path(endpoint.removeprefix("ipc://")).parent
    assert private.is_dir()
    try:
        server.kill()
        wait_for(lambda: not any(alive(p) for p in pids), 15)
        # The hub cannot clean up after a SIGKILL: its workers, who outlive it, do.
        wait_for(lambda: not private.exists(), 5)
    finally:
        server.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
