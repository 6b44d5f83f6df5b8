"""The actor field names a person (attack16): a hub binds it, push and erasure heed it.

An envelope's ``actor`` that is not a role (agent, policy, ledger) is a person whose data
the record is: erasing that principal takes it, and a subject-access export shows it.

GUARDS: each test failed on fe9130e: a key wrote as actor alice (and an admin recorded
"mallory" as who erased), a command naming the erased principal as actor was accepted
back by a push, and a replica acknowledged alice's erasure with her command still in
its outbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import _attack16_paths  # noqa: F401  (first: puts hubtools on the path)
import msgspec
from hubtools import curve_hub
from lessonledger.commands import open_ledger
from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.replica import prepare_clone, pull, push, queue_commands
from lessonledger.sync.service import SyncService
from lessonledger.sync.state import SyncState
from residue import windows, windows_left

P = "3f9a0c1b2d4e5f60"


def _envelopes(home: Path) -> list[tuple[Envelope, bytes | None]]:
    lmdb_home = acquire(str(home), sync=False)
    try:
        return [(msgspec.msgpack.decode(e, type=Envelope), b)
                for _, e, b, _ in EventLog(lmdb_home, LOG_NAME).raw(1)]
    finally:
        release(lmdb_home)


def test_a_key_writes_as_actor_only_itself_or_a_role(tmp_path: Path) -> None:
    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P], "write": [P]}),
        "writer": ("wes", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path, grants, admin="admin") as (server, keys):
        with keys.client(server, "writer") as wes:
            named = wes.observe_outcome(key="w1", project=P, passed=True, actor="alice",
                                        task="wes wrote this, not alice")
            role = wes.observe_outcome(key="w2", project=P, passed=True, actor="agent",
                                       task="an agent of wes wrote this")
        with keys.client(server, "admin") as admin:
            admin.erase(key="e1", what="outcome", subject=str(role.ids["outcome_id"]),
                        reason="r", actor="mallory")
        envelopes = {e.position: e for e, _ in _envelopes(server.home)}
    assert {(envelopes[p].actor, envelopes[p].principal) for p in named.positions
            if envelopes[p].type == "outcome.observed"} == {("wes", "wes")}
    assert {envelopes[p].actor for p in role.positions
            if envelopes[p].type == "outcome.observed"} == {"agent"}
    (erased,) = [e for e in envelopes.values() if e.type == "erasure.erased"]
    assert (erased.actor, erased.principal) == ("root", "root")


def _replica_of(hub: Path, replica: Path, service: SyncService) -> None:
    prepare_clone("tcp://127.0.0.1:1", replica, "r1")
    pull(replica, LocalExchange(service), sync=False)


def test_a_pushed_command_naming_an_erased_principal_as_actor_is_refused(
        tmp_path: Path) -> None:
    """An in-process hub (no key, no keyless principal): the actor is the command's own."""
    hub, replica = tmp_path / "hub", tmp_path / "r1"
    task = "alice stale task wrenmoor copper kettle"
    with open_ledger(hub, sync=False) as ledger:
        ledger.observe_outcome(key="a0", principal="alice", project=P, passed=True)
        service = SyncService(ledger)
        _replica_of(hub, replica, service)
        line = json.dumps({"command": "observe_outcome", "key": "k-alice", "project": P,
                           "actor": "alice", "passed": True, "task": task})
        queue_commands(replica, [line.encode()], sync=False)
        ledger.erase(key="e", what="principal", subject="alice", reason="asked")
        outcome = push(replica, LocalExchange(service), sync=False)
    (result,) = outcome.results
    assert "principal 'alice' was erased" in result.refused, result
    assert not [b for _, b in _envelopes(hub) if b and task.encode() in b]


def test_an_erasure_of_the_actor_takes_the_replicas_queued_command(tmp_path: Path) -> None:
    """The command waits in the outbox (never pushed) when alice is erased at the hub."""
    hub, replica = tmp_path / "hub", tmp_path / "r1"
    task = "alice private task quillmoor harbour ledger tallow"
    with open_ledger(hub, sync=False) as ledger:
        ledger.observe_outcome(key="a0", principal="alice", project=P, passed=True)
        service = SyncService(ledger)
        _replica_of(hub, replica, service)
        line = json.dumps({"command": "observe_outcome", "key": "k-alice", "project": P,
                           "actor": "alice", "passed": True, "task": task})
        queue_commands(replica, [line.encode()], sync=False)
        assert windows_left(str(replica), windows([task.encode()])), "the control"
        ledger.erase(key="e", what="principal", subject="alice", reason="asked")
        pulled = pull(replica, LocalExchange(service), sync=False)
    assert pulled.erasures
    lmdb_home = acquire(str(replica), sync=False)
    try:
        state = SyncState(lmdb_home)  # before the transaction: opening a tree writes
        with lmdb_home.env.begin() as txn:
            assert state.outbox(txn) == []
    finally:
        release(lmdb_home)
    assert windows_left(str(replica), windows([task.encode()])) == {}
