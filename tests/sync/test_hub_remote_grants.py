"""An operator grants and revokes through the hub: the grantee is whom the grant names.

``access grant --to`` sends a ``GrantAccess`` whose ``principal`` is the grantee. The
hub binds the *caller* to its key as the grant's ``actor`` (so an auditor sees which
admin granted it) and keeps the grantee as given: a new agent gets a principal of its
own, not the admin's.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from hubtools import HubProcess, Keys, curve_hub, lessonledger
from lessonledger.commands import Ledger
from lessonledger.commands.access import GrantAccess, RevokeAccess
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.ledger.events import ACCESS_GRANTED
from lessonledger.sync.keys import load_public

P = "c" * 32


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    with curve_hub(tmp_path_factory.mktemp("grants"), {"ops": ("ada", {"admin": True})},
                   admin="ops", keys=("newbie",)) as started:
        yield started


def test_an_admin_grants_another_principal_remotely(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "ops") as ops:
        receipt = ops.execute(GrantAccess(
            key="grant-newbie", key_name="newbie", actor="someone-else",
            public_key=load_public(keys.public("newbie")).decode(),
            principal="nora", read=[P], write=[P]))
        (granted,) = ops.read_log(receipt.positions[0], 1)
    assert granted.envelope.type == ACCESS_GRANTED
    assert granted.envelope.actor == "ada", "the admin bound to the key granted it"
    with keys.client(server, "newbie", timeout=1.0, deadline=20.0) as newbie:
        written = newbie.observe_outcome(key="nora-1", project=P, passed=True)
        (record,) = newbie.read_log(written.positions[0], 1)
        assert record.envelope.principal == "nora"
        # Her grant is hers: no admin rights came with the admin's call.
        with pytest.raises(AccessRefusedError):
            newbie.erase(key="nora-erase", what="session", subject="x")
    with keys.client(server, "ops") as ops:
        ops.execute(RevokeAccess(key="revoke-newbie", key_name="newbie"))
    with Ledger(server.home) as ledger:
        assert "newbie" not in {g.key_name for g in ledger.grants()}


def _cli(server: HubProcess, keys: Keys, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [lessonledger(), "access", *args, "--to", server.endpoint,
         "--key-file", str(keys.secret("ops")), "--server-key", str(keys.public("hub"))],
        capture_output=True, text=True, timeout=120)


def test_access_grant_and_revoke_take_to(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    done = _cli(server, keys, "grant", "cli-newbie", "--principal", "nils",
                "--write", P, "--key", str(keys.public("newbie")), "--json")
    assert done.returncode == 0, done.stderr
    granted = json.loads(done.stdout)
    assert (granted["principal"], granted["write"]) == ("nils", [P])
    with Ledger(server.home) as ledger:
        (grant,) = [g for g in ledger.grants() if g.key_name == "cli-newbie"]
        assert grant.principal == "nils"
        (record,) = ledger.log.read(grant.granted_at, limit=1)
        assert record.envelope.actor == "ada"
    done = _cli(server, keys, "revoke", "cli-newbie", "--json")
    assert done.returncode == 0, done.stderr
    unknown = _cli(server, keys, "revoke", "no-such-key")
    assert unknown.returncode == 2
    assert len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
