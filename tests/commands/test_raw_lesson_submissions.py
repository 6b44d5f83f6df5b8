"""Raw lesson events need what their command or policy needs (attack12).

A raw ``lesson.proposed`` was appended as it came: it could cite another project's
outcome, or one never observed, at a confidence its sender chose, and the forged lesson
was later promoted to global. A raw ``lesson.confirmed`` raised a lesson's confidence on
an outcome of another project. A raw outcome could take another project's outcome id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import msgspec
import pytest
from lesson_agent import AVOID, P1, P2, PREFER, T0, TARGET, Agent, fail, ok
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands.errors import EvidenceError
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.errors import InvalidEventError, LessonLedgerError
from lessonledger.ledger.events import (
    LessonConfirmed,
    LessonContradicted,
    LessonProposed,
    OutcomeObserved,
)
from lessonledger.ledger.submission import Submission, parse_submission


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with open_ledger(tmp_path, sync=False) as opened:
        yield opened


def _submit(ledger: Ledger, event: Any) -> Receipt | LessonLedgerError:
    event_id = uuid4()
    (result,) = ledger.execute_each([Submission(
        event_id=event_id, stream=event_id, version=0, occurred_at=T0, actor="pub",
        event=event)])
    return result


def _refused(ledger: Ledger, event: Any, kind: type[LessonLedgerError]) -> str:
    head = ledger.log.head()
    result = _submit(ledger, event)
    assert isinstance(result, kind), result
    assert ledger.log.head() == head
    return str(result)


def _proposal(project: str, evidence: list[UUID], **fields: Any) -> LessonProposed:
    return LessonProposed(**{
        "lesson_id": uuid4(), "text": "run the root suite", "kind": "prefer",
        "avoid_op": AVOID, "prefer_op": PREFER, "target": TARGET, "scope": project,
        "source": "extractor", "evidence": evidence, "confidence": 0.4, **fields})


def _observed(agent: Agent, project: str) -> UUID:
    """An outcome of ``project`` that shows ``prefer PREFER over AVOID``."""
    return agent.outcome(project, "s", [fail(), ok()])


def _lesson_of(ledger: Ledger, project: str) -> Any:
    (row,) = [r for r in ledger.catalogue(project, everything=True)
              if r.scope == project and r.active]
    return row


def test_a_raw_proposal_cannot_cite_another_project_s_outcome(ledger: Ledger) -> None:
    theirs = _observed(Agent(ledger), P2)
    said = _refused(ledger, _proposal(P1, [theirs]), EvidenceError)
    assert f"was observed in project {P2}" in said


def test_a_raw_proposal_cannot_cite_an_outcome_never_observed(ledger: Ledger) -> None:
    said = _refused(ledger, _proposal(P1, [uuid4()]), EvidenceError)
    assert "is not an observed outcome" in said


def test_a_raw_proposal_cannot_cite_an_outcome_that_does_not_show_it(ledger: Ledger) -> None:
    unrelated = Agent(ledger).outcome(P1, "s", [ok("make:all", "build")])
    said = _refused(ledger, _proposal(P1, [unrelated]), EvidenceError)
    assert "does not show what the lesson claims" in said


def test_a_raw_proposal_holds_what_its_command_decides(ledger: Ledger) -> None:
    mine = _observed(Agent(ledger), P1)
    said = _refused(ledger, _proposal(P1, [mine], confidence=0.95, text="other words"),
                    InvalidEventError)
    assert "its confidence would be 0.4, not 0.95" in said
    # A model's lesson is a claim, whatever it cites: no evidence, a hypothesis, 0.3.
    said = _refused(ledger, _proposal(P1, [mine], source="model", confidence=0.3),
                    InvalidEventError)
    assert "its derivation would be 'hypothesis'" in said
    said = _refused(ledger, _proposal(P1, [], derivation="hypothesis", confidence=0.4),
                    InvalidEventError)
    assert "its confidence would be 0.3, not 0.4" in said


def test_a_raw_proposal_cannot_take_a_lesson_s_id_supersede_or_be_the_loop_s(
        ledger: Ledger) -> None:
    mine = _observed(Agent(ledger), P1)
    lesson = _lesson_of(ledger, P1)
    said = _refused(ledger, _proposal(P1, [mine], lesson_id=lesson.lesson_id),
                    InvalidEventError)
    assert "is already in the ledger" in said
    said = _refused(ledger, _proposal(P1, [mine], supersedes=lesson.lesson_id),
                    InvalidEventError)
    assert "edit_lesson" in said
    said = _refused(ledger, _proposal(P1, [mine], source="loop", confidence=0.5),
                    InvalidEventError)
    assert "publish the outcome" in said


def test_a_raw_proposal_the_command_would_take_is_taken(ledger: Ledger) -> None:
    mine = _observed(Agent(ledger), P1)
    proposal = _proposal(P1, [mine], text="always run the root suite")
    assert isinstance(_submit(ledger, proposal), Receipt)
    assert proposal.lesson_id in ledger.view.lessons


def test_a_raw_proposal_with_blank_text_is_refused_at_the_door(ledger: Ledger) -> None:
    event_id = str(uuid4())
    data = msgspec.json.encode({
        "event_id": event_id, "stream": event_id, "version": 0,
        "occurred_at": "2026-12-01T12:00:00Z", "actor": "pub",
        "event": {**msgspec.to_builtins(_proposal(P1, [])), "text": "  \t "}})
    with pytest.raises(InvalidEventError) as refused:
        parse_submission(data)
    assert refused.value.field == "$.event.text"
    # Built by hand, it is refused by the ledger, as its command would be.
    _refused(ledger, _proposal(P1, [], text="   ", confidence=0.3), LessonLedgerError)


@pytest.mark.parametrize("kind", [LessonConfirmed, LessonContradicted])
def test_a_raw_attribution_is_refused_as_the_ledger_s_own(ledger: Ledger,
                                                          kind: type[Any]) -> None:
    """Only the ledger's policies attribute an outcome to a lesson (attack12: a raw
    confirmation by another project's outcome raised a lesson from 0.3 to 0.45)."""
    agent = Agent(ledger)
    outcome = _observed(agent, P1)  # it shows the lesson the loop learns from it
    lesson = _lesson_of(ledger, P1)
    before = ledger.view.lessons[lesson.lesson_id].confidence
    said = _refused(ledger, kind(lesson_id=lesson.lesson_id, outcome_id=outcome,
                                 project=P1), InvalidEventError)
    assert "written only by the ledger itself" in said
    assert ledger.view.lessons[lesson.lesson_id].confidence == before


def test_a_raw_outcome_cannot_take_another_project_s_outcome_id(ledger: Ledger) -> None:
    theirs = _observed(Agent(ledger), P2)
    said = _refused(ledger, OutcomeObserved(outcome_id=theirs, project=P1, passed=True,
                                            signal="tool", operations=[fail(), ok()]),
                    InvalidEventError)
    assert "needs an id of its own" in said
    assert ledger.view.outcomes[theirs].project == P2
    # Nor its own again: a second observation would stand in for the first.
    mine = _observed(Agent(ledger, sent=10), P1)
    _refused(ledger, OutcomeObserved(outcome_id=mine, project=P1, passed=True,
                                     signal="tool", operations=[fail(), ok()]),
             InvalidEventError)
