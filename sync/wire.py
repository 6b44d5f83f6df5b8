"""The hub's wire protocol: frames, requests and replies as bytes. It owns no socket.

Every message is one :class:`Frame`, a msgpack array ``[version, kind, id, body]``:
``version`` is :data:`PROTOCOL_VERSION`, ``kind`` names what ``body`` holds (a msgpack
encoding of the Struct registered for that kind), and ``id`` is the sender's request id,
echoed in the reply so a client that retried can tell a stale answer from the one it
waits for. A transport (the hub's ROUTER, the client's DEALER, sync's transfers) passes
whole frames; :func:`decode_frame` refuses garbage, an oversized frame and an unknown
version with a typed :class:`WireError` before anything else looks at the bytes, so a
peer's bytes reach no handler unchecked. Sync's transfer frames register their own kinds
with :func:`register_kind` and reuse the same envelope and checks.

A refusal travels as :class:`Refused`: the error's class name, message and attributes,
and :func:`refusal_error` builds the same class again on the client, so ``except
StaleVersionError`` works across the wire as it does in-process.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Final, Literal, TypeVar, get_args
from uuid import UUID

import msgspec
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.ledger.submission import MAX_SUBMISSION_BYTES
from msgspec import Raw, Struct

__all__ = [
    "KINDS",
    "MAX_BATCH_COMMANDS",
    "MAX_FRAME_BYTES",
    "MAX_REPLY_BYTES",
    "PROTOCOL_VERSION",
    "QUERIES",
    "Answer",
    "BatchRequest",
    "BatchTooLargeError",
    "Busy",
    "CommandRequest",
    "EraseRequest",
    "Frame",
    "Queried",
    "QueryKind",
    "QueryRequest",
    "Receipted",
    "Receipts",
    "Refused",
    "StatusRequest",
    "SubmitRequest",
    "SubscribeRequest",
    "Subscribed",
    "WireError",
    "decode_body",
    "decode_frame",
    "encode_frame",
    "error_classes",
    "refusal",
    "refusal_error",
    "register_kind",
]

#: The protocol version this module speaks; a frame of any other is refused. 2: a sync
#: chunk carries its envelopes as a list of ``bin``, not one length-prefixed run.
PROTOCOL_VERSION: Final = 2
#: Largest frame accepted: one maximal event submission, plus room for the framing. A
#: batch of commands must fit too; larger work is split by the sender.
MAX_FRAME_BYTES: Final = MAX_SUBMISSION_BYTES + (64 << 10)
#: Largest reply a client takes. A request is held to :data:`MAX_FRAME_BYTES` because a
#: hub must read what anyone sends it; a reply comes from the hub the client chose, and
#: some answers (the catalogue of a project with many long lessons) outgrow a request.
#: Held to what one sync chunk may be; an answer over it is refused at the hub.
MAX_REPLY_BYTES: Final = 64 << 20
#: Commands one batch request carries at most. A batch is one transaction on the hub's
#: single writer, and every other client waits while it runs. Measured on 2 shared cores
#: (load 4): a batch of 500 outcomes took 0.1-0.25 s through a hub (0.25-0.75 s with two
#: operations each), one of 5,500 took 1.4-1.6 s, and 6,000 were seen to take 4.5 s.
#: Larger work goes in several batches (``publish --to`` splits a file so).
MAX_BATCH_COMMANDS: Final = 500

T = TypeVar("T")


class WireError(LessonLedgerError):
    """A frame is not one this protocol accepts; it was not acted on.

    Attributes:
        problem: ``garbage``, ``oversize``, ``version`` or ``kind``.
    """

    def __init__(self, message: str, problem: str = "garbage") -> None:
        super().__init__(f"{message}; nothing was done with it")
        self.problem = problem


class BatchTooLargeError(InvalidCommandError):
    """A batch request holds more commands than a hub takes in one; none was run.

    Attributes:
        commands: how many it held.
        limit: the most one batch may hold (:data:`MAX_BATCH_COMMANDS`).
    """

    def __init__(self, commands: int, limit: int = MAX_BATCH_COMMANDS) -> None:
        super().__init__(
            f"a batch of {commands} commands is over the hub's limit of {limit} per "
            f"batch (one batch holds the hub's single writer); nothing was run: send them "
            f"as batches of at most {limit}, each all-or-nothing (`lessonledger publish "
            f"--to` splits a file so), or one at a time", "$.commands")
        self.commands = commands
        self.limit = limit


class Frame(Struct, array_like=True, frozen=True, gc=False):
    """The envelope of every message: protocol version, kind, request id, body."""

    version: int
    kind: str
    id: int
    body: Raw


# -- requests --------------------------------------------------------------------------


class CommandRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """One command (its JSON-compatible msgpack form, ``command`` naming which)."""

    command: Raw


class BatchRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """Commands to run in turn in one transaction: every one, or none (``execute_all``).

    At most :data:`MAX_BATCH_COMMANDS`; more are refused (:class:`BatchTooLargeError`).
    """

    commands: list[Raw]


class EraseRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """An erasure (``Erase``'s fields); needs an admin grant."""

    erase: Raw


class SubmitRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """One event as a publisher submits it: ``parse_submission``'s JSON bytes."""

    submission: bytes


#: The queries a client may ask, each a read-side method of the same name (``skill_*``:
#: the method of the ledger's ``skills`` without the prefix).
QueryKind = Literal["recall", "check", "lessons", "why", "history", "log", "lesson",
                    "catalogue", "find_lesson", "outcome_stats", "head", "position_at",
                    "skill_deltas", "skill_base", "skill_find_delta", "skill_learned",
                    "skill_facts", "skill_resolve", "skill_diff"]
QUERIES: Final = frozenset(get_args(QueryKind))


class QueryRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """A read-side query: the method's name and its arguments by keyword."""

    query: QueryKind
    args: dict[str, Any] = {}


class SubscribeRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """Ask where the hub announces new heads."""


class StatusRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """Ask for the hub's head, clients, queue depth and batch sizes."""


# -- replies ---------------------------------------------------------------------------


class Receipted(Struct, frozen=True):
    """A command's receipt, sent once its commit is durable."""

    positions: list[int]
    ids: dict[str, UUID] = {}


class Receipts(Struct, frozen=True):
    """A batch's receipts, in order."""

    receipts: list[Receipted]


class Refused(Struct, frozen=True):
    """A typed refusal: the error class, its message and its attributes.

    ``fields`` holds ``[name, type, value]`` triples (type ``s`` text, ``i`` integer,
    ``f`` float, ``b`` bytes, ``u`` UUID, ``n`` none, ``t`` a time, ``e`` a nested
    refusal), so every attribute comes back with its own type.
    """

    error: str
    message: str
    fields: list[tuple[str, str, Any]] = []


class Answer(Struct, frozen=True):
    """A query's answer: the method's return value, msgpack-encoded."""

    value: Raw


class Busy(Struct, frozen=True):
    """The hub's queue is full (or it is shutting down): nothing was taken; retry."""

    retry_after_ms: int
    reason: str = "the hub's queue is full"


class Subscribed(Struct, frozen=True):
    """Where the hub announces each new head (a PUB endpoint) and the head now."""

    endpoint: str
    head: int


class Queried(Struct, frozen=True):
    """The hub's status, as ``lessonledger status`` prints it."""

    head: int
    clients: int
    queue_depth: int
    queue_bound: int
    batches: int
    commands: int
    events: int
    last_batch_sizes: list[int]
    mean_batch_size: float
    events_per_commit: float
    refusals: int
    busy: int
    started_at: int
    principal_mode: str


#: kind → body type. A kind unknown here is refused as ``kind``.
KINDS: dict[str, type[Struct]] = {
    "command": CommandRequest,
    "batch": BatchRequest,
    "erase": EraseRequest,
    "submit": SubmitRequest,
    "query": QueryRequest,
    "subscribe": SubscribeRequest,
    "status": StatusRequest,
    "receipt": Receipted,
    "receipts": Receipts,
    "refused": Refused,
    "answer": Answer,
    "busy": Busy,
    "subscribed": Subscribed,
    "status.answer": Queried,
}
_KIND_OF: dict[type[Struct], str] = {v: k for k, v in KINDS.items()}

_encoder = msgspec.msgpack.Encoder()
_frame = msgspec.msgpack.Decoder(Frame)
_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}


