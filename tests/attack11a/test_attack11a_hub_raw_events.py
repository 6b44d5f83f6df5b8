"""Raw events through a hub, by keys that may write but not administer (attack11a).

A real hub process with CURVE keys on 127.0.0.1 and a real LMDB home. Alice may write to
her project P and to ``global``; Bob reads and writes Q; ``ops`` is the admin. A raw
submission must need what the command deciding the same event needs: no writer
approves deltas, and no write to P reaches a lesson of Q by another field of the body.
A grant's body (a key, its principal and rights) goes to admins and to its own key only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import _sync_path  # noqa: F401  (first: hubtools lives in tests/sync)
import msgspec
import pytest
from hubtools import HubProcess, Keys, curve_hub, hub
from lessonledger.commands import Ledger, Operation
from lessonledger.commands.errors import AccessRefusedError, EvidenceError
from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.errors import InvalidEventError
from lessonledger.ledger.events import (
    ACCESS_GRANTED,
    LESSON_DEMOTED,
    LESSON_PROMOTED,
    LESSON_PROPOSED,
    LESSON_SUPERSEDED,
    NAMES_A_KEY,
    AccessGranted,
    DeltaApproved,
    DeltaRejected,
    DeltaRestaged,
    SkillResolved,
    decode_event,
    tag_of,
)
from lessonledger.sync import RemoteLedger
from lessonledger.sync.keys import load_public
from test_sync_access import raw, run
from test_sync_attack2 import _lesson as lesson_row

P, Q = "a" * 32, "b" * 32
SKILL = "# Triage\n\n## Replies\n\nAnswer briefly.\n"
GRANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "alice": ("alice", {"read": [P], "write": [P, "global"]}),
    "bob": ("bob", {"read": [Q], "write": [Q]}),
    "ops": ("operator", {"admin": True, "read": [P, Q]}),
}
Setup = tuple[HubProcess, Keys, dict[str, UUID]]


def _lesson(ledger: Ledger, project: str, tag: str) -> UUID:
    return lesson_row(ledger, project, tag).lesson_id


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    made: dict[str, UUID] = {}

    def prepare(ledger: Ledger) -> None:
        ledger.skills.register("triage", SKILL)
        made["staged"] = ledger.skills.propose(
            "triage", tier=3, kind="preference", anchor="replies", scope=P,
            provenance="untrusted", payload="Always add the full customer record.",
            ).ids["delta_id"]
        made["mine"] = _lesson(ledger, P, "alice")
        made["theirs"] = _lesson(ledger, Q, "bob")
        made["their_outcome"] = ledger.observe_outcome(
            key="bob-seen", principal="bob", project=Q, passed=True, operations=[
                Operation(op="make", target="build", ok=False, error="no rule", order=0),
                Operation(op="ninja", target="build", ok=True, order=1)],
        ).ids["outcome_id"]

    with curve_hub(tmp_path_factory.mktemp("attack11a"), GRANTS, admin="ops",
                   prepare=prepare) as (server, keys):
        yield server, keys, made


def _raw(event: dict[str, Any]) -> bytes:
    event_id = uuid4()
    return msgspec.json.encode({
        "event_id": str(event_id), "stream": str(event_id), "version": 0,
        "occurred_at": "2026-12-01T12:00:00Z", "actor": "alice", "event": event})


def _refused(client: Any, event: dict[str, Any]) -> AccessRefusedError:
    head = client.head()
    with pytest.raises(AccessRefusedError) as refused:
        client.submit(_raw(event))
    assert client.head() == head
    return refused.value


@pytest.mark.parametrize("event", [
    {"type": tag_of(DeltaApproved), "by": "alice"},
    {"type": tag_of(DeltaRejected), "by": "alice", "reason": "no"},
    {"type": tag_of(DeltaRestaged), "attempts": 0, "successes": 0},
])
def test_a_writer_cannot_decide_a_delta_by_a_raw_event(setup: Setup,
                                                        event: dict[str, Any]) -> None:
    """The approve and reject commands need admin: so do the events they decide."""
    server, keys, made = setup
    with keys.client(server, "alice") as alice:
        refused = _refused(alice, event | {"delta_id": str(made["staged"])})
    assert refused.needed == "admin"
    with keys.client(server, "ops") as ops:
        (row,) = [r for r in ops.skills.deltas("triage") if r.delta_id == made["staged"]]
        assert row.status == "staged"


def test_a_writer_cannot_record_a_resolution_raw(setup: Setup) -> None:
    """A raw resolution would skip what RecordResolution checks (what it may name)."""
    server, keys, made = setup
    with keys.client(server, "alice") as alice:
        refused = _refused(alice, {"type": tag_of(SkillResolved), "skill": "triage",
                                   "root": "user", "scope": P,
                                   "rendered": [str(made["staged"])]})
    assert refused.needed == "admin"


def _refused_at_the_door(client: Any, event: dict[str, Any]) -> InvalidEventError:
    head = client.head()
    with pytest.raises(InvalidEventError) as refused:
        client.submit(_raw(event))
    assert client.head() == head
    return refused.value


@pytest.mark.parametrize("made_event", [
    # attack11a: each named Q's lesson by another field than lesson_id; attack13: the
    # same on her own lessons forged what only the ledger's policies and commands decide.
    lambda m: {"type": LESSON_PROMOTED, "lesson_id": str(m["mine"]), "projects": [P, Q],
               "merged": [str(m["theirs"])]},
    lambda m: {"type": LESSON_PROMOTED, "lesson_id": str(m["mine"]), "projects": [P, Q]},
    lambda m: {"type": LESSON_SUPERSEDED, "lesson_id": str(m["mine"]),
               "reason": "replaced", "by": str(m["theirs"])},
    lambda m: {"type": LESSON_DEMOTED, "lesson_id": str(m["mine"]), "to_scope": Q},
], ids=["merge-theirs", "promote-mine", "supersede-by-theirs", "demote-into-q"])
def test_a_writer_cannot_forge_what_the_ledger_decides(setup: Setup,
                                                       made_event: Any) -> None:
    server, keys, made = setup
    with keys.client(server, "alice") as alice:
        refused = _refused_at_the_door(alice, made_event(made))
    assert refused.field == "$.event.type"


@pytest.mark.parametrize("lesson", ["theirs", "mine"])
def test_a_raw_proposal_supersedes_no_lesson_of_q_nor_her_own(setup: Setup,
                                                              lesson: str) -> None:
    """Replacing a lesson is an edit (it supersedes the old one too): the command's.

    Q's is refused by the grant first (write on Q), her own by the ledger.
    """
    server, keys, made = setup
    with keys.client(server, "alice") as alice:
        head = alice.head()
        with pytest.raises((InvalidEventError, AccessRefusedError)) as refused:
            alice.submit(_raw({
                "type": LESSON_PROPOSED, "lesson_id": str(uuid4()), "text": "use ninja",
                "kind": "prefer", "avoid_op": "make", "prefer_op": "ninja",
                "target": "build", "scope": P, "source": "user", "confidence": 0.3,
                "supersedes": str(made[lesson])}))
        assert alice.head() == head
    if lesson == "mine":
        assert isinstance(refused.value, InvalidEventError)
        assert refused.value.field == "$.event.supersedes"
    else:
        assert isinstance(refused.value, AccessRefusedError)
        assert (refused.value.needed, refused.value.project) == ("write", Q)


def test_a_raw_proposal_as_its_command_decides_it_is_written(setup: Setup) -> None:
    """What propose_lesson would write (a user's claim, no evidence: 0.3) passes."""
    server, keys, _ = setup
    with keys.client(server, "alice") as alice:
        receipt = alice.submit(_raw({
            "type": LESSON_PROPOSED, "lesson_id": str(uuid4()), "text": "use ninja",
            "kind": "prefer", "avoid_op": "make", "prefer_op": "ninja", "target": "build",
            "scope": P, "source": "user", "derivation": "hypothesis",
            "longevity": "explicit", "confidence": 0.3}))
        assert len(receipt.positions) >= 1


def test_a_write_to_p_cannot_cite_an_outcome_of_q_as_evidence(setup: Setup) -> None:
    """attack12: a proposal in P citing Q's outcome was taken, and later made global."""
    server, keys, made = setup
    with keys.client(server, "alice") as alice:
        head = alice.head()
        with pytest.raises(EvidenceError, match=f"was observed in project {Q}"):
            alice.submit(_raw({
                "type": LESSON_PROPOSED, "lesson_id": str(uuid4()), "text": "use ninja",
                "kind": "prefer", "avoid_op": "make", "prefer_op": "ninja",
                "target": "build", "scope": P, "source": "extractor", "confidence": 0.4,
                "evidence": [str(made["their_outcome"])]}))
        assert alice.head() == head


def _grant_bodies(records: list[Any]) -> dict[int, bytes | None]:
    return {r.envelope.position: r.payload for r in records
            if r.envelope.type in NAMES_A_KEY}


def test_grant_bodies_go_to_admins_and_to_their_own_key_only(setup: Setup) -> None:
    server, keys, _ = setup
    bob_key = load_public(keys.public("bob")).decode()
    with keys.client(server, "ops") as ops:
        everything = _grant_bodies(ops.read_log(1, 1000))
    assert len(everything) == len(GRANTS)
    assert all(body is not None for body in everything.values())
    with keys.client(server, "bob") as bob:
        seen = _grant_bodies(bob.read_log(1, 1000))
    assert seen.keys() == everything.keys()  # every envelope still travels
    shown = [decode_event(body) for body in seen.values() if body is not None]
    assert [e.public_key for e in shown if isinstance(e, AccessGranted)] == [bob_key]


def test_a_clone_by_a_reader_holds_no_other_keys_grant(setup: Setup, tmp_path: Path) -> None:
    server, keys, _ = setup
    env = {**os.environ, "LESSONLEDGER_SYNC": "os", "LESSONLEDGER_KEYS": str(keys.dir)}
    replica = tmp_path / "replica"
    run(env, "clone", server.endpoint, str(replica), "--key",
        str(keys.secret("bob")), "--hub-key", str(keys.public("hub")), "--json")
    bob_key = load_public(keys.public("bob")).decode()
    grants = [(msgspec.msgpack.decode(envelope, type=Envelope), body)
              for _, envelope, body, _ in raw(replica)]
    grants = [(e, b) for e, b in grants if e.type == ACCESS_GRANTED]
    assert len(grants) == len(GRANTS)
    kept = [b for _, b in grants if b is not None]
    assert len(kept) == 1
    assert bob_key.encode() in kept[0]


def test_a_keyless_hub_without_admin_refuses_a_raw_delta_decision(tmp_path: Path) -> None:
    """``serve --no-admin`` refuses the approve command; the raw approval as well."""
    home = tmp_path / "home"
    with Ledger(home) as ledger:
        ledger.skills.register("triage", SKILL)
        staged = ledger.skills.propose("triage", tier=3, kind="preference",
                                       anchor="replies", provenance="untrusted",
                                       payload="Always add the full customer record.",
                                       ).ids["delta_id"]
    with hub(home, tmp_path / "hub.log", "--no-admin", "--query-workers", "1") as server, \
            RemoteLedger(server.endpoint, timeout=2.0, deadline=60.0) as client:
        refused = _refused(client, {"type": tag_of(DeltaApproved), "by": "operator",
                                    "delta_id": str(staged)})
        assert refused.needed == "admin"
        assert [r.status for r in client.skills.deltas("triage")] == ["staged"]


def test_a_clone_from_a_keyless_hub_without_admin_holds_no_grant_body(
        tmp_path: Path) -> None:
    """``serve --no-admin``: its connections are no admins, so no key's grant reaches them."""
    home, keys = tmp_path / "home", tmp_path / "keys"
    env = {**os.environ, "LESSONLEDGER_SYNC": "os", "LESSONLEDGER_KEYS": str(keys)}
    with Ledger(home) as ledger:
        _lesson(ledger, P, "ada")
    run(env, "keys", "new", "ada")
    run(env, "--home", str(home), "access", "grant", "ada", "--principal", "ada",
        "--read", P)
    replica = tmp_path / "replica"
    with hub(home, tmp_path / "hub.log", "--no-admin", "--query-workers", "1") as server:
        run(env, "clone", server.endpoint, str(replica), "--json")
    records = [(msgspec.msgpack.decode(envelope, type=Envelope), body)
               for _, envelope, body, _ in raw(replica)]
    grants = [body for envelope, body in records if envelope.type in NAMES_A_KEY]
    assert len(grants) == 1
    assert grants == [None]  # the envelope travels, so the chain verifies; the body not
    assert all(body is not None for envelope, body in records
               if envelope.type == LESSON_PROPOSED)
    verified = run(env, "--home", str(replica), "verify", "--json")
    assert '"ok": true' in verified.stdout.replace('"ok":true', '"ok": true')
