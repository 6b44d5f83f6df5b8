"""A hub restored from a snapshot taken before an erasure (attack14): what a stale
replica's outbox can bring back to it."""

from __future__ import annotations

import json
from pathlib import Path

import _attack14_paths  # noqa: F401
from _attack14_tools import lines, raw, run
from hubtools import HubProcess
from lessonledger.commands import open_ledger
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.sync.protocol import Push, Pushed, decode_reply, encode
from lessonledger.sync.replica import push
from lessonledger.sync.state import SyncState
from lessonledger.sync.transport import ZmqExchange

P = "3f9a0c1b2d4e5f60"
#: What the erased session's agent wrote while its replica was away from the hub.
QUEUED = "sess-x queued note: the quarrymoor contract renewal terms are in dispute"


def _outbox(home: Path) -> list[tuple[int, bytes]]:
    lmdb_home = acquire(str(home), sync=False)
    try:
        state = SyncState(lmdb_home)
        with lmdb_home.env.begin() as txn:
            return [(q.based_on, q.command) for _, q in state.outbox(txn)]
    finally:
        release(lmdb_home)


def test_a_hub_restored_before_an_erasure_refuses_the_erased_session_s_stale_commands(
        tmp_path: Path) -> None:
    """FAILED on cc978dc: session sess-x is erased at the hub; its stale replica's queued command
    (made before the erasure) is refused there, but the hub restored by `checkout` from
    a snapshot taken before the erasure keeps only the erased positions, not whose they
    were, and writes the command: the erased session's content is accepted back. Breaks
    DESIGN §7 "tombstones are checked on every fetch, push and restore, so a stale
    replica or an old backup can never bring erased content back"."""
    home = tmp_path / "hub"
    with open_ledger(home, sync=False) as ledger:
        for i in range(6):
            ledger.observe_outcome(key=f"o{i}", project=P, passed=True,
                                   session=("sess-x", "sess-y")[i % 2], task=f"task {i}")
    hub = HubProcess(home, tmp_path / "hub.log")
    hub.start()
    restored_hub = None
    try:
        replica = tmp_path / "r"
        run("clone", hub.endpoint, str(replica), "--name", "r")
        run("--home", str(home), "snapshot", "--name", "before", "--json")
        line = json.dumps({"command": "observe_outcome", "key": "late-x", "project": P,
                           "session": "sess-x", "passed": False, "task": QUEUED})
        run("--home", str(replica), "publish", "-", stdin=line + "\n")
        erased = run("--home", str(home), "erase", "--session", "sess-x", "--reason",
                     "asked", "--json", check=False)
        assert erased.returncode == 3, erased.stderr
        [(based_on, command)] = _outbox(replica)
        # The control: the hub itself refuses the stale command (sent by hand, so the
        # outbox keeps it).
        with ZmqExchange(hub.endpoint, timeout=30) as exchange:
            answer = decode_reply(exchange.call(encode(Push("r", [based_on], [command]))))
        assert isinstance(answer, Pushed)
        assert "erased" in answer.results[0].refused
        restored = tmp_path / "restored"
        out = lines("--home", str(home), "checkout", "before", "--into", str(restored),
                    "--json")[0]
        assert out["erased_later"] > 0
    finally:
        hub.kill()
    restored_hub = HubProcess(restored, tmp_path / "restored.log")
    restored_hub.start()
    try:
        with ZmqExchange(restored_hub.endpoint, timeout=30) as exchange:
            pushed = push(replica, exchange, sync=False)
    finally:
        restored_hub.kill()
    written = [body for _, _, body, _ in raw(restored) if body and QUEUED.encode() in body]
    assert not written, f"the restored hub wrote the erased session's command: {pushed.results}"
    assert pushed.results[0].refused
