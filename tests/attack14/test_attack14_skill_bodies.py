"""Partial replicas and the skill layer (attack14): the bodies about a delta of a project
the key may not read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _attack14_paths  # noqa: F401  (first: puts hubtools on the path)
import msgspec
import pytest
from _attack14_tools import raw, run
from hubtools import HubProcess, Keys, curve_hub
from lessonledger.commands import Ledger
from lessonledger.ledger.envelope import Envelope
from residue import windows, windows_left

P, Q = "a" * 32, "b" * 32
BODY = "# Triage\n\n## Drafting replies\nBe kind.\n"
#: What a person wrote about Q's deltas: Q's content, for Q's readers only.
REJECTED = "rejected: it quotes the qproject merger codename bluefinch at length"
ARCHIVED = "archived: leaked the qproject salary band for the harbour team"
PAYLOAD = "Say the qproject launch date is the ninth of brumaire."


@pytest.fixture(scope="module")
def skill_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    base = tmp_path_factory.mktemp("skills")

    def prepare(ledger: Ledger) -> None:
        ledger.skills.register("triage", BODY)
        staged = ledger.skills.propose(
            "triage", tier=3, kind="preference", anchor="drafting-replies",
            provenance="user_instruction", payload=PAYLOAD, scope=Q, key="q-1")
        ledger.skills.reject([staged.ids["delta_id"]], reason=REJECTED)
        other = ledger.skills.propose(
            "triage", tier=3, kind="caveat", anchor="drafting-replies",
            provenance="user_instruction", payload=PAYLOAD + " Twice.", scope=Q, key="q-2")
        ledger.skills.approve([other.ids["delta_id"]])
        ledger.skills.archive([other.ids["delta_id"]], reason=ARCHIVED)

    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "agent": ("ada", {"read": [P], "write": [P]}),
        "admin": ("root", {"admin": True, "read": [P, Q], "write": [P, Q]})}
    with curve_hub(base, grants, admin="admin", prepare=prepare) as (server, keys):
        yield server, keys


def test_a_reason_given_on_a_delta_of_an_unread_project_does_not_reach_a_replica(
        skill_hub: tuple[HubProcess, Keys], tmp_path: Path) -> None:
    """FAILED on cc978dc: a key that may read only P clones the hub and gets the bodies of the
    rejection and the archiving of Q's deltas, reasons and all: their envelopes have no
    scope, and the hub reads an empty scope as ledger-wide (``body_scope`` resolves the
    lesson's scope for events about a lesson, never the delta's). Breaks issue 14 item 4
    "bodies travel only for what the replica's key may read" and DESIGN §9 "one principal
    cannot read another's bodies"."""
    server, keys = skill_hub
    env = {**os.environ, "LESSONLEDGER_SYNC": "os", "LESSONLEDGER_KEYS": str(keys.dir)}
    replica = tmp_path / "r"
    run("clone", server.endpoint, str(replica), "--key", str(keys.secret("agent")),
        "--hub-key", str(keys.public("hub")), "--json", env=env)
    # The control: the delta's own payload (scope Q) is withheld, so the scan can see.
    assert windows_left(str(replica), windows([PAYLOAD.encode()])) == {}
    sent = {msgspec.msgpack.decode(e, type=Envelope).type
            for _, e, body, _ in raw(replica) if body is not None}
    leaked = windows_left(str(replica), windows([REJECTED.encode(), ARCHIVED.encode()]))
    assert leaked == {}, f"Q's reasons reached a P-only replica ({sorted(sent)})"
