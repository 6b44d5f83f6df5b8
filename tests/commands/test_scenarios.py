"""Seed 000 §6, scenarios 1 and 3, end to end: a scripted agent learns, then unlearns.

The agent is a few lines of Python, not a model: at plan time it asks the ledger for its
project's lessons (which records them as in play for its session), shows them as its
prompt section, orders the ways it knows of running the tests so that what a lesson says
to avoid goes last and what it says to prefer goes first, tries them against a fake
repository until one works, and records what happened with ``observe_outcome``. The
repository is a fixture with one flag: which form of ``pytest`` finds the tests.

- Scenario 1 (seed a mistake → avoid it): session A runs the obvious ``pytest tests/``,
  which fails for want of a conftest, then succeeds from the repo root; session B, a
  different task in the same project, sees the lesson and never issues the failing form.
- Scenario 3 (unlearn when the environment changes): the fixture flips; session C,
  following the lesson, fails first, contradicts it (its confidence falls) and succeeds
  the other way; session D no longer sees the stale lesson, sees the new one, and the
  history of the new one shows both A's and C's outcome ids.
- The planted control: a lesson citing fabricated evidence is refused at write time and
  nothing is written.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from uuid import UUID

import pytest
from lessonledger.commands import (
    CommandError,
    EvidenceError,
    Ledger,
    Operation,
    RetiredEvidenceError,
    open_ledger,
)
from lessonledger.projections.lessons import LessonRow

#: Projects are known by a digest of their git remote, never by their path.
PROJECT = hashlib.sha256(b"git@example.com:acme/widgets.git").hexdigest()[:32]
OTHER_PROJECT = hashlib.sha256(b"git@example.com:acme/gadgets.git").hexdigest()[:32]
TARGET = "tests"
SUBDIR_FORM = "pytest:tests/"  # the obvious approach: run pytest from tests/
ROOT_FORM = "pytest:root"  # run pytest from the repository root
#: How an agent that knows nothing tries them: the obvious one first.
HABIT = (SUBDIR_FORM, ROOT_FORM)


@dataclass
class Repository:
    """The fake world: which form of pytest finds the tests depends on one flag."""

    flipped: bool = False
    calls: list[str] = field(default_factory=list)

    def run(self, op: str) -> tuple[bool, str]:
        self.calls.append(op)
        if op == SUBDIR_FORM:
            return (True, "") if self.flipped else (False, "no conftest")
        assert op == ROOT_FORM, op
        return (False, "no tests ran") if self.flipped else (True, "")


@dataclass(frozen=True)
class Shown:
    """A lesson as it stood when it was put in front of the agent."""

    lesson_id: UUID
    text: str
    confidence: float
    status: str


@dataclass(frozen=True)
class Transcript:
    session: str
    task: str
    prompt: list[str]
    shown: list[Shown]
    issued: list[str]
    passed: bool
    outcome_id: UUID


def order_of_attempts(lessons: list[LessonRow]) -> list[str]:
    """Habit, corrected by lessons: the strongest lesson gets the last word."""
    order = list(HABIT)
    for lesson in reversed(lessons):  # weakest first, so the strongest moves last
        if lesson.target != TARGET:
            continue
        if lesson.avoid_op in order:
            order.remove(lesson.avoid_op)
            order.append(lesson.avoid_op)
        if lesson.prefer_op in order:
            order.remove(lesson.prefer_op)
            order.insert(0, lesson.prefer_op)
    return order


def prompt_section(lessons: list[LessonRow]) -> list[str]:
    """The plan-time section: at most five lessons, trial ones labelled as such."""
    return [f"- {row.text}" + (" (trial)" if row.status == "trial" else "")
            for row in lessons[:5]]


def agent(ledger: Ledger, repo: Repository, session: str, task: str) -> Transcript:
    """Plan with the project's lessons, try until the tests run, record the outcome."""
    lessons = ledger.lessons(PROJECT, session=session)
    shown = [Shown(r.lesson_id, r.text, r.confidence, r.status) for r in lessons]
    operations: list[Operation] = []
    for op in order_of_attempts(lessons):
        ok, error = repo.run(op)
        operations.append(Operation(op=op, target=TARGET, ok=ok, error=error,
                                    order=len(operations)))
        if ok:
            break
    passed = operations[-1].ok
    receipt = ledger.observe_outcome(key=f"{session}/{task}", project=PROJECT,
                                     session=session, task=task, passed=passed,
                                     operations=operations)
    return Transcript(session, task, prompt_section(lessons), shown,
                      [o.op for o in operations], passed, receipt.ids["outcome_id"])


def active(ledger: Ledger) -> list[LessonRow]:
    return ledger.lessons(PROJECT, record=False)


