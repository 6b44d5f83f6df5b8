"""Erasure on replicas (attack14): is an acknowledgement true of every file of the replica?"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _attack14_paths  # noqa: F401  (first: puts hubtools on the path)
import msgspec
import pytest
from _attack14_tools import TamperingRelay, lines, raw, run
from hubtools import HubProcess
from lessonledger.ledger.envelope import SALT_BYTES, Envelope
from lessonledger.ledger.events import OutcomeObserved, decode_event
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.sync.protocol import Pushed
from lessonledger.sync.replica import push
from lessonledger.sync.state import SyncState
from lessonledger.sync.transport import ZmqExchange
from residue import windows, windows_left

P = "3f9a0c1b2d4e5f60"
TASK = "migrate the payroll export for the tallowmere office to the new ledger"
ERROR = "tallowmere export refused: column salary_band_secret does not exist"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    server = HubProcess(tmp_path / "hub", tmp_path / "hub.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _outcome_of(home: Path, task: str) -> str:
    for _, stored, body, _ in raw(home):
        envelope = msgspec.msgpack.decode(stored, type=Envelope)
        if body is not None and envelope.type == "outcome.observed":
            event = decode_event(body[SALT_BYTES:])
            if isinstance(event, OutcomeObserved) and event.task == task:
                return str(event.outcome_id)
    msg = f"no outcome {task!r} in {home}"
    raise AssertionError(msg)


def _lost_push_then_erased(hub: HubProcess, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A replica's push whose answer is lost, then the hub erases the pushed outcome and
    the replica pulls: the replica and what its pull said."""
    relay = TamperingRelay(hub.endpoint,
                           drop=lambda reply: isinstance(reply, Pushed) and not relay.dropped)
    replica = tmp_path / "r1"
    try:
        run("clone", relay.url, str(replica), "--name", "r1")
        line = json.dumps({"command": "observe_outcome", "key": "k-payroll", "project": P,
                           "passed": False, "task": TASK, "operations": [
                               {"op": "export", "target": "payroll", "ok": False,
                                "error": ERROR}]})
        run("--home", str(replica), "publish", "-", stdin=line + "\n")
        lost = run("--home", str(replica), "push", "--timeout", "3", check=False)
        assert lost.returncode != 0, lost.stderr
        assert relay.dropped == 1
        outcome = _outcome_of(hub.home, TASK)  # the hub wrote it; the answer was lost
        erased = run("--home", str(hub.home), "erase", "--outcome", outcome, "--reason",
                     "asked", "--json", check=False)
        assert erased.returncode == 3, erased.stderr  # the server holds the hub open
        pulled = lines("--home", str(replica), "pull", "--json")[0]
    finally:
        relay.close()
    return replica, pulled


def test_a_replica_acknowledges_an_outcome_erasure_while_its_outbox_holds_the_outcome(
        hub: HubProcess, tmp_path: Path) -> None:
    """FAILED on cc978dc: a push whose answer was lost on the way leaves the command in the outbox
    (as designed: it is sent again), but when the hub then erases that outcome, the
    replica's pull drops queued commands only for a principal or session erasure, so it
    compacts and acknowledges while its data file still holds the erased task and error
    text in the outbox. Breaks DESIGN §7 "no byte of the erased content remains in any
    file of any replica" and the honesty of the `erasures` acknowledgement (issue 14 §5)."""
    replica, pulled = _lost_push_then_erased(hub, tmp_path)
    assert len(pulled["erasures"]) == 1  # applied, compacted and acknowledged
    acked = lines("--home", str(hub.home), "erasures", "--json")
    assert acked
    assert "r1" in acked[-1]["acked_by"], acked
    left = windows_left(str(replica), windows([TASK.encode(), ERROR.encode()]))
    assert left == {}, (f"after acknowledging the erasure the replica still holds it: "
                        f"{left}; its outbox: {_outbox(replica)}")


def _outbox(home: Path) -> list[bytes]:
    lmdb_home = acquire(str(home), sync=False)
    try:
        state = SyncState(lmdb_home)  # before the transaction: opening a tree writes
        with lmdb_home.env.begin() as txn:
            return [queued.command for _, queued in state.outbox(txn)]
    finally:
        release(lmdb_home)


def test_guard_the_outbox_pushed_after_the_erasure_does_not_bring_the_outcome_back(
        hub: HubProcess, tmp_path: Path) -> None:
    """GUARD: the command the outbox kept is dropped by the pull that applies the erasure
    of what the hub wrote from it, so a push after it sends nothing and nothing of it is
    written again. (Before that drop, the command pushed again was taken for a retry:
    its key's first event is an erased envelope.)"""
    replica, _ = _lost_push_then_erased(hub, tmp_path)
    assert _outbox(replica) == []
    with ZmqExchange(hub.endpoint, timeout=30) as exchange:
        outcome = push(replica, exchange, sync=False)
    assert [r.refused for r in outcome.results] == []
    rows = raw(hub.home)
    assert all(TASK.encode() not in (body or b"") for _, _, body, _ in rows)
    observed = [msgspec.msgpack.decode(stored, type=Envelope).type == "outcome.observed"
                for _, stored, _, _ in rows]
    assert sum(observed) == 1  # the first, erased; none written again
