"""A push to a keyless hub is the hub's principal's, as its other writes are (attack6).

A keyless hub (``serve --principal P``) stamps P on every command a connection sends,
refuses one naming another principal, and with ``--no-admin`` refuses ledger-wide
commands. A replica's ``push`` went around all three: its commands were written with
whatever principal they named (``mallory``) or none (``""``), and a ``reconcile``
pushed to a ``--no-admin`` hub was run. So ``erase --principal P`` left every pushed
command's content at the hub, and anyone on the hub's loopback could write as anyone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hubtools import hub, lessonledger
from lessonledger.commands import open_ledger
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.sync.state import SyncState

P = "3f9a0c1b2d4e5f60"


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([lessonledger(), *args], input=stdin, capture_output=True,
                          timeout=120)


def _outcome(key: str, task: str, **extra: str) -> bytes:
    return json.dumps({"command": "observe_outcome", "key": key, "session": "s-push",
                       "project": P, "passed": True, "signal": "verification",
                       "task": task, **extra}).encode() + b"\n"


def test_a_pushed_command_is_the_keyless_hubs_principal_and_goes_with_its_erasure(
        tmp_path: Path) -> None:
    home, replica = tmp_path / "hub", tmp_path / "replica"
    with hub(home, tmp_path / "hub.log", "--principal", "alice",
             "--query-workers", "1") as server:
        assert _cli("clone", server.endpoint, str(replica)).returncode == 0
        queued = _cli("--home", str(replica), "publish", "-", stdin=(
            _outcome("plain", "ALICE-PUSHED-TASK-0123456789abcdef")
            + _outcome("spoof", "MALLORY-SPOOFED-TASK-0123456789", principal="mallory")))
        assert queued.returncode == 0, queued.stderr
        pushed = _cli("--home", str(replica), "push", "--json")
        assert pushed.returncode == 1, pushed.stderr  # one of them refused
        results = {r["key"]: r for r in json.loads(pushed.stdout)["results"]}
        assert results["plain"]["refused"] == ""
        # The same command sent straight to the hub is refused; pushed, it is too.
        assert "the principal is the one bound" in results["spoof"]["refused"]
    with open_ledger(home, sync=False) as ledger:
        written = [r.envelope.principal for r in ledger.log.scan()
                   if b"PUSHED" in (r.payload or b"") or b"SPOOFED" in (r.payload or b"")]
    assert written == ["alice"]
    erased = _cli("--home", str(home), "erase", "--principal", "alice", "--reason", "t")
    assert erased.returncode == 0, erased.stderr
    for path in home.rglob("*"):
        if path.is_file():
            assert b"ALICE-PUSHED-TASK" not in path.read_bytes(), path


def test_a_no_admin_keyless_hub_refuses_a_pushed_reconcile(tmp_path: Path) -> None:
    home, replica = tmp_path / "hub", tmp_path / "replica"
    with hub(home, tmp_path / "hub.log", "--no-admin", "--query-workers", "1") as server:
        assert _cli("clone", server.endpoint, str(replica)).returncode == 0
        direct = _cli("publish", "--to", server.endpoint, "-", stdin=json.dumps(
            {"command": "reconcile", "key": "rc-direct", "now": "2026-11-29T00:00:00Z"}
        ).encode())
        assert direct.returncode == 2, direct
        assert b"admin" in direct.stderr, direct
        queued = _cli("--home", str(replica), "publish", "-", stdin=json.dumps(
            {"command": "reconcile", "key": "rc-pushed", "now": "2026-11-29T00:00:00Z"}
        ).encode())
        assert queued.returncode == 0, queued.stderr
        pushed = _cli("--home", str(replica), "push", "--json")
        results = json.loads(pushed.stdout)["results"]
        assert [r["key"] for r in results] == ["rc-pushed"]
        assert "admin" in results[0]["refused"], results
    with open_ledger(home, sync=False) as ledger:
        assert ledger.log.head() == 0


def test_a_queued_command_of_an_erased_principal_leaves_the_replicas_outbox(
        tmp_path: Path) -> None:
    """The replica's outbox is one of its files: a principal's erasure takes from it too.

    A command queued on a replica names no principal (the hub stamps its own): the
    replica dropped only those whose JSON named the erased principal, so the content
    of every other queued command of that principal stayed in its files for good.
    """
    home, replica = tmp_path / "hub", tmp_path / "replica"
    with hub(home, tmp_path / "hub.log", "--principal", "alice",
             "--query-workers", "1") as server:
        published = _cli("publish", "--to", server.endpoint, "-",
                         stdin=_outcome("at-hub", "alice at the hub"))
        assert published.returncode == 0, published.stderr
        assert _cli("clone", server.endpoint, str(replica)).returncode == 0
        queued = _cli("--home", str(replica), "publish", "-",
                      stdin=_outcome("queued", "ALICE-QUEUED-TASK-0123456789abcdef"))
        assert queued.returncode == 0, queued.stderr
        assert any(b"ALICE-QUEUED-TASK" in p.read_bytes() for p in replica.rglob("*")
                   if p.is_file())
        # Beside the running hub: the erasure stands, its compaction waits (exit 3).
        erased = _cli("--home", str(home), "erase", "--principal", "alice", "--reason", "t")
        assert erased.returncode == 3, erased.stderr
        pulled = _cli("--home", str(replica), "pull", "--json")
        assert pulled.returncode == 0, pulled.stderr
        assert json.loads(pulled.stdout)["erasures"], pulled.stdout
    for path in replica.rglob("*"):
        if path.is_file():
            assert b"ALICE-QUEUED-TASK" not in path.read_bytes(), path
    lmdb_home = acquire(str(replica), sync=False)
    try:
        state = SyncState(lmdb_home)
        with lmdb_home.env.begin() as txn:
            assert state.outbox(txn) == []
    finally:
        release(lmdb_home)
