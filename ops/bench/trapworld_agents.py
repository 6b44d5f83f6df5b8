"""The trap world's agents: one simple agent, three kinds of memory.

Every agent works a task the same way: for each target it picks a form, tries it, and on a
failure picks the next, until one works or it has tried each form twice. With nothing to
go on it picks by habit (the forms in their listed order). What differs is what it
remembers:

- ``memory``: the ledger. At plan time it asks :meth:`Ledger.recall` for the task; before
  every attempt it asks :meth:`Ledger.check` for that operation. It follows what the
  lessons on file say (each form scored by the confidence of the lessons preferring it,
  minus that of the lessons avoiding it; a form they vouch for that fails the way a blip
  does, by the ledger's own reading of the error, is tried again before any form they do
  not vouch for), except lessons the ledger marks tentative
  (learned from a failure that looked transient): those it tests by trying the avoided form
  anyway, which is how the ledger tells a blip from a trap. Lessons recall labels as
  contradicting the current belief, or as in doubt in the project, are not followed. A
  target every form of which an ``avoid`` lesson covers (and none is preferred) is a dead
  end: it leaves it, and the task's outcome says it failed.

Every arm stops on a target once two different forms failed with one and the same
lasting error (the target is failing, a broken test say, not the form), and with
``retry_blips`` (the ``transient-then-lasting`` family) retries a form once right after
it failed the way a blip does.
- ``last_error``: remembers the last failure of each form of each target in each project
  and forgets it on that form's next success; remembered failures are tried last. The
  error store agents start from.
- ``off``: no memory; habit every time.

Every arm records each outcome through :meth:`Ledger.observe_outcome` into a home of its
own, so all three run the same writes; only ``memory`` reads its home back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import Operation
from lessonledger.ops.bench.trapworld import FORMS, Task
from lessonledger.projections.rules import looks_transient

__all__ = ["ARMS", "Advice", "Agent", "LastErrorAgent", "MemoryAgent", "Tried"]

ARMS = ("memory", "off", "last_error")


class Tried(NamedTuple):
    """One attempt: the form tried, whether it worked, and the error it gave."""

    form: int
    ok: bool
    error: str


class Advice(NamedTuple):
    """Something remembered that made the agent act otherwise than by habit."""

    #: A lesson id, or ``last_error``.
    source: str
    #: The projects it was learned in.
    projects: tuple[str, ...]
    #: The form it said to try first, or to keep away from (-1: none).
    prefer: int
    avoid: int


def _broken(tried: list[Tried]) -> bool:
    """True when two different forms failed with one and the same lasting error."""
    errors: dict[str, int] = {}
    for t in tried:
        if not t.ok and t.error and not looks_transient(t.error) \
                and errors.setdefault(t.error, t.form) != t.form:
            return True
    return False


@dataclass
class Agent:
    """No memory: habit every time (the ``off`` arm); the others override :meth:`_rank`."""

    ledger: Ledger
    name: str = "off"
    project: str = ""
    session: str = ""
    #: Retry a form once right after it failed the way a blip does (every arm alike).
    retry_blips: bool = False

    def begin(self, project: str, session: str, task: Task) -> None:
        """Start a session on a task."""
        self.project, self.session = project, session

    def next(self, kind: str, tried: list[Tried]) -> tuple[int, list[Advice]]:
        """The form to try next, and the advice that put it before the habit's choice."""
        forms = len(FORMS[kind])
        if self.retry_blips and tried and not tried[-1].ok \
                and looks_transient(tried[-1].error) \
                and sum(t.form == tried[-1].form for t in tried) == 1:
            return tried[-1].form, []
        if _broken(tried):
            # Two forms failed with the very same lasting error: the target is what fails
            # (a broken test, say), not the form; trying more forms cannot help.
            return -1, []
        done = {t.form for t in tried}
        untried = [f for f in range(forms) if f not in done]
        if not untried:  # every form failed once: go round again, by the same ranking
            untried = [f for f in range(forms) if sum(t.form == f for t in tried) < 2]
        ranked, advice = self._rank(kind, untried)
        return ranked[0], (advice if ranked[0] != min(untried) else [])

    def _rank(self, kind: str, forms: list[int]) -> tuple[list[int], list[Advice]]:
        return forms, []

    def saw(self, kind: str, tried: Tried) -> None:
        """Told the result of an attempt."""

    def end(self, task: Task, operations: list[Operation], passed: bool,
            when: datetime, fingerprint: dict[str, str] | None = None) -> UUID:
        """Record the task's outcome; return its id."""
        receipt = self.ledger.observe_outcome(
            key=f"{self.name}/{self.session}", project=self.project, session=self.session,
            task=task.title, passed=passed, operations=operations, occurred_at=when,
            fingerprint=fingerprint or {})
        return receipt.ids["outcome_id"]


