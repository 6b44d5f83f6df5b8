"""Raw events held to the rules of the command that decides them.

A raw submission is appended as it is, and the views fold it whatever it claims. The
delta view folded a decision whatever the delta's status: a raw ``delta.approved`` made
a rejected delta active, a raw ``delta.restaged`` made it staged (so approvable), and a
raw ``skill.resolved`` naming a staged delta, or one of another project, had it rendered
for the rest of the session. The lesson view took a proposal citing another project's
outcome, or one never observed, at the confidence its sender chose, under another
lesson's id or superseding another project's lesson (attack12, attack13): a forged
lesson was then promoted to global.

So before such an event is appended, the command that would have decided it is decided
against the views as they stand, and its events are thrown away: what that command
would refuse, the raw event is refused for, with the command's own error, and a raw
proposal must hold what its command decides (its derivation, evidence, confidence).
What only the ledger's policies decide (a confirmation, a promotion, …) is never taken
raw at all (``ledger_only`` in the catalogue).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lessonledger.commands.handlers import decide
from lessonledger.commands.messages import ProposeLesson, command_from
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
    LessonProposed,
    OutcomeObserved,
    SkillResolved,
)
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.runner import Projection, Runner
from lessonledger.projections.views import delta_view, lesson_view

__all__ = ["CHECKED", "check_submitted"]

#: The raw events checked here; any other is appended without a look at the views.
CHECKED = (DeltaApproved, DeltaRejected, DeltaArchived, DeltaProposed, DeltaRestaged,
           SkillResolved, OutcomeObserved, LessonProposed)
#: The key of the command a raw event is checked as: never written, so any will do.
_KEY = "raw-submission-check"


def check_submitted(event: AnyEvent, views: Runner | Mapping[str, Projection]) -> None:
    """Refuse a raw event its command could not have decided now.

    Raises:
        CommandError: the command's refusal (a delta in the wrong status, a resolution
            naming a delta it could not render, a proposal a person rejected, evidence
            of another project, an outcome never observed, …).
        InvalidEventError: a proposal is not what its command decides (its id is
            taken, or a field differs).
    """
    if isinstance(event, OutcomeObserved | LessonProposed):
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
    if isinstance(event, OutcomeObserved):
        # One outcome, one observation: a second one under the same id (in any project)
        # would replace what the first showed, so an outcome that confirmed a lesson
        # could confirm it again in another session, take back evidence it gave, or
        # move into a project its sender may write (attack12, attack13).
        seen = view.outcomes.get(event.outcome_id)
        if seen is not None:
            msg = (f"invalid event: outcome {event.outcome_id} was observed already (in "
                   f"project {seen.project}); a new outcome needs an id of its own")
            raise InvalidEventError(msg, "$.event.outcome_id")
    elif isinstance(event, LessonProposed):
        _check_proposal(event, view)


#: What a raw proposal must hold as its command decides it (its id, digest and vector
#: are its own: the vector is the publisher's embedding, used when it fits).
_DECIDED = ("scope", "text", "kind", "avoid_op", "prefer_op", "target", "source",
            "derivation", "longevity", "fingerprint", "evidence", "confidence")


def _check_proposal(event: LessonProposed, view: LessonView) -> None:
    """Refuse a raw proposal that is not what ProposeLesson decides now.

    That is: a new id, evidence observed in its project that shows it, and the
    derivation, evidence and confidence that command gives, not ones its sender chose.

    Raises:
        InvalidEventError: its id names a lesson already, its source is the loop's, it
            supersedes a lesson, or a field differs from the command's decision (named,
            with the value it needs).
        CommandError: the command's own refusal (evidence of another project, never
            observed, or not showing the lesson).
    """
    if event.lesson_id in view.lessons:
        msg = (f"invalid event: lesson {event.lesson_id} is already in the ledger; a "
               "proposal needs an id of its own (to change a lesson, edit or retire it)")
        raise InvalidEventError(msg, "$.event.lesson_id")
    if event.source == "loop":
        msg = ("invalid event: a loop lesson is the ledger's own decision; publish the "
               "outcome it would be learned from, and the ledger's loop learns it")
        raise InvalidEventError(msg, "$.event.source")
    if event.supersedes is not None:
        # Its command is an edit, which also supersedes the old lesson: an event only the
        # ledger writes. Raw, the two could not be one decision.
        msg = ("invalid event: a raw proposal cannot supersede a lesson; to replace one, "
               "send the edit_lesson command (`lessonledger lessons edit`)")
        raise InvalidEventError(msg, "$.event.supersedes")
    command = command_from({
        "key": _KEY, "project": event.scope, **{name: getattr(event, name) for name in (
            "text", "kind", "avoid_op", "prefer_op", "target", "source", "longevity",
            "fingerprint", "evidence")}}, ProposeLesson)
    decided = decide(command, view)[0].event
    assert isinstance(decided, LessonProposed)
    for name in _DECIDED:
        given, wanted = getattr(event, name), getattr(decided, name)
        if given != wanted:
            msg = ("invalid event: a raw lesson.proposed must be what propose_lesson decides, "
                   f"and its {name} would be {_shown(wanted)}, not {_shown(given)}; send "
                   f"the command instead, or that {name}")
            raise InvalidEventError(msg, f"$.event.{name}")


def _shown(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return repr(value) if isinstance(value, str) else str(value)
