"""Raw events held to the rules of the command or policy that decides them.

A raw submission is appended as it is, and the views fold it whatever it claims. The
delta view folded a decision whatever the delta's status: a raw ``delta.approved`` made
a rejected delta active, a raw ``delta.restaged`` made it staged (so approvable), and a
raw ``skill.resolved`` naming a staged delta, or one of another project, had it rendered
for the rest of the session. The lesson view took a proposal citing another project's
outcome, or one never observed, at the confidence its sender chose, and a confirmation
by any outcome at all (attack12): a forged lesson was then promoted to global.

So before such an event is appended, the command that would have decided it is decided
against the views as they stand, and its events are thrown away: what that command
would refuse, the raw event is refused for, with the command's own error. An event only
a policy decides (a confirmation, a contradiction) is held to what the policy checks:
the outcome was observed in the event's project, the lesson applies there, and the
outcome's operations show what the event says they show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from lessonledger.commands.errors import EvidenceError, UnknownLessonError
from lessonledger.commands.handlers import decide
from lessonledger.commands.messages import ProposeLesson, command_from
from lessonledger.commands.policies import verdict
from lessonledger.commands.skill_errors import DeltaStateError, UnknownDeltaError
from lessonledger.commands.skill_handlers import decide_any
from lessonledger.commands.skill_messages import (
    ApproveDeltas,
    ArchiveDeltas,
    ProposeDelta,
    RecordResolution,
    RejectDeltas,
    SkillCommand,
)
from lessonledger.ledger.errors import InvalidEventError
from lessonledger.ledger.events import (
    AnyEvent,
    DeltaApproved,
    DeltaArchived,
    DeltaProposed,
    DeltaRejected,
    DeltaRestaged,
    LessonConfirmed,
    LessonContradicted,
    LessonDemoted,
    LessonProposed,
    OutcomeObserved,
    SkillResolved,
)
from lessonledger.projections.lesson_rows import OutcomeRow
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.runner import Projection, Runner
from lessonledger.projections.views import delta_view, lesson_view

__all__ = ["CHECKED", "check_submitted"]

#: The raw events checked here; any other is appended without a look at the views.
CHECKED = (DeltaApproved, DeltaRejected, DeltaArchived, DeltaProposed, DeltaRestaged,
           SkillResolved, OutcomeObserved, LessonProposed, LessonConfirmed,
           LessonContradicted, LessonDemoted)
#: The key of the command a raw event is checked as: never written, so any will do.
_KEY = "raw-submission-check"


def check_submitted(event: AnyEvent, views: Runner | Mapping[str, Projection]) -> None:
    """Refuse a raw event its command or policy could not have decided now.

    Raises:
        CommandError: the command's refusal (a delta in the wrong status, a resolution
            naming a delta it could not render, a proposal a person rejected, evidence
            of another project, an outcome never observed, …).
        InvalidEventError: a proposal starts above the confidence its command gives.
    """
    if isinstance(event, OutcomeObserved | LessonProposed | LessonConfirmed
                  | LessonContradicted | LessonDemoted):
        _check_lesson_event(event, lesson_view(views))
        return
    if isinstance(event, DeltaRestaged):
        # Only the track-record policy decides it, and only of an active delta.
        row = delta_view(views).deltas.get(event.delta_id)
        if row is None:
            raise UnknownDeltaError(event.delta_id)
        if row.status != "active":
            raise DeltaStateError(event.delta_id, row.status, "staged", ["active"])
        return
    command = _as_command(event)
    if command is not None:
        decide_any(command, views)


def _as_command(event: AnyEvent) -> SkillCommand | None:
    """The command that decides ``event``, or None when no command's rules apply."""
    fields: dict[str, Any]
    kind: type[SkillCommand]
    match event:
        case DeltaApproved():
            fields, kind = {"actor": event.by, "delta_ids": [event.delta_id]}, ApproveDeltas
        case DeltaRejected():
            fields, kind = ({"actor": event.by, "delta_ids": [event.delta_id],
                             "reason": event.reason}, RejectDeltas)
        case DeltaArchived():
            fields, kind = ({"actor": event.by, "delta_ids": [event.delta_id],
                             "reason": event.reason}, ArchiveDeltas)
        case DeltaProposed():
            fields, kind = ({name: getattr(event, name) for name in (
                "skill", "root", "anchor", "tier", "kind", "payload", "provenance", "scope",
                "evidence", "supersedes", "auto_approve")}, ProposeDelta)
        case SkillResolved():
            fields, kind = ({name: getattr(event, name) for name in (
                "skill", "root", "scope", "rendered", "orphans_shown", "text_digest")},
                RecordResolution)
        case _:
            return None
    return command_from({"key": _KEY, **fields}, kind)


