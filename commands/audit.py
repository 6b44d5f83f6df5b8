"""``why``: the events that made a lesson what it is, and why it was or was not recalled."""

from __future__ import annotations

from uuid import UUID

import msgspec
from lessonledger.commands.errors import UnknownLessonError
from lessonledger.commands.recall import Recaller
from lessonledger.ledger.log import EventLog
from lessonledger.projections.lesson_rows import Adoption
from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.recall import MAX_LESSONS, MAX_TOKENS, Ranked, elsewhere

__all__ = ["RecallVerdict", "Step", "Why", "explain"]


class Step(msgspec.Struct, frozen=True):
    """One event behind a lesson: where, when, what, who, which outcome, and the result."""

    position: int
    recorded_at: int
    type: str
    actor: str
    session: str
    outcome: UUID | None
    confidence: float
    note: str
    #: The version of the rules in force at this step, and where they were adopted
    #: (0, 0: the defaults, none adopted yet); ``Why.rules`` has their figures.
    rules_version: int = 0
    rules_at: int = 0
    #: The publisher's clock (nanoseconds): when what moved the lesson happened, the
    #: clock its ``created_at`` and evidence clock run on.
    occurred_at: int = 0


class RecallVerdict(msgspec.Struct, frozen=True):
    """Whether a lesson is shown for a project and query, and the reason in words."""

    project: str
    query: str
    shown: bool
    reason: str
    place: int | None = None
    figures: Ranked | None = None


class Why(msgspec.Struct, frozen=True):
    """A lesson's story."""

    lesson: LessonRow
    steps: list[Step]
    recall: RecallVerdict | None = None
    #: Every adoption of rules in force at one of the steps (none: the defaults were).
    rules: list[Adoption] = []


def explain(view: LessonView, log: EventLog, recaller: Recaller, lesson_id: UUID, *,
            project: str | None = None, query: str | None = None,
            now: int | None = None) -> Why:
    """Tell a lesson's story from the log; with a project and query, judge its recall."""
    row = view.lessons.get(lesson_id)
    if row is None:
        raise UnknownLessonError(lesson_id)
    steps = []
    rules: dict[int, Adoption] = {}
    for move in row.moves:
        envelope = log.read(move.position, limit=1)[0].envelope
        adoption = view.rules_at(move.position)
        if adoption is not None:
            rules[adoption.position] = adoption
        steps.append(Step(move.position, envelope.recorded_at, move.type, envelope.actor,
                          envelope.session, move.outcome, move.confidence, move.note,
                          adoption.version if adoption else 0,
                          adoption.position if adoption else 0, envelope.occurred_at))
    verdict = None
    if project is not None:
        verdict = _verdict(view, recaller, row, project, query or "", now)
    return Why(msgspec.structs.replace(row, moves=list(row.moves)), steps, verdict,
               list(rules.values()))


def _verdict(view: LessonView, recaller: Recaller, row: LessonRow, project: str, query: str,
             now: int | None) -> RecallVerdict:
    def no(reason: str) -> RecallVerdict:
        return RecallVerdict(project, query, False, reason)

    if row.status == "claimed":
        return no("it is a claim: never recalled until an attributed outcome confirms it")
    if not row.active:
        by = f" by {row.superseded_by}" if row.superseded_by else ""
        return no(f"it is {row.status} ({row.reason or row.status}{by}); only active lessons "
                  "are recalled")
    if row.scope not in (project, "global"):
        return no(f"it belongs to project {row.scope}; recall never crosses projects")
    observed = view.observed(project)
    if elsewhere([row], observed):
        # Rule 11: recall leaves such a lesson out of the candidates, so it is never
        # ranked there; say which component differs instead of looking for its place.
        differs = ", ".join(f"{c} {v!r} where the project reported {observed[c]!r}"
                            for c, v in sorted(row.fingerprint.items())
                            if observed.get(c, v) != v)
        return no(f"it is bound to another environment ({differs}); a global lesson says "
                  "nothing where the project's outcomes last reported otherwise (rule 11)")
    result = recaller.rank(view, project, query, now, exact=True)
    place = next(i for i, r in enumerate(result.ranked, 1) if r.lesson_id == row.lesson_id)
    figures = result.ranked[place - 1]
    shown = any(r.lesson_id == row.lesson_id for r in result.lessons)
    if shown:
        reason = f"shown at place {place} with score {figures.score:.3f}"
    else:
        reason = (f"ranked {place} of {len(result.ranked)} (score {figures.score:.3f}); only "
                  f"{MAX_LESSONS} lessons in {MAX_TOKENS} tokens fit the section")
    return RecallVerdict(project, query, shown, reason, place, figures)
