"""A scripted agent for the lesson tests: public API only, deterministic keys and times."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec
from lessonledger.commands import Ledger, Operation

__all__ = ["AVOID", "P1", "P2", "P3", "PREFER", "T0", "TARGET", "Agent", "day", "fail", "ns",
           "ok"]

P1, P2, P3 = "a" * 32, "b" * 32, "c" * 32
T0 = datetime(2024, 1, 1, tzinfo=UTC)
TARGET = "tests"
AVOID, PREFER = "pytest:tests/", "pytest:root"


def day(n: float) -> datetime:
    """``n`` days after T0."""
    return T0 + timedelta(days=n)


def ns(when: datetime) -> int:
    """A datetime as the ledger's nanoseconds."""
    return int(when.timestamp()) * 10**9


def fail(op: str = AVOID, error: str = "no conftest", target: str = TARGET) -> Operation:
    return Operation(op=op, target=target, ok=False, error=error)


def ok(op: str = PREFER, target: str = TARGET) -> Operation:
    return Operation(op=op, target=target, ok=True)


class Agent:
    """Drives one ledger through its public API, with deterministic idempotency keys."""

    def __init__(self, ledger: Ledger, *, sent: int = 0) -> None:
        self.ledger = ledger
        self._sent = sent

    def key(self) -> str:
        self._sent += 1
        return f"command-{self._sent}"

    def outcome(self, project: str, session: str, operations: Sequence[Operation], *,
                when: datetime = T0, passed: bool = True, in_play: Sequence[UUID] = (),
                fingerprint: dict[str, str] | None = None) -> UUID:
        """Observe a finished task whose operations ran in the order given."""
        ordered = [msgspec.structs.replace(o, order=i) for i, o in enumerate(operations)]
        receipt = self.ledger.observe_outcome(
            key=self.key(), project=project, session=session, passed=passed,
            operations=ordered, in_play=list(in_play), fingerprint=fingerprint or {},
            occurred_at=when)
        return receipt.ids["outcome_id"]

    def learn(self, project: str, session: str, *, when: datetime = T0,
              target: str = TARGET, avoid: str = AVOID, prefer: str = PREFER,
              error: str = "no conftest",
              fingerprint: dict[str, str] | None = None) -> UUID:
        """The loop's signal (avoid fails, prefer then succeeds, the task passes)."""
        outcome = self.outcome(project, session, [fail(avoid, error, target), ok(prefer, target)],
                               when=when, fingerprint=fingerprint)
        return self.learned_from(outcome)

    def learned_from(self, outcome: UUID) -> UUID:
        """The lesson the loop proposed from ``outcome``, whatever became of it since."""
        found = self.loop_lessons(outcome)
        assert len(found) == 1, f"the loop proposed {len(found)} lessons from {outcome}"
        return found[0]

    def loop_lessons(self, outcome: UUID) -> list[UUID]:
        # The view, read without catching up: no query lists superseded lessons, and a
        # command must return with what its policies decided already folded in.
        return [row.lesson_id for row in self.ledger.view.lessons.values()
                if row.source == "loop" and row.evidence[:1] == [outcome]]

    def confirm(self, project: str, session: str, lesson_id: UUID, *,
                when: datetime) -> UUID:
        """An outcome in which the lesson is in play and its prediction holds."""
        row = self.ledger.lesson(lesson_id)
        held = fail(row.avoid_op, target=row.target) if row.kind == "avoid" \
            else ok(row.prefer_op, row.target)
        return self.outcome(project, session, [held], when=when, in_play=[lesson_id])

    def contradict(self, project: str, session: str, lesson_id: UUID, *,
                   when: datetime) -> UUID:
        """An outcome in which the lesson is in play and its prediction fails."""
        row = self.ledger.lesson(lesson_id)
        broken = fail(row.prefer_op, target=row.target) if row.kind == "do" \
            else ok(row.avoid_op, row.target)
        return self.outcome(project, session, [broken], when=when, in_play=[lesson_id])

    def trusted(self, project: str, lesson_id: UUID, sessions: Sequence[str], *,
                when: datetime) -> None:
        """Confirm the lesson once in each session; it must end up trusted."""
        for i, session in enumerate(sessions):
            self.confirm(project, session, lesson_id, when=when + timedelta(minutes=i))
        assert self.ledger.lesson(lesson_id).status == "trusted"

    def propose(self, project: str, *, when: datetime = T0, **fields: Any) -> UUID:
        defaults: dict[str, Any] = {"text": "Prefer pytest from the repository root",
                                    "kind": "prefer", "avoid_op": AVOID,
                                    "prefer_op": PREFER, "target": TARGET}
        receipt = self.ledger.propose_lesson(key=self.key(), project=project,
                                             occurred_at=when, **(defaults | fields))
        return receipt.ids["lesson_id"]

    def reconcile(self, when: datetime) -> None:
        self.ledger.reconcile(key=self.key(), now=when)
