"""Raw lesson events past c9b9ced's checks (attack13).

c9b9ced holds a raw ``lesson.proposed``, ``lesson.confirmed``, ``lesson.contradicted``,
``lesson.demoted`` and ``outcome.observed`` to what their command or policy would
decide (commands/submissions.py ``check_submitted``). These are raw submissions, through
``Ledger.execute_each([Submission(...)])`` on a real LMDB home, that the command or policy
would never have decided, and that the check lets through. Every test here FAILS on
c9b9ced unless its docstring says it is a guard.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import _attack13_paths  # noqa: F401  (first: lesson_agent lives in tests/commands)
import pytest
from lesson_agent import AVOID, P1, P2, P3, PREFER, T0, TARGET, Agent, fail, ok
from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.errors import InvalidEventError, LessonLedgerError
from lessonledger.ledger.events import (
    LessonConfirmed,
    LessonDemoted,
    LessonPromoted,
    LessonProposed,
    OutcomeObserved,
)
from lessonledger.ledger.submission import Submission


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with open_ledger(tmp_path / "home", sync=False) as opened:
        yield opened


def _raw(event: Any, session: str = "") -> Submission:
    event_id = uuid4()
    return Submission(event_id=event_id, stream=event_id, version=0, occurred_at=T0,
                      actor="pub", session=session, event=event)


def _submit(ledger: Ledger, event: Any, session: str = "") -> Receipt | LessonLedgerError:
    (result,) = ledger.execute_each([_raw(event, session)])
    return result


def _loop_lesson(ledger: Ledger, project: str, session: str = "s") -> tuple[UUID, UUID]:
    """The loop learns ``prefer PREFER over AVOID`` in ``project``: (outcome, lesson)."""
    agent = Agent(ledger, sent=len(ledger.view.outcomes) * 100)
    outcome = agent.outcome(project, session, [fail(), ok()])
    return outcome, agent.learned_from(outcome)


def _trusted_elsewhere(ledger: Ledger, project: str) -> UUID:
    """A trusted, high-confidence lesson of ``project`` on another target (build)."""
    agent = Agent(ledger, sent=5000)
    outcome = agent.outcome(project, "x0", [fail("make", target="build"),
                                            ok("ninja", target="build")])
    lesson = agent.learned_from(outcome)
    agent.trusted(project, lesson, ["x1", "x2", "x3"], when=T0)
    return lesson


def _proposal(project: str, evidence: list[UUID], **fields: Any) -> LessonProposed:
    return LessonProposed(**{
        "lesson_id": uuid4(), "text": "run b1 on t1", "kind": "do", "prefer_op": "b1",
        "target": "t1", "scope": project, "source": "extractor", "evidence": evidence,
        "confidence": 0.4, **fields})


# -- confirmations: one outcome, one attribution -----------------------------------------


def test_one_outcome_confirms_a_lesson_once_not_four_times(ledger: Ledger) -> None:
    """FAILED on c9b9ced: The loop's own evidence outcome, sent as a raw confirmation four times,
    takes the lesson from 0.5 to 1.0: the policy never confirms a lesson by an outcome it
    already cites ("One outcome, one attribution", commands/policies.py _promote)."""
    outcome, lesson = _loop_lesson(ledger, P1)
    assert ledger.view.lessons[lesson].confidence == pytest.approx(0.5)
    accepted = 0
    for _ in range(4):
        result = _submit(ledger, LessonConfirmed(lesson_id=lesson, outcome_id=outcome,
                                                 project=P1))
        accepted += isinstance(result, Receipt)
    assert ledger.view.lessons[lesson].confidence == pytest.approx(0.5), (
        f"{accepted} raw confirmations by the outcome the lesson was learned from took it "
        f"to {ledger.view.lessons[lesson].confidence}")


def test_a_re_observed_outcome_does_not_confirm_again_nor_make_a_lesson_trusted(
        ledger: Ledger) -> None:
    """FAILED on c9b9ced: One outcome id, re-observed raw in sessions s2 and s3 with the lesson in
    play, confirms it each time: +0.30 and ``trusted`` (3 sessions) from one task."""
    outcome, lesson = _loop_lesson(ledger, P1)
    for session in ("s2", "s3"):
        result = _submit(ledger, OutcomeObserved(
            outcome_id=outcome, project=P1, passed=True, signal="tool",
            operations=[ok()], in_play=[lesson]), session=session)
        assert isinstance(result, Receipt | LessonLedgerError)
    row = ledger.view.lessons[lesson]
    assert (row.status, round(row.confidence, 6)) == ("trial", 0.5), (
        f"one outcome observed three times made the lesson {row.status} at "
        f"{row.confidence}, sessions {row.sessions}")


def test_re_observing_an_outcome_does_not_take_back_the_evidence_it_gave(
        ledger: Ledger) -> None:
    """FAILED on c9b9ced: A lesson cites outcome O (b1 worked on t1); O is then re-observed raw
    with b1 failing on t1. The lesson keeps O as its only evidence and stays ``trial``
    (recallable) though no outcome on file supports it (DESIGN §4: evidence or it is a
    claim). Either the re-observation is refused or the lesson loses its evidence."""
    agent = Agent(ledger)
    seen = agent.outcome(P1, "s", [ok("b1", target="t1")])
    proposal = _proposal(P1, [seen])
    assert isinstance(_submit(ledger, proposal), Receipt)
    _submit(ledger, OutcomeObserved(
        outcome_id=seen, project=P1, passed=False, signal="tool",
        operations=[Operation(op="b1", target="t1", ok=False, error="no such rule")]))
    row = ledger.view.lessons[proposal.lesson_id]
    supports = [o for o in row.evidence if o in ledger.view.outcomes
                and any(op.ok and op.op == "b1" and op.target == "t1"
                        for op in ledger.view.outcomes[o].operations)]
    assert supports or row.status == "claimed", (
        f"lesson is {row.status} citing {row.evidence}, and none of them shows it now")


# -- proposals ---------------------------------------------------------------------------


def test_a_proposal_cannot_inherit_another_project_s_confidence_by_supersedes(
        ledger: Ledger) -> None:
    """FAILED on c9b9ced: A raw extractor proposal in P1 naming P2's trusted 0.95 lesson in
    ``supersedes`` starts at 0.95 (an extractor starts at 0.4; an edit keeps the old
    lesson's scope and needs it active: handlers._edit)."""
    theirs = _trusted_elsewhere(ledger, P2)
    high = ledger.view.lessons[theirs].confidence
    assert high > 0.9
    mine = Agent(ledger, sent=9000).outcome(P1, "s", [ok("b1", target="t1")])
    proposal = _proposal(P1, [mine], confidence=high, supersedes=theirs)
    result = _submit(ledger, proposal)
    got = ledger.view.lessons.get(proposal.lesson_id)
    assert got is None or got.confidence <= 0.4 + 1e-9, (
        f"{type(result).__name__}: a P1 extractor lesson started at {got.confidence} by "
        f"naming P2's lesson, which is still {ledger.view.lessons[theirs].status}")


def test_a_proposal_cannot_take_a_retired_lesson_s_confidence(ledger: Ledger) -> None:
    """FAILED on c9b9ced: A lesson a person retired is no base for an edit (InactiveLessonError),
    yet a raw proposal naming it in ``supersedes`` starts at its 0.95."""
    retired = _trusted_elsewhere(ledger, P1)
    high = ledger.view.lessons[retired].confidence
    ledger.retire_lesson(key="retire", lesson_id=retired, reason="wrong")
    mine = Agent(ledger, sent=9000).outcome(P1, "s", [ok("b1", target="t1")])
    proposal = _proposal(P1, [mine], confidence=high, supersedes=retired)
    _submit(ledger, proposal)
    got = ledger.view.lessons.get(proposal.lesson_id)
    assert got is None or got.confidence <= 0.4 + 1e-9, got and got.confidence


def test_a_proposal_cannot_reuse_another_lesson_s_id(ledger: Ledger) -> None:
    """FAILED on c9b9ced: A raw proposal in P1 under the id of P2's trusted lesson replaces that
    lesson's row: P2's lesson is gone from P2 (ProposeLesson mints a fresh id)."""
    theirs = _trusted_elsewhere(ledger, P2)
    shown = [row.lesson_id for row in ledger.lessons(P2, session="q")]
    assert theirs in shown
    mine = Agent(ledger, sent=9000).outcome(P1, "s", [ok("b1", target="t1")])
    result = _submit(ledger, _proposal(P1, [mine], lesson_id=theirs))
    row = ledger.view.lessons[theirs]
    assert (row.scope, row.status) == (P2, "trusted"), (
        f"{type(result).__name__}: P2's trusted lesson is now {row.scope[:4]}… "
        f"{row.status} {row.text!r}")


def test_a_proposal_cannot_bring_a_retired_lesson_back(ledger: Ledger) -> None:
    """FAILED on c9b9ced: Re-proposing a retired lesson's id (with a fresh outcome) makes it active
    again: the person's retirement is undone."""
    _, lesson = _loop_lesson(ledger, P1)
    ledger.retire_lesson(key="retire", lesson_id=lesson, reason="wrong here")
    fresh = Agent(ledger, sent=9000).outcome(P1, "s2", [ok()])
    _submit(ledger, LessonProposed(
        lesson_id=lesson, text="run the root suite", kind="prefer", avoid_op=AVOID,
        prefer_op=PREFER, target=TARGET, scope=P1, source="extractor",
        evidence=[fresh], confidence=0.4))
    assert ledger.view.lessons[lesson].status == "retired"


def test_a_model_s_raw_lesson_is_a_claim_whatever_it_cites(ledger: Ledger) -> None:
    """FAILED on c9b9ced: ProposeLesson stores a model's lesson as ``claimed`` with no evidence
    (handlers._propose); the same lesson raw, citing an outcome, is ``trial`` and is
    recalled into the prompt (DESIGN §4: a claim is never recalled)."""
    seen = Agent(ledger).outcome(P1, "s", [ok("b1", target="t1")])
    proposal = _proposal(P1, [seen], source="model", confidence=0.3,
                         text="always run b1 on t1")
    result = _submit(ledger, proposal)
    recalled = [r.lesson_id for r in ledger.lessons(P1, session="z")]
    assert proposal.lesson_id not in recalled, "a model's raw lesson is recalled"
    if isinstance(result, Receipt):  # taken, it must be the claim its command makes
        row = ledger.view.lessons[proposal.lesson_id]
        assert row.status == "claimed", f"model lesson is {row.status}, cites {row.evidence}"
    else:  # or refused as not what propose_lesson decides (what main does since 63c9d78)
        assert isinstance(result, InvalidEventError)
        assert proposal.lesson_id not in ledger.view.lessons


def test_a_raw_loop_lesson_without_evidence_starts_as_a_claim_at_0_3(
        ledger: Ledger) -> None:
    """FAILED on c9b9ced: Without evidence a lesson is a claim at 0.3 (DESIGN §4); a raw ``loop``
    lesson citing nothing is taken at 0.5 (_check_proposal takes the loop's start
    before looking at the evidence)."""
    proposal = _proposal(P1, [], source="loop", confidence=0.5, text="run c1 on t2",
                         prefer_op="c1", target="t2")
    _submit(ledger, proposal)
    got = ledger.view.lessons.get(proposal.lesson_id)
    assert got is None or got.confidence <= 0.3 + 1e-9, (got.status, got.confidence)


# -- promotion and demotion are the ledger's, never anyone's say-so ------------------------


def test_a_raw_promotion_does_not_make_a_one_project_lesson_global(ledger: Ledger) -> None:
    """FAILED on c9b9ced: A raw lesson.promoted (not in CHECKED) makes P1's lesson global, says P3
    confirmed it, merges P2's trusted lesson on another target to take its 0.95 and
    ``trusted``, and P3 is then given it in recall. DESIGN §4: promoted automatically,
    never on anyone's say-so."""
    _, lesson = _loop_lesson(ledger, P1)
    theirs = _trusted_elsewhere(ledger, P2)
    _submit(ledger, LessonPromoted(lesson_id=lesson, projects=[P1, P3], merged=[theirs]))
    row = ledger.view.lessons[lesson]
    in_p3 = [r.lesson_id for r in ledger.lessons(P3, session="z")]
    assert (row.scope, lesson in in_p3) == (P1, False), (
        f"lesson is {row.scope} at {row.confidence} ({row.status}); in P3's recall: "
        f"{lesson in in_p3}")


def test_a_raw_demotion_does_not_move_a_project_lesson_into_another_project(
        ledger: Ledger) -> None:
    """FAILED on c9b9ced: Only a global lesson is demoted, to a project that confirmed it; a raw
    lesson.demoted with no outcome moves P1's own lesson into P3, where nothing
    taught it."""
    _, lesson = _loop_lesson(ledger, P1)
    _submit(ledger, LessonDemoted(lesson_id=lesson, to_scope=P3))
    assert ledger.view.lessons[lesson].scope == P1


# -- guards (pass on c9b9ced) ------------------------------------------------------------


def test_guard_a_batch_may_cite_an_outcome_observed_earlier_in_it(ledger: Ledger) -> None:
    """GUARD (passes). In one execute_each group, an outcome observed by an earlier item
    is evidence for a later one."""
    seen = uuid4()
    proposal = _proposal(P1, [seen])
    results = ledger.execute_each([
        _raw(OutcomeObserved(outcome_id=seen, project=P1, passed=True, signal="tool",
                             operations=[Operation(op="b1", target="t1", ok=True)])),
        _raw(proposal)])
    assert all(isinstance(r, Receipt) for r in results), results
    assert ledger.view.lessons[proposal.lesson_id].status == "trial"


def test_guard_a_batch_cannot_move_an_outcome_it_observed_into_another_project(
        ledger: Ledger) -> None:
    """GUARD (passes). The second item re-uses the first's outcome id in another project."""
    seen = uuid4()
    first, second = ledger.execute_each([
        _raw(OutcomeObserved(outcome_id=seen, project=P2, passed=True, signal="tool")),
        _raw(OutcomeObserved(outcome_id=seen, project=P1, passed=True, signal="tool"))])
    assert isinstance(first, Receipt)
    assert isinstance(second, LessonLedgerError)
    assert ledger.view.outcomes[seen].project == P2
