"""Raw skill events held to the rules of the commands that decide them.

A raw submission is appended as it is, and the delta view folds a decision whatever the
delta's status: a raw ``delta.approved`` made a rejected delta active, a raw
``delta.restaged`` made it staged (so approvable), and a raw ``skill.resolved`` naming a
staged delta, or one of another project, had it rendered for the rest of the session (a
session's first resolution is replayed as recorded). So before such an event is
appended, the command that would have decided it is decided against the views as they
stand, and its events are thrown away: what that command would refuse, the raw event
is refused for, with the command's own error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lessonledger.commands.messages import command_from
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
from lessonledger.ledger.events import (
    AnyEvent,
    DeltaApproved,
    DeltaArchived,
    DeltaProposed,
    DeltaRejected,
    DeltaRestaged,
    SkillResolved,
)
from lessonledger.projections.runner import Projection, Runner
from lessonledger.projections.views import delta_view

__all__ = ["CHECKED", "check_submitted"]

#: The raw events checked here; any other is appended without a look at the views.
CHECKED = (DeltaApproved, DeltaRejected, DeltaArchived, DeltaProposed, DeltaRestaged,
           SkillResolved)
#: The key of the command a raw event is checked as: never written, so any will do.
_KEY = "raw-submission-check"


def check_submitted(event: AnyEvent, views: Runner | Mapping[str, Projection]) -> None:
    """Refuse a raw skill event its command could not have decided now.

    Raises:
        CommandError: the command's refusal (a delta in the wrong status, a resolution
            naming a delta it could not render, a proposal a person rejected, …).
    """
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