def test_scenario_1_then_3_seed_avoid_flip_unlearn(home: str) -> None:
    repo = Repository()
    with open_ledger(home, sync=False) as ledger:
        # -- Scenario 1: seed a mistake ...
        a = agent(ledger, repo, "A", "add a test for the tokenizer")
        assert a.prompt == []
        assert a.issued == [SUBDIR_FORM, ROOT_FORM]
        assert a.passed
        (learned,) = active(ledger)
        assert (learned.kind, learned.avoid_op, learned.prefer_op, learned.target) == (
            "prefer", SUBDIR_FORM, ROOT_FORM, TARGET)
        assert learned.evidence == [a.outcome_id]
        assert learned.source == "loop"
        assert learned.confidence == pytest.approx(0.5)
        assert "no conftest" in learned.text

        # ... avoid it: another task, same project, the lesson in the prompt
        b = agent(ledger, repo, "B", "fix the date parser")
        assert [s.lesson_id for s in b.shown] == [learned.lesson_id]
        assert any(learned.text in line for line in b.prompt)
        assert SUBDIR_FORM not in b.issued, "session B repeated the mistake"
        assert b.issued == [ROOT_FORM]
        assert b.passed
        assert len(b.issued) < len(a.issued)
        row = ledger.lesson(learned.lesson_id)
        assert row.confidence == pytest.approx(0.65), "B's outcome confirmed the lesson"
        assert b.outcome_id in row.evidence

        # -- Scenario 3: the environment flips
        repo.flipped = True
        c = agent(ledger, repo, "C", "add a test for the date parser")
        assert [s.lesson_id for s in c.shown] == [learned.lesson_id]
        assert c.issued == [ROOT_FORM, SUBDIR_FORM], "C follows the lesson, then recovers"
        assert c.passed
        stale = ledger.lesson(learned.lesson_id)
        assert stale.confidence < c.shown[0].confidence, "C's outcome must lower confidence"
        assert stale.confidence == pytest.approx(0.4)
        contradicted = [m for m in stale.moves if m.type == "lesson.contradicted"]
        assert [m.outcome for m in contradicted] == [c.outcome_id]
        assert not stale.active

        d = agent(ledger, repo, "D", "speed up the slow tests")
        assert learned.lesson_id not in {s.lesson_id for s in d.shown}, "D got the stale lesson"
        assert not any(stale.text in line for line in d.prompt)
        (new,) = d.shown
        assert any(new.text in line for line in d.prompt)
        fresh = ledger.lesson(new.lesson_id)
        assert (fresh.kind, fresh.avoid_op, fresh.prefer_op) == ("prefer", ROOT_FORM,
                                                                SUBDIR_FORM)
        assert d.issued == [SUBDIR_FORM]
        assert d.passed

        # The history of the lesson D saw runs through the one it replaced.
        chain = ledger.history(new.lesson_id)
        assert [r.lesson_id for r in chain] == [learned.lesson_id, new.lesson_id]
        assert chain[0].superseded_by == new.lesson_id
        assert chain[1].supersedes == learned.lesson_id
        cited = {o for r in chain for o in r.evidence}
        assert {a.outcome_id, c.outcome_id} <= cited
        assert ledger.history(learned.lesson_id) == chain

        # The repository saw exactly what the transcripts say, nothing more.
        assert repo.calls == [*a.issued, *b.issued, *c.issued, *d.issued]


@pytest.mark.parametrize("fabrication", ["no such outcome", "outcome shows the opposite",
                                         "outcome from another project"])
def test_planted_control_fabricated_evidence_is_refused(home: str, fabrication: str) -> None:
    repo = Repository()
    with open_ledger(home, sync=False) as ledger:
        a = agent(ledger, repo, "A", "add a test for the tokenizer")
        elsewhere = ledger.observe_outcome(
            key="elsewhere", project=OTHER_PROJECT, session="X", passed=True,
            operations=[Operation(op=ROOT_FORM, target=TARGET, ok=True)])
        cited, kind, avoid, prefer = {
            "no such outcome": (UUID("5f2d8a4e-0000-4000-8000-000000000bad"), "avoid",
                                ROOT_FORM, ""),
            # A's root run worked: it cannot show that the root form is to be avoided.
            "outcome shows the opposite": (a.outcome_id, "avoid", ROOT_FORM, ""),
            "outcome from another project": (elsewhere.ids["outcome_id"], "do", "",
                                             ROOT_FORM),
        }[fabrication]
        ledger.catch_up()
        head, lessons = ledger.log.head(), dict(ledger.view.lessons)
        with pytest.raises(EvidenceError) as refused:
            ledger.propose_lesson(key="planted", project=PROJECT, session="E",
                                  text="Never run pytest from the root", kind=kind,
                                  avoid_op=avoid, prefer_op=prefer, target=TARGET,
                                  evidence=[cited])
        assert refused.value.outcome_id == cited
        assert str(cited) in str(refused.value)
        assert ledger.log.head() == head, "a refused lesson wrote events"
        assert ledger.view.lessons == lessons
        assert all("Never run pytest" not in r.text for r in ledger.view.lessons.values())


def test_a_retired_lesson_stays_retired(home: str) -> None:
    """A person's retirement holds: the lesson cannot be revived by editing it.

    DESIGN §4: a retired lesson is superseded by ``retired:user`` and a later proposal
    whose evidence is all inside it is refused. Editing the retired lesson must not
    turn it back into an active one carrying the same evidence (which would also let
    that evidence be proposed again).
    """
    repo = Repository()
    with open_ledger(home, sync=False) as ledger:
        agent(ledger, repo, "A", "add a test for the tokenizer")
        (learned,) = active(ledger)
        ledger.retire_lesson(key="retire", actor="person", lesson_id=learned.lesson_id,
                             reason="we are adding a conftest")
        assert ledger.lesson(learned.lesson_id).status == "retired"
        assert active(ledger) == []
        ledger.catch_up()
        head = ledger.log.head()
        with pytest.raises(CommandError):
            ledger.edit_lesson(key="revive", actor="person", lesson_id=learned.lesson_id,
                               text="Prefer the root form after all")
        assert ledger.log.head() == head, "editing a retired lesson wrote events"
        assert ledger.lesson(learned.lesson_id).status == "retired"
        assert active(ledger) == []
        with pytest.raises(RetiredEvidenceError):
            ledger.propose_lesson(key="relearn", project=PROJECT, text="Prefer the root form",
                                  kind="prefer", avoid_op=SUBDIR_FORM, prefer_op=ROOT_FORM,
                                  target=TARGET, evidence=learned.evidence)
