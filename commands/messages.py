"""The commands an agent, a person or a tool sends: strict msgspec Structs.

Each carries ``key``, an idempotency key chosen by the caller: running the same command
again (after a timeout, a crash, a retry) writes nothing new and returns the original
positions. ``lessonledger publish`` reads these as JSON lines, one object per line, with
``"command"`` naming which.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, TypeVar
from uuid import UUID

import msgspec
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.ledger.events import (
    KEYED_BYTES,
    ErasureKind,
    Fingerprint,
    Key,
    LessonKind,
    Longevity,
    Operation,
    Project,
    Scope,
    Signal,
    Text,
    overlong_key,
)
from msgspec import Meta, Struct

__all__ = [
    "AnyCommand",
    "DeclareEnvironmentChange",
    "EditLesson",
    "Erase",
    "Label",
    "ObserveOutcome",
    "Operation",
    "ProposeLesson",
    "Reconcile",
    "RetireLesson",
    "checked_command",
    "checked_project",
    "checked_text",
    "command_from",
    "decode_command",
    "decode_pushed",
    "refuse_blank",
]

C = TypeVar("C", bound="_Command")
#: A lesson's words: something to read, not only spaces.
LessonText = Annotated[str, Meta(min_length=1, max_length=2000, pattern=r"\S")]
IdempotencyKey = Annotated[str, Meta(min_length=1, max_length=200)]
Label = Annotated[str, Meta(max_length=200)]
#: A value of a publisher's vector: finite, and far inside float32's range (NaN fails
#: both bounds).
VectorValue = Annotated[float, Meta(ge=-1e6, le=1e6)]
#: A lesson's version: a stream version, which the log keeps in 64 bits.
Version = Annotated[int, Meta(ge=0, le=(1 << 63) - 1)]


class _Command(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
               tag_field="command"):
    """Fields every command has."""

    #: Whether ``principal`` is whose command it is, so its key is that principal's own
    #: (see :func:`~lessonledger.commands.handlers.command_id`). Not for an operator's
    #: grant (whose ``principal`` is the grantee) or erasure: their keys are the operators'.
    keyed_by_principal: ClassVar[bool] = True

    key: IdempotencyKey
    actor: Label = "agent"
    principal: Label = ""
    session: Label = ""
    #: When it happened by the caller's clock; the ledger's clock when omitted. Lets a
    #: scripted agent or a test replay a month in a second.
    occurred_at: datetime | None = None


#: Fields that name someone or something (or say why): empty means none where allowed,
#: but spaces alone name nobody, and an erasure or export of "  " could not tell them
#: from a typo, so they are refused.
_NAMING = ("principal", "session", "actor", "reason", "subject", "by")


def _refuse_blank(command: _Command) -> None:
    for name in _NAMING:
        value = getattr(command, name, None)
        if isinstance(value, str):
            refuse_blank(value, f"$.{name}", type(command).__name__)


def refuse_blank(value: str, field: str, what: str) -> None:
    """Refuse a name of spaces only: it names nobody, and nothing can erase by it."""
    if value and not value.strip():
        msg = (f"invalid {what}: {field[2:]} {value!r} is only spaces: write it out, or "
               "leave the field out")
        raise InvalidCommandError(msg, field)


class ObserveOutcome(_Command, frozen=True, kw_only=True, tag="observe_outcome"):
    """A task ended: how it was judged, what was tried, and which lessons were in front."""

    project: Project
    task: Text = ""
    passed: bool
    signal: Signal = "verification"
    operations: Annotated[list[Operation], Meta(max_length=500)] = []
    in_play: Annotated[list[UUID], Meta(max_length=1000)] = []
    #: The environment it ran in (tool versions, schema hashes, …); lessons learned
    #: from it are bound to these values.
    fingerprint: Fingerprint = {}


#: The operations each kind of lesson speaks about (DESIGN §4: what it predicts).
_OPERATIONS_OF = {"prefer": ("avoid_op", "prefer_op"), "avoid": ("avoid_op",),
                  "do": ("prefer_op",)}


class ProposeLesson(_Command, frozen=True, kw_only=True, tag="propose_lesson"):
    """A lesson from an extractor, the model, or a person, citing the outcomes behind it.

    Without evidence it is stored as ``claimed`` and never recalled until confirmed.
    """

    project: Project
    text: LessonText
    kind: LessonKind
    avoid_op: Annotated[str, Meta(max_length=512)] = ""
    prefer_op: Annotated[str, Meta(max_length=512)] = ""
    target: Key
    source: Literal["extractor", "model", "user"] = "extractor"
    longevity: Longevity = "ongoing"
    fingerprint: Fingerprint = {}
    evidence: Annotated[list[UUID], Meta(max_length=1000)] = []
    #: Your own embedding of the text; used when its length matches the ledger's embedder.
    #: Each value within ±1e6 (so no NaN, infinity or float32 overflow), else refused.
    vector: Annotated[list[VectorValue], Meta(max_length=4096)] = []

    def __post_init__(self) -> None:
        # Runs in a hand-built command too, whose fields nothing has checked yet: an
        # unknown kind is left to checked_command. InvalidCommandError is a ValueError,
        # so decoding reports it as a msgspec.ValidationError, as any bad field.
        need = _OPERATIONS_OF.get(self.kind, ())
        missing = [name for name in need if not getattr(self, name)]
        if missing:
            msg = f"a {self.kind!r} lesson needs {' and '.join(missing)}"
            raise InvalidCommandError(msg, f"$.{missing[0]}")
        # An operation the kind does not name predicts nothing, yet recall's disagreement
        # test would read it: refused rather than kept to mislead.
        stray = [name for name in ("avoid_op", "prefer_op")
                 if name not in need and self.kind in _OPERATIONS_OF and getattr(self, name)]
        if stray:
            msg = (f"a {self.kind!r} lesson names no {stray[0]}; leave it out, or make the "
                   "lesson a 'prefer' one, which names both")
            raise InvalidCommandError(msg, f"$.{stray[0]}")
        if self.longevity == "explicit" and self.source != "user":
            # Explicit never expires and outlasts what the loop learned: a person's word.
            msg = (f"an {self.source}'s lesson cannot be 'explicit' (only what a person "
                   "states is); leave longevity out, or set source 'user'")
            raise InvalidCommandError(msg, "$.longevity")


class EditLesson(_Command, frozen=True, kw_only=True, tag="edit_lesson"):
    """Replace a lesson's text: a new lesson supersedes the old, which stays in history."""

    lesson_id: UUID
    text: LessonText
    expected_version: Version | None = None


