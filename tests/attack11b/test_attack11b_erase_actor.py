"""``erase --principal P`` takes what P wrote as actor and bodies naming P (attack11b).

On main the audit index listed a principal's positions by the envelope's principal and
a grant's grantee only: erasing carol, who proposed a lesson as actor for bob, or dave,
who approved a delta, was "no event names principal", while a subject-access export of
either showed those events. The index now records actors and ``names_a_person``
bodies, and says in its saved header which format it holds: a home saved before the
change refolds its index instead of using one that lacks them.
"""

from __future__ import annotations

import os
from pathlib import Path
from uuid import UUID

import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.erasure import NothingToEraseError
from lessonledger.commands.errors import UnknownLessonError
from lessonledger.ledger.events import DeltaApproved, encode_event, tag_of
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.projections import audit_index as audit_module
from lessonledger.projections.audit_index import AuditIndex
from lessonledger.projections.runner import Runner
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import AUDIT_NAME, audit_index, registry

PROJECT = "3f9a0c1b2d4e5f60"


def _home(home: Path) -> tuple[UUID, UUID]:
    """Bob's lesson proposed by carol as actor, bob's own lesson, a delta dave approved."""
    with open_ledger(home, sync=False) as ledger:
        by_carol = ledger.propose_lesson(
            key="l1", project=PROJECT, principal="bob", actor="carol",
            text="Run pytest from the root", kind="prefer", avoid_op="pytest:tests/",
            prefer_op="pytest:root", target="tests").ids["lesson_id"]
        own = ledger.propose_lesson(
            key="l2", project=PROJECT, principal="bob", text="Use uv to install",
            kind="prefer", avoid_op="pip:install", prefer_op="uv:install",
            target="deps").ids["lesson_id"]
        ledger.skills.register("triage", "# Triage\n\n## Ranking\n\nRank.\n",
                               tools=["search"], key="reg")
        delta = ledger.skills.propose("triage", tier=3, kind="caveat", anchor="ranking",
                                      payload="Rank the oldest first.",
                                      provenance="user_instruction", key="d1",
                                      principal="bob")
        ledger.skills.approve([delta.ids["delta_id"]], key="a1", actor="dave")
    return by_carol, own


def _bodies(home: Path) -> dict[int, bool]:
    """Each position's body: there (True) or erased."""
    with open_ledger(home, sync=False) as ledger:
        return {r.envelope.position: r.payload is not None for r in ledger.log.scan()}


def test_erasing_an_actor_takes_what_it_wrote_and_nothing_of_others(tmp_path: Path) -> None:
    home = tmp_path / "h"
    by_carol, own = _home(home)
    with open_ledger(home, sync=False) as ledger:
        erasure = ledger.erase(key="e1", what="principal", subject="carol", reason="asked")
        assert erasure.erased
        assert ledger.lesson(own).text == "Use uv to install"  # bob's own stays
        with pytest.raises(UnknownLessonError):
            ledger.lesson(by_carol)
    bodies = _bodies(home)
    assert not any(bodies[p] for p in erasure.erased)
    assert sum(bodies.values()) > 0


def test_erasing_a_person_a_body_names_takes_it(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _home(home)
    with open_ledger(home, sync=False) as ledger:
        approvals = [r.envelope.position for r in ledger.log.scan()
                     if r.envelope.type == tag_of(DeltaApproved)]
        erasure = ledger.erase(key="e1", what="principal", subject="dave", reason="asked")
    assert approvals
    assert set(approvals) <= set(erasure.erased)


def test_a_body_naming_a_person_is_indexed_under_them(tmp_path: Path) -> None:
    """Not its envelope: a delta approved by dave, written by the ledger for nobody."""
    home = acquire(str(tmp_path / "h"), sync=False)
    try:
        log = EventLog(home, "ledger")
        approved = DeltaApproved(delta_id=UUID(int=7), by="dave")
        log.append([NewEvent(stream=UUID(int=1), version=0, type=tag_of(DeltaApproved),
                             payload=encode_event(approved), actor="ledger")])
        runner = Runner(registry())
        runner.fold(log)
        assert audit_index(runner).positions("principal", "dave") == [1]
        assert audit_index(runner).positions("principal", "ledger") == []  # a role, not a person
    finally:
        release(home)


def test_an_index_saved_in_an_older_format_is_folded_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    _home(home)
    # Save the index as a ledger of the previous format would have: its header says so.
    monkeypatch.setattr(audit_module, "FORMAT", 1)
    with open_ledger(home, sync=False) as ledger:
        ledger.runner.rebuild(ledger.log, [AUDIT_NAME])
    monkeypatch.undo()
    lmdb_home = acquire(str(home), sync=False)
    try:
        saved = ViewStore(lmdb_home).pin(AUDIT_NAME)
        assert saved is not None
        assert AuditIndex.pinned(saved).position == 0  # refused: never used as it is
    finally:
        release(lmdb_home)
    with open_ledger(home, sync=False) as ledger:
        assert audit_index(ledger.runner).positions("principal", "carol")
        ledger.erase(key="e1", what="principal", subject="carol", reason="asked")
    # Saved afresh in this format: the next open uses it without folding again.
    lmdb_home = acquire(str(home), sync=False)
    try:
        saved = ViewStore(lmdb_home).pin(AUDIT_NAME)
        assert saved is not None
        assert AuditIndex.pinned(saved).position > 0
    finally:
        release(lmdb_home)


def test_nobody_named_is_still_refused(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _home(home)
    with open_ledger(home, sync=False) as ledger, pytest.raises(NothingToEraseError):
        ledger.erase(key="e1", what="principal", subject="zoe", reason="asked")
    assert os.path.isdir(home)