@dataclass
class LastErrorAgent(Agent):
    """Remembered failures go last; a form's success wipes its failure."""

    name: str = "last_error"
    failed: dict[tuple[str, str, int], str] = field(default_factory=dict)

    def _rank(self, kind: str, forms: list[int]) -> tuple[list[int], list[Advice]]:
        ranked = sorted(forms, key=lambda f: ((self.project, kind, f) in self.failed, f))
        avoided = [f for f in forms if (self.project, kind, f) in self.failed]
        advice = [Advice("last_error", (self.project,), -1, f) for f in avoided]
        return ranked, advice

    def saw(self, kind: str, tried: Tried) -> None:
        """Remember a failure; forget it when the form works."""
        key = (self.project, kind, tried.form)
        if tried.ok:
            self.failed.pop(key, None)
        else:
            self.failed[key] = tried.error


@dataclass
class MemoryAgent(Agent):
    """Follows the ledger's lessons: recall at plan time, check before each attempt."""

    name: str = "memory"
    #: The lessons this session was shown that it follows: id → (target, confidence, advice).
    known: dict[UUID, tuple[str, float, Advice]] = field(default_factory=dict)
    #: Every lesson id this session was shown, followed or not.
    seen: set[UUID] = field(default_factory=set)
    #: (target, form) pairs already checked this session.
    checked: set[tuple[str, int]] = field(default_factory=set)

    def begin(self, project: str, session: str, task: Task) -> None:
        """Start a session: recall the lessons for the task."""
        super().begin(project, session, task)
        self.known, self.seen, self.checked = {}, set(), set()
        shown = self.ledger.recall(project, task.query, session=session)
        self._learn([r.lesson_id for r in shown.lessons
                     if r.label not in ("contradicting", "doubted")])

    def _learn(self, lesson_ids: list[UUID]) -> None:
        for lesson_id in lesson_ids:
            if lesson_id in self.seen:
                continue
            self.seen.add(lesson_id)
            row = self.ledger.lesson(lesson_id)
            forms = [op for op, _ in FORMS.get(row.target, ())]
            if not row.active or row.longevity == "tentative" or not forms:
                continue
            self.known[lesson_id] = (row.target, row.confidence, Advice(
                str(lesson_id), tuple(row.projects) or (row.scope,),
                forms.index(row.prefer_op) if row.prefer_op in forms else -1,
                forms.index(row.avoid_op) if row.avoid_op in forms else -1))

    def next(self, kind: str, tried: list[Tried]) -> tuple[int, list[Advice]]:
        """As :meth:`Agent.next`, retrying a vouched-for form after a blip."""
        # A form the lessons vouch for that just failed the way a blip does is tried again
        # before any form they do not vouch for.
        done = {t.form for t in tried}
        forms = list(range(len(FORMS[kind])))
        if not tried:
            self._rank(kind, forms)  # what the first choice checks anyway, done first
        score = self._scores(kind)
        avoided = {a.avoid for target, _, a in self.known.values()
                   if target == kind and a.prefer < 0}
        if not tried and avoided >= set(forms) and all(score[f] <= 0 for f in forms):
            # Every form is one the lessons say to avoid: a dead end. Leave it, and say so
            # (the task's outcome is recorded as failed), rather than try each again.
            return -1, [a for target, _, a in self.known.values() if target == kind]
        if any(score[f] > 0 for f in forms if f not in done):
            return super().next(kind, tried)
        blips = [t.form for t in tried if not t.ok and looks_transient(t.error)
                 and score[t.form] > 0 and sum(u.form == t.form for u in tried) == 1]
        if blips:
            return blips[0], []
        return super().next(kind, tried)

    def _scores(self, kind: str) -> dict[int, float]:
        score = dict.fromkeys(range(len(FORMS[kind])), 0.0)
        for target, weight, advice in self.known.values():
            if target == kind:
                if advice.prefer in score:
                    score[advice.prefer] += weight
                if advice.avoid in score:
                    score[advice.avoid] -= weight
        return score

    def _rank(self, kind: str, forms: list[int]) -> tuple[list[int], list[Advice]]:
        # Check the form about to be tried; what the check shows may change the choice.
        for _ in range(len(forms) + 1):
            ranked, advice = self._by_lessons(kind, forms)
            if (kind, ranked[0]) in self.checked:
                break
            self.checked.add((kind, ranked[0]))
            check = self.ledger.check(self.project, FORMS[kind][ranked[0]][0], kind,
                                      session=self.session)
            self._learn([*check.opposing, *check.supporting])
        return ranked, advice

    def _by_lessons(self, kind: str, forms: list[int]) -> tuple[list[int], list[Advice]]:
        score = self._scores(kind)
        ranked = sorted(forms, key=lambda f: (-score[f], f))
        habit = min(forms)
        # What made the agent leave its habit: lessons for its choice, or against the habit.
        advice = [a for target, _, a in self.known.values() if target == kind
                  and (a.prefer == ranked[0] or a.avoid == habit)]
        return ranked, advice