class RetireLesson(_Command, frozen=True, kw_only=True, tag="retire_lesson"):
    """A person retires a lesson; it is never re-learned from the same evidence."""

    lesson_id: UUID
    reason: Text = ""
    expected_version: Version | None = None


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

    #: An operator's command, as a grant is: its key is the operators' (only an admin
    #: erases through a hub), not one principal's.
    keyed_by_principal: ClassVar[bool] = False

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
_msgpack = msgspec.msgpack.Decoder(AnyCommand)


def decode_command(line: bytes | str) -> AnyCommand:
    """Decode one JSON command.

    Raises:
        msgspec.ValidationError: naming the field (a DecodeError for malformed JSON).
        InvalidCommandError: a string holds a lone surrogate escape (half a UTF-16
            pair), which is not Unicode text; ``field`` names it.
    """
    try:
        return _json.decode(line)
    except msgspec.DecodeError as e:
        # msgspec refuses a lone surrogate escape as "truncated" input; name it instead.
        try:
            parsed = json.loads(line)
        except (ValueError, RecursionError):
            raise e from None
        _refuse_surrogates("command", parsed)
        raise


def decode_pushed(data: bytes) -> AnyCommand:
    """Decode one command as a replica pushes it: msgpack, or a JSON line (older ones).

    A JSON command is an object, so its first byte is ``{`` or a blank; msgpack's map
    never starts with either.

    Raises:
        msgspec.ValidationError: naming the field (a DecodeError for malformed input).
        InvalidCommandError: a JSON string holds a lone surrogate escape.
    """
    if data[:1] in (b"{", b" ", b"\t", b"\n", b"\r"):
        return decode_command(data)
    return _msgpack.decode(data)


