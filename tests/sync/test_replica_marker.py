"""The ``REPLICA`` marker: written whole or not at all, and a torn one never wedges a clone.

A real SIGKILL in the marker's window is ``tests/attack18a/test_attack18a_clone_marker.py``;
here each state such a kill (or an older, in-place write) can leave is made by hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubtools import HubProcess
from in_process import cli
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.sync.errors import ReplicaMarkerError
from lessonledger.sync.replica import prepare_clone
from lessonledger.sync.state import MARKER, ReplicaInfo, read_marker, write_marker

HUB = "tcp://127.0.0.1:1"


def test_the_marker_is_written_whole_and_leaves_no_side_file(tmp_path: Path) -> None:
    write_marker(tmp_path, ReplicaInfo(hub=HUB, name="r"))
    assert read_marker(tmp_path) == ReplicaInfo(hub=HUB, name="r")
    assert sorted(os.listdir(tmp_path)) == [MARKER]


def test_a_write_killed_before_its_rename_leaves_no_marker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(*_: object) -> None:
        raise KeyboardInterrupt  # stands for the kill: nothing after it runs

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare_clone(HUB, tmp_path / "r", "r")
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path / "r")) == [f"{MARKER}.partial"]
    assert read_marker(tmp_path / "r") is None
    prepare_clone(HUB, tmp_path / "r", "r")  # the rerun starts afresh
    assert read_marker(tmp_path / "r") == ReplicaInfo(hub=HUB, name="r")


@pytest.mark.parametrize("torn", [b"", b'{"hub": "tcp://127.0.0.1:1", "na'])
def test_a_clone_whose_directory_holds_only_a_torn_marker_starts_afresh(
        tmp_path: Path, torn: bytes) -> None:
    replica = tmp_path / "r"
    replica.mkdir()
    (replica / MARKER).write_bytes(torn)
    prepare_clone(HUB, replica, "r")
    assert read_marker(replica) == ReplicaInfo(hub=HUB, name="r")


def test_a_whole_marker_alone_is_a_replica_to_resume(tmp_path: Path) -> None:
    write_marker(tmp_path, ReplicaInfo(hub=HUB, name="first"))
    prepare_clone(HUB, tmp_path, "second")
    assert read_marker(tmp_path) == ReplicaInfo(hub=HUB, name="first")


def test_a_damaged_marker_of_a_replica_is_refused_in_one_line(tmp_path: Path) -> None:
    replica = tmp_path / "r"
    prepare_clone(HUB, replica, "r")
    release(acquire(str(replica)))  # its log: something of a replica beside the marker
    (replica / MARKER).write_bytes(b'{"hub": 7}')
    with pytest.raises(ReplicaMarkerError, match="is damaged") as refused:
        prepare_clone(HUB, replica, "r")
    assert refused.value.path == str(replica / MARKER)
    assert (replica / MARKER).read_bytes() == b'{"hub": 7}', "left as it was"
    for argv in (["clone", HUB, str(replica)], ["--home", str(replica), "lessons", "list"]):
        done = cli(*argv)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1
        assert "REPLICA is damaged" in done.stderr
        assert "clone the hub into a new directory" in done.stderr


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    server = HubProcess(tmp_path / "hub", tmp_path / "hub.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_a_clone_killed_while_its_marker_is_half_written_runs_again(
        hub: HubProcess, tmp_path: Path) -> None:
    """A real SIGKILL while the marker's ``.partial`` copy is there (before its rename)."""
    lessonledger = [str(Path(sys.executable).with_name("lessonledger"))]
    env = {**os.environ, "LESSONLEDGER_SYNC": "os"}  # fsync on: the window is its length
    for attempt in range(20):
        replica = tmp_path / f"r{attempt}"
        clone = subprocess.Popen([*lessonledger, "clone", hub.endpoint, str(replica),
                                  "--name", "r"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while clone.poll() is None and time.monotonic() < deadline \
                and not (replica / MARKER).exists():
            if (replica / f"{MARKER}.partial").exists():
                os.kill(clone.pid, signal.SIGKILL)
                break
        if clone.poll() is None and (replica / MARKER).exists():
            clone.kill()
        clone.wait()
        if clone.returncode == -signal.SIGKILL and not (replica / MARKER).exists():
            break
    else:
        pytest.skip("the kill never landed while the marker was being written")
    assert os.listdir(replica) == [f"{MARKER}.partial"]
    again = subprocess.run([*lessonledger, "clone", hub.endpoint, str(replica), "--name", "r"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-600:]
    assert read_marker(replica) == ReplicaInfo(hub=hub.endpoint, name="r")
    verified = subprocess.run([*lessonledger, "--home", str(replica), "verify"], env=env,
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
