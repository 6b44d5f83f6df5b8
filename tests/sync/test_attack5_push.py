"""A replica's outbox pushed after its key's grant changed (wave 3, attack5).

The hub writes a pushed command as the key's principal as of the push. A command queued
while the key was alice's, pushed once the key was granted to bob, was written as
bob's: erasing alice then left her content at the hub, for good.
"""

from __future__ import annotations

import json
from pathlib import Path

import zmq
from lessonledger.commands import open_ledger
from lessonledger.commands.access import GrantAccess
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.replica import prepare_clone, pull, push, queue_commands
from lessonledger.sync.service import SyncService

P = "3f9a0c1b2d4e5f60"


def _grant(key: str, public: str, principal: str, read: list[str]) -> GrantAccess:
    return GrantAccess(key=key, key_name="laptop", public_key=public, principal=principal,
                       read=read, write=[P])


def _outcome(key: str, task: str) -> bytes:
    return json.dumps({"command": "observe_outcome", "key": key, "session": "s",
                       "project": P, "passed": True, "task": task}).encode()


def test_a_command_made_under_another_principal_is_not_written_as_the_new_one(
        tmp_path: Path) -> None:
    public = zmq.curve_keypair()[0].decode()
    replica = tmp_path / "replica"
    with open_ledger(tmp_path / "hub", sync=False) as hub:
        hub.execute(_grant("g1", public, "alice", [P]))
        exchange = LocalExchange(SyncService(hub, authorize=True), public)
        prepare_clone("local", replica, "laptop")
        pull(replica, exchange, sync=False)
        queue_commands(replica, [_outcome("a1", "alice private task")], sync=False)
        hub.execute(_grant("g2", public, "bob", [P]))
        refused = push(replica, exchange, sync=False).results
        assert [r.key for r in refused] == ["a1"]
        assert "before key 'laptop' was 'bob'" in refused[0].refused
        assert not any(b"alice private task" in (r.payload or b"") for r in hub.log.scan())
        # Made under bob's grant, it is bob's; a grant widened for the same principal
        # keeps what was queued before it.
        queue_commands(replica, [_outcome("b1", "bob task")], sync=False)
        hub.execute(_grant("g3", public, "bob", [P, "0123456789abcdef"]))
        accepted = push(replica, exchange, sync=False).results
        assert [(r.key, r.refused) for r in accepted] == [("b1", "")]
        assert [r.envelope.principal for r in hub.log.scan()
                if b"bob task" in (r.payload or b"")] == ["bob"]
