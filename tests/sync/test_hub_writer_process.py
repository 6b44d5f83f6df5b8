"""The hub's writer is a process of its own: it and its front outlive nothing of each other.

Each test runs ``lessonledger serve`` in a process of its own and finds its writer
through ``/proc`` (the hub's child whose command line runs the writer module), then
kills one side with SIGKILL and watches the other go, under load.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hubtools import HubProcess, free_ports, lessonledger, outcome
from lessonledger.commands import Ledger
from lessonledger.ledger.verify import verify
from lessonledger.sync import RemoteLedger
from lessonledger.sync.client import HubUnavailableError
from test_hub_workers import alive, children, wait_for, workers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds the writer through /proc")


def writer(pid: int) -> int:
    """The hub's writer process."""
    found = [c for c in children(pid) if b"hub_writer" in _cmdline(c)]
    assert len(found) == 1, found
    return found[0]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class _Load:
    """A client sending commands on a thread until told to stop; what it got back."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.acked: list[int] = []
        self.failed: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with RemoteLedger(self.endpoint, timeout=2.0, deadline=4.0) as client:
            i = 0
            while not self._stop.is_set():
                try:
                    client.execute(outcome(7, i))
                    self.acked.append(i)
                except HubUnavailableError as e:
                    self.failed.append(e)
                    return
                i += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _started(tmp_path: Path) -> tuple[HubProcess, int]:
    server = HubProcess(tmp_path / "hub", tmp_path / "hub.log", "--query-workers", "1")
    server.start()
    assert server.proc is not None
    return server, writer(server.proc.pid)


def test_the_writer_exits_when_its_front_is_sigkilled_under_load(tmp_path: Path) -> None:
    server, pid = _started(tmp_path)
    assert server.proc is not None
    load = _Load(server.endpoint)
    try:
        wait_for(lambda: len(load.acked) >= 20)
        server.kill()
        # No orphan holds the home's writer: it goes with its front, at once.
        wait_for(lambda: not alive(pid), 10)
        load.stop()
        server.start()  # the home opens again, and what was acknowledged is there
        with RemoteLedger(server.endpoint, timeout=30.0) as client:
            for i in load.acked:
                assert client.execute(outcome(7, i)).positions, "a retry returns its receipt"
    finally:
        load.stop()
        server.kill()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_front_exits_with_an_error_when_its_writer_dies(tmp_path: Path) -> None:
    server, pid = _started(tmp_path)
    assert server.proc is not None
    hub_pid = server.proc.pid
    pool = workers(hub_pid)
    load = _Load(server.endpoint)
    try:
        wait_for(lambda: len(load.acked) >= 20)
        os.kill(pid, signal.SIGKILL)
        # It does not serve on without a writer (its clients would wait forever): it
        # stops its workers and exits, not 0, saying why.
        code = server.proc.wait(60)
        assert code != 0
        assert "writer exited with code" in server.log.read_text()
        wait_for(lambda: not any(alive(p) for p in pool), 15)
        load.stop()
        assert not load._thread.is_alive(), "the client was answered or timed out"
        # Every acknowledged command was committed before its receipt left the writer.
        with Ledger(tmp_path / "hub") as ledger:
            assert verify(ledger.log).ok
    finally:
        load.stop()
        server.kill()
        for p in [pid, *pool]:
            if alive(p):
                os.kill(p, signal.SIGKILL)


def test_sigterm_under_load_answers_every_taken_command_and_exits_0(tmp_path: Path) -> None:
    server, pid = _started(tmp_path)
    assert server.proc is not None
    load = _Load(server.endpoint)
    try:
        wait_for(lambda: len(load.acked) >= 20)
        assert server.terminate() == 0, server.log.read_text()
        wait_for(lambda: not alive(pid), 10)
        load.stop()
        acked = list(load.acked)
        server.start()
        with RemoteLedger(server.endpoint, timeout=30.0) as client:
            head = client.head()
            for i in acked:
                client.execute(outcome(7, i))
            assert client.head() == head, "every acknowledged command was committed"
    finally:
        load.stop()
        server.kill()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_home_the_writer_cannot_open_is_one_line_and_exit_2(tmp_path: Path) -> None:
    home = tmp_path / "hub"
    subprocess.run([lessonledger(), "--home", str(home), "init"], check=True,
                   capture_output=True)
    (home / "data.mdb").write_bytes(os.urandom(4096))  # damaged: not an LMDB file
    port, _ = free_ports()
    done = subprocess.run([lessonledger(), "--home", str(home), "serve", "--bind",
                           f"tcp://127.0.0.1:{port}", "--query-workers", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    # The writer's error itself, once: not its traceback, not "see the log".
    assert len(lines) == 1, done.stderr
    assert "cannot open ledger home" in lines[0], lines