def _invalid(kind: str, e: msgspec.ValidationError) -> InvalidCommandError:
    # A dict's value is "at `$.fingerprint[...]`", its name "at `key` in `$.fingerprint`".
    match = re.search(r" - at (?:`key` in )?`(\$[^`]*)`$", str(e))
    msg = f"invalid {kind}: {e}; fix the field and retry"
    field = match.group(1) if match else "$"
    cause = e.__cause__ or e.__context__
    if isinstance(cause, InvalidCommandError) and field == "$":
        field = cause.field  # raised by a __post_init__, which knows the field
    return InvalidCommandError(msg, field)


def command_from(fields: dict[str, Any], kind: type[C]) -> C:
    """Build a command from keyword fields, refusing bad ones as the JSON path does.

    A Struct given as a field (an :class:`Operation` built by hand) is taken as it is;
    :func:`checked_command`, which the ledger runs on every command, checks it.
    """
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as e:
        raise _invalid(kind.__name__, e) from e


def checked_command(command: C) -> C:
    """``command`` if it holds to its schema, else refused as its JSON would be.

    A command (or an :class:`Operation` in it) built by hand is not checked by msgspec:
    a Struct's constructor checks no bounds, and ``convert`` takes a Struct given as a
    field as it is. So it is built again from its builtins, which checks every bound,
    and every string is checked to be Unicode text (a lone surrogate cannot be stored).

    Raises:
        InvalidCommandError: ``field`` is the JSON path of the first problem.
    """
    kind = type(command)
    builtins = msgspec.to_builtins(command)
    try:
        checked = msgspec.convert(builtins, kind)
    except msgspec.ValidationError as e:
        raise _invalid(kind.__name__, e) from e
    _refuse_surrogates(kind.__name__, builtins)
    _refuse_blank(checked)
    overlong = overlong_key(getattr(checked, "operations", ()), {
        f"$.{name}": getattr(checked, name) for name in ("principal", "session", "actor")})
    if overlong is not None:
        msg = (f"invalid {kind.__name__}: {overlong[2:]} is too long to key the views by "
               f"(an operation's op and target together, a principal, session or actor, at "
               f"most {KEYED_BYTES} bytes of UTF-8); shorten it (a digest of a long target)")
        raise InvalidCommandError(msg, overlong)
    return checked


def checked_text(text: str, field: str, bound: Any = str) -> str:
    """A query's text, refused as a command's field would be (bounds, Unicode).

    Args:
        text: what the caller gave.
        field: its JSON path, for the refusal.
        bound: the type it must have (for example :data:`Key`).
    """
    try:
        checked: str = msgspec.convert(text, bound)
    except msgspec.ValidationError as e:
        msg = f"invalid {field}: {e}; fix it and retry"
        raise InvalidCommandError(msg, field) from e
    _refuse_surrogates("query", text, field)
    return checked


def _refuse_surrogates(kind: str, value: object, path: str = "$") -> None:
    """Refuse the first string in ``value`` that is not Unicode text (a lone surrogate)."""
    bad = _not_unicode(value, path)
    if bad is not None:
        where, char = bad
        msg = (f"invalid {kind}: {where} is not valid Unicode (a lone surrogate, "
               f"{char!r}); send UTF-8 text")
        raise InvalidCommandError(msg, where)


def _not_unicode(value: object, path: str) -> tuple[str, str] | None:
    """The path of the first string in ``value`` with a lone surrogate, and the surrogate."""
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return path, value[e.start]
        return None
    if isinstance(value, dict):
        for name, item in value.items():
            bad = (_not_unicode(name, f"{path} (a name)")
                   or _not_unicode(item, f"{path}.{name}"))
            if bad is not None:
                return bad
    elif isinstance(value, list):
        for i, item in enumerate(value):
            bad = _not_unicode(item, f"{path}[{i}]")
            if bad is not None:
                return bad
    return None


def checked_project(project: str) -> str:
    """A query's project, refused as a command's would be when it is no digest."""
    try:
        return msgspec.convert(project, Scope)
    except msgspec.ValidationError:
        msg = (f"project {project!r} is not a project digest (16 to 64 lowercase hex "
               "characters) or 'global'; pass the digest the agent records outcomes under")
        raise InvalidCommandError(msg, "$.project") from None