def register_kind(kind: str, body: type[Struct]) -> None:
    """Add a frame kind (sync's transfers add theirs); a taken name is a programming error."""
    if KINDS.get(kind, body) is not body:
        msg = f"frame kind {kind!r} is taken by {KINDS[kind].__name__}"
        raise ValueError(msg)
    KINDS[kind] = body
    _KIND_OF[body] = kind


def encode_frame(body: Struct, request_id: int = 0) -> bytes:
    """One frame carrying ``body`` (an instance of a registered kind's type).

    Raises:
        WireError: ``body`` holds a value msgpack cannot carry (an integer over 64 bits).
    """
    kind = _KIND_OF[type(body)]
    try:
        return _encoder.encode(Frame(PROTOCOL_VERSION, kind, request_id,
                                     Raw(_encoder.encode(body))))
    except (TypeError, OverflowError) as e:
        msg = f"a {kind!r} frame cannot carry this value ({e})"
        raise WireError(msg, "garbage") from e


def decode_frame(data: bytes | memoryview, *, limit: int = MAX_FRAME_BYTES) -> Frame:
    """The frame in ``data``, checked: size first, then shape, version and kind.

    Raises:
        WireError: ``oversize`` (over ``limit`` bytes), ``garbage`` (not a frame),
            ``version`` (a protocol version this side does not speak) or ``kind``.
    """
    if len(data) > limit:
        msg = (f"a frame of {len(data)} bytes is over the limit of "
               f"{limit} bytes; split the work into smaller requests")
        raise WireError(msg, "oversize")
    try:
        frame = _frame.decode(data)
    except msgspec.DecodeError as e:
        msg = f"not a lessonledger frame ({e})"
        raise WireError(msg, "garbage") from None
    if frame.version != PROTOCOL_VERSION:
        msg = (f"protocol version {frame.version} is not spoken here "
               f"(this side speaks {PROTOCOL_VERSION}); upgrade the older side")
        raise WireError(msg, "version")
    if frame.kind not in KINDS:
        msg = (f"unknown frame kind {frame.kind[:40]!r}; expected one of "
               f"{', '.join(sorted(KINDS))}")
        raise WireError(msg, "kind")
    return frame


