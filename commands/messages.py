"""The commands an agent, a person or a tool sends: strict msgspec Structs.

Each carries ``key``, an idempotency key chosen by the caller: running the same command
again (after a timeout, a crash, a retry) writes nothing new and returns the original
positions. ``lessonledger publish`` reads these as JSON lines, one object per line, with
``"command"`` naming which.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

import msgspec
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.ledger.events import (
    ErasureKind,
    Key,
    LessonKind,
    Longevity,
    Operation,
    Scope,
    Signal,
    Text,
)
from msgspec import Meta, Struct

__all__ = [
    "AnyCommand",
    "DeclareEnvironmentChange",
    "EditLesson",
    "Erase",
    "ObserveOutcome",
    "Operation",
    "ProposeLesson",
    "Reconcile",
    "RetireLesson",
    "checked_project",
    "command_from",
    "decode_command",
]

C = TypeVar("C", bound="_Command")
#: A lesson's words: something to read, not only spaces.
LessonText = Annotated[str, Meta(min_length=1, max_length=2000, pattern=r"\S")]
IdempotencyKey = Annotated[str, Meta(min_length=1, max_length=200)]
Label = Annotated[str, Meta(max_length=200)]


class _Command(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
               tag_field="command"):
    """Fields every command has."""

    key: IdempotencyKey
    actor: Label = "agent"
    principal: Label = ""
    session: Label = ""
    #: When it happened by the caller's clock; the ledger's clock when omitted. Lets a
    #: scripted agent or a test replay a month in a second.
    occurred_at: datetime | None = None


class ObserveOutcome(_Command, frozen=True, kw_only=True, tag="observe_outcome"):
    """A task ended: how it was judged, what was tried, and which lessons were in front."""

    project: Scope
    task: Text = ""
    passed: bool
    signal: Signal = "verification"
    operations: Annotated[list[Operation], Meta(max_length=500)] = []
    in_play: Annotated[list[UUID], Meta(max_length=1000)] = []
    #: The environment it ran in (tool versions, schema hashes, …); lessons learned
    #: from it are bound to these values.
    fingerprint: Annotated[dict[str, str], Meta(max_length=64)] = {}


class ProposeLesson(_Command, frozen=True, kw_only=True, tag="propose_lesson"):
    """A lesson from an extractor, the model, or a person, citing the outcomes behind it.

    Without evidence it is stored as ``claimed`` and never recalled until confirmed.
    """

    project: Scope
    text: LessonText
    kind: LessonKind
    avoid_op: Annotated[str, Meta(max_length=512)] = ""
    prefer_op: Annotated[str, Meta(max_length=512)] = ""
    target: Key
    source: Literal["extractor", "model", "user"] = "extractor"
    longevity: Longevity = "ongoing"
    fingerprint: Annotated[dict[str, str], Meta(max_length=64)] = {}
    evidence: Annotated[list[UUID], Meta(max_length=1000)] = []
    #: Your own embedding of the text; used when its length matches the ledger's embedder.
    vector: Annotated[list[float], Meta(max_length=4096)] = []

    def __post_init__(self) -> None:
        need = {"prefer": ("avoid_op", "prefer_op"), "avoid": ("avoid_op",),
                "do": ("prefer_op",)}[self.kind]
        missing = [name for name in need if not getattr(self, name)]
        if missing:
            msg = f"a {self.kind!r} lesson needs {' and '.join(missing)}"
            raise ValueError(msg)


class EditLesson(_Command, frozen=True, kw_only=True, tag="edit_lesson"):
    """Replace a lesson's text: a new lesson supersedes the old, which stays in history."""

    lesson_id: UUID
    text: LessonText
    expected_version: Annotated[int, Meta(ge=0)] | None = None


class RetireLesson(_Command, frozen=True, kw_only=True, tag="retire_lesson"):
    """A person retires a lesson; it is never re-learned from the same evidence."""

    lesson_id: UUID
    reason: Text = ""
    expected_version: Annotated[int, Meta(ge=0)] | None = None


class DeclareEnvironmentChange(_Command, frozen=True, kw_only=True,
                               tag="declare_environment_change"):
    """A fingerprint component (tool version, schema hash, …) changed in a scope."""

    scope: Scope
    component: Annotated[str, Meta(min_length=1, max_length=200)]
    new: Annotated[str, Meta(max_length=512)]


class Reconcile(_Command, frozen=True, kw_only=True, tag="reconcile"):
    """The time-driven pass: decay, expiry and caps, as of an explicit ``now``."""

    now: datetime


class Erase(_Command, frozen=True, kw_only=True, tag="erase"):
    """Delete content for good: a principal's, a session's, one lesson's or one outcome's.

    The bodies go in the transaction that records the erasure; envelopes and the chain
    stay, so the history still verifies. Not an agent's command (``publish`` refuses it):
    a person or an operator runs it through :meth:`Ledger.erase` or ``lessonledger erase``.
    """

    what: ErasureKind
    subject: Key
    reason: Text = ""
    #: Who erases: named, since the record of an erasure says by whom.
    actor: Annotated[str, Meta(min_length=1, max_length=200)] = "operator"


AnyCommand = (
    ObserveOutcome | ProposeLesson | EditLesson | RetireLesson | DeclareEnvironmentChange
    | Reconcile
)

_json = msgspec.json.Decoder(AnyCommand)


def decode_command(line: bytes | str) -> AnyCommand:
    """Decode one JSON command; raises ``msgspec.ValidationError`` naming the field."""
    return _json.decode(line)


def command_from(fields: dict[str, Any], kind: type[C]) -> C:
    """Build a command from keyword fields, refusing bad ones as the JSON path does."""
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as e:
        match = re.search(r" - at `(\$[^`]*)`$", str(e))
        msg = f"invalid {kind.__name__}: {e}; fix the field and retry"
        raise InvalidCommandError(msg, match.group(1) if match else "$") from e


def checked_project(project: str) -> str:
    """A query's project, refused as a command's would be when it is no digest."""
    try:
        return msgspec.convert(project, Scope)
    except msgspec.ValidationError:
        msg = (f"project {project!r} is not a project digest (16 to 64 lowercase hex "
               "characters) or 'global'; pass the digest the agent records outcomes under")
        raise InvalidCommandError(msg, "$.project") from None