def _check_lesson_event(event: AnyEvent, view: LessonView) -> None:
    match event:
        case OutcomeObserved():
            # A publisher may observe its outcome again (the view keeps the last), but
            # not another project's: that would move the outcome, and what cites it,
            # into a project the publisher may write.
            seen = view.outcomes.get(event.outcome_id)
            if seen is not None and seen.project != event.project:
                raise EvidenceError(event.outcome_id, (
                    f"was observed in project {seen.project}, not {event.project}: a new "
                    "outcome needs an id of its own"))
        case LessonProposed():
            _check_proposal(event, view)
        case LessonConfirmed() | LessonContradicted():
            row = view.lessons.get(event.lesson_id)
            if row is None:
                raise UnknownLessonError(event.lesson_id)
            outcome = _observed_in(view, event.outcome_id, event.project)
            if row.scope not in (event.project, "global"):
                raise EvidenceError(event.outcome_id, (
                    f"was observed in project {event.project}, where lesson "
                    f"{event.lesson_id} of {row.scope} does not apply"))
            held = verdict(row, outcome.operations)
            if held is not isinstance(event, LessonConfirmed):
                raise EvidenceError(event.outcome_id, (
                    "does not show what the lesson claims" if held is None else
                    "shows the opposite of what the event says"))
        case LessonDemoted() if event.outcome_id is not None:
            _observed_in(view, event.outcome_id, None)
        case _:
            pass


def _observed_in(view: LessonView, outcome_id: UUID, project: str | None) -> OutcomeRow:
    outcome = view.outcomes.get(outcome_id)
    if outcome is None:
        raise EvidenceError(outcome_id, "is not an observed outcome")
    if project is not None and outcome.project != project:
        raise EvidenceError(outcome_id, f"was observed in project {outcome.project}")
    return outcome


def _check_proposal(event: LessonProposed, view: LessonView) -> None:
    """A raw proposal is decided as ProposeLesson: text, evidence, and where it starts."""
    fields = {name: getattr(event, name) for name in (
        "text", "kind", "avoid_op", "prefer_op", "target", "longevity", "fingerprint",
        "evidence")}
    # The loop's own source is not a command's: judged as an extractor's, which starts
    # the same evidence at the same place or lower.
    source = "extractor" if event.source == "loop" else event.source
    command = command_from({"key": _KEY, "project": event.scope, "source": source,
                            **fields}, ProposeLesson)
    decide(command, view)
    rules = view.rules
    if event.source == "loop":
        start = max(rules.start_loop, rules.start_avoid)
    elif event.source == "model" or not event.evidence:
        start = rules.start_claim
    else:
        start = rules.start_extractor
    if event.supersedes is not None:
        # An edit carries the lesson it replaces at the confidence it stands at.
        old = view.lessons.get(event.supersedes)
        if old is not None:
            start = max(start, old.confidence)
    if event.confidence > start + 1e-9:
        msg = (f"invalid event: a {event.source} lesson citing {len(event.evidence)} "
               f"outcome(s) starts at confidence {start:g}, not {event.confidence:g}: "
               f"confidence is earned by confirmations; give {start:g} or less")
        raise InvalidEventError(msg, "$.event.confidence")