def decode_body(frame: Frame, kind: type[T] | None = None) -> T:
    """The frame's body as its kind's Struct (or as ``kind``, which must be its type).

    Raises:
        WireError: ``garbage`` when the body does not hold to its kind's schema, or
            ``kind`` when the frame is not the kind expected.
    """
    expected = KINDS[frame.kind]
    if kind is not None and kind is not expected:
        msg = f"expected a {kind.__name__} frame, got {frame.kind!r}"
        raise WireError(msg, "kind")
    decoder = _decoders.get(expected)
    if decoder is None:
        decoder = _decoders[expected] = msgspec.msgpack.Decoder(expected)
    try:
        body: T = decoder.decode(frame.body)
    except msgspec.DecodeError as e:
        msg = (f"a {frame.kind!r} frame with a bad body ({e})")
        raise WireError(msg, "garbage") from None
    return body


# -- refusals as data ------------------------------------------------------------------


def error_classes() -> dict[str, type[LessonLedgerError]]:
    """Every error class of the project by name (the modules a caller has imported)."""
    found: dict[str, type[LessonLedgerError]] = {}
    stack: list[type[LessonLedgerError]] = [LessonLedgerError]
    while stack:
        cls = stack.pop()
        if cls.__module__.startswith("lessonledger.") or cls is LessonLedgerError:
            found.setdefault(cls.__name__, cls)
        stack.extend(cls.__subclasses__())
    return found


def _typed(value: object) -> tuple[str, Any] | None:
    match value:
        case None:
            return "n", None
        case bool() | int():
            return "i", int(value)
        case float():
            return "f", value
        case str():
            return "s", value
        case bytes():
            return "b", value
        case UUID():
            return "u", str(value)
        case _dt.datetime():
            return "t", value.isoformat()
        case LessonLedgerError():
            return "e", msgspec.to_builtins(refusal(value))
    return None


def refusal(error: LessonLedgerError) -> Refused:
    """An error as a :class:`Refused` reply: class, message and typed attributes.

    Attributes of a type the wire does not carry are left out (the message has them).
    """
    fields = []
    for name, value in sorted(vars(error).items()):
        if name.startswith("_"):
            continue
        typed = _typed(value)
        if typed is not None:
            fields.append((name, *typed))
    return Refused(type(error).__name__, str(error), fields)


def _untyped(kind: str, value: Any) -> object:
    match kind:
        case "u":
            return UUID(value)
        case "t":
            return _dt.datetime.fromisoformat(value)
        case "e":
            return refusal_error(msgspec.convert(value, Refused))
        case "i":
            return bool(value) if isinstance(value, bool) else int(value)
    return value


def refusal_error(refused: Refused) -> LessonLedgerError:
    """The error a :class:`Refused` reply describes, as the same class when known here.

    The instance is built without calling the class's constructor (whose arguments
    differ from class to class): its message and attributes are set as they were.
    An unknown class name comes back as the nearest known kind, :class:`WireError` for
    a protocol problem, else the root :class:`LessonLedgerError`.
    """
    cls = error_classes().get(refused.error, LessonLedgerError)
    error = cls.__new__(cls)
    Exception.__init__(error, refused.message)
    for name, kind, value in refused.fields:
        try:
            setattr(error, name, _untyped(kind, value))
        except (ValueError, TypeError, AttributeError, msgspec.ValidationError):
            continue
    if isinstance(error, WireError) and not hasattr(error, "problem"):
        error.problem = "garbage"
    return error

