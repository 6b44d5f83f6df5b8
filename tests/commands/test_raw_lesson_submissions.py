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
from lessonledger.commands.errors import EvidenceError, UnknownLessonError
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


def test_a_raw_proposal_cannot_start_above_its_command_s_confidence(ledger: Ledger) -> None:
    mine = _observed(Agent(ledger), P1)
    said = _refused(ledger, _proposal(P1, [mine], confidence=0.95, text="other words"),
                    InvalidEventError)
    assert "starts at confidence 0.4" in said
    said = _refused(ledger, _proposal(P1, [], source="model", confidence=0.4),
                    InvalidEventError)
    assert "starts at confidence 0.3" in said


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


def test_a_raw_confirmation_needs_an_outcome_of_the_lesson_s_project(ledger: Ledger) -> None:
    agent = Agent(ledger)
    _observed(agent, P1)  # the loop learns the lesson in P1
    lesson = _lesson_of(ledger, P1)
    # It shows the lesson (what it avoids failed), but teaches P2 nothing that would
    # promote the lesson to global.
    theirs = agent.outcome(P2, "s", [fail()])
    before = ledger.view.lessons[lesson.lesson_id].confidence
    # Named as P2's, the lesson does not apply there; named as P1's, the outcome is not.
    said = _refused(ledger, LessonConfirmed(lesson_id=lesson.lesson_id, outcome_id=theirs,
                                            project=P2), EvidenceError)
    assert "does not apply" in said
    said = _refused(ledger, LessonConfirmed(lesson_id=lesson.lesson_id, outcome_id=theirs,
                                            project=P1), EvidenceError)
    assert f"was observed in project {P2}" in said
    _refused(ledger, LessonConfirmed(lesson_id=lesson.lesson_id, outcome_id=uuid4(),
                                     project=P1), EvidenceError)
    _refused(ledger, LessonConfirmed(lesson_id=uuid4(), outcome_id=theirs, project=P2),
             UnknownLessonError)
    assert ledger.view.lessons[lesson.lesson_id].confidence == before


def test_a_raw_confirmation_must_be_what_the_outcome_shows(ledger: Ledger) -> None:
    agent = Agent(ledger)
    _observed(agent, P1)
    lesson = _lesson_of(ledger, P1)
    shows = agent.outcome(P1, "t", [ok()])  # only the preferred form, which worked
    _refused(ledger, LessonContradicted(lesson_id=lesson.lesson_id, outcome_id=shows,
                                        project=P1), EvidenceError)
    unrelated = agent.outcome(P1, "u", [ok("make:all", "build")])
    _refused(ledger, LessonConfirmed(lesson_id=lesson.lesson_id, outcome_id=unrelated,
                                     project=P1), EvidenceError)
    confirmed = _submit(ledger, LessonConfirmed(lesson_id=lesson.lesson_id,
                                                outcome_id=shows, project=P1))
    assert isinstance(confirmed, Receipt)


def test_a_raw_outcome_cannot_take_another_project_s_outcome_id(ledger: Ledger) -> None:
    theirs = _observed(Agent(ledger), P2)
    said = _refused(ledger, OutcomeObserved(outcome_id=theirs, project=P1, passed=True,
                                            signal="tool", operations=[fail(), ok()]),
                    EvidenceError)
    assert "needs an id of its own" in said
    assert ledger.view.outcomes[theirs].project == P2
