"""Events as publishers submit them: parsed strictly, refused with the path of what is wrong.

This is the ledger's door for bytes from outside (a publisher's JSON, a peer's frame).
Everything is checked before anything is written: shape and types by the typed decoder,
bounds by the catalogue's ``Meta`` (a fingerprint's by :data:`Fingerprint`), size by
:data:`MAX_BODY_BYTES`, and every string, the envelope's included, for the shape of a
credential (:mod:`lessonledger.ledger.secrets`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

import msgspec
from lessonledger.ledger.envelope import MAX_BODY_BYTES
from lessonledger.ledger.errors import BodyTooLargeError, CredentialEventError, InvalidEventError
from lessonledger.ledger.events import (
    KEYED_BYTES,
    LEDGER_ONLY,
    AnyEvent,
    Fingerprint,
    LessonProposed,
    OutcomeObserved,
    encode_event,
    overlong_key,
    tag_of,
)
from lessonledger.ledger.log import NewEvent
from lessonledger.ledger.secrets import credential_field, joined_operation
from msgspec import Meta, Struct

__all__ = ["MAX_SUBMISSION_BYTES", "Submission", "new_event", "parse_submission",
           "refuse_ledger_only", "refuse_overlong", "refuse_submitted_credentials",
           "to_new_event"]

#: Largest submission accepted as bytes: one maximal body plus room for the envelope.
MAX_SUBMISSION_BYTES = MAX_BODY_BYTES + (64 << 10)

Label = Annotated[str, Meta(max_length=200)]
# The envelope keeps times as 64-bit nanoseconds since the epoch.
_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(2262, 1, 1, tzinfo=UTC)


class Submission(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An event with the envelope fields its publisher chooses.

    Attributes:
        event_id: the idempotency id; resubmitting it is a no-op.
        stream: the stream the event belongs to.
        version: its version in the stream; a taken version is a conflict.
        occurred_at: when it happened, by the publisher's clock (with a time zone).
        actor: who wrote it.
        principal: whose data it is.
        session: the agent session, if any.
        event: the catalogue event itself (its ``type`` field picks the class).
    """

    event_id: UUID
    stream: UUID
    version: Annotated[int, Meta(ge=0, lt=1 << 62)]
    occurred_at: datetime
    actor: Annotated[str, Meta(min_length=1, max_length=200)]
    principal: Label = ""
    session: Label = ""
    event: AnyEvent

    def __post_init__(self) -> None:
        if self.occurred_at.tzinfo is None:
            msg = "occurred_at needs a time zone (for example a trailing Z)"
            raise ValueError(msg)
        if not _EARLIEST <= self.occurred_at < _LATEST:
            msg = f"occurred_at must be between {_EARLIEST.year} and {_LATEST.year}"
            raise ValueError(msg)


_decoder = msgspec.json.Decoder(Submission)
_PATH = re.compile(r" - at `(\$[^`]*)`$")
_MISSING = re.compile(r"missing required field `([^`]+)`")


def parse_submission(data: bytes | str) -> Submission:
    """Parse one JSON submission.

    Raises:
        InvalidEventError: with ``field`` set to the JSON path of the problem.
        BodyTooLargeError: the input is over :data:`MAX_SUBMISSION_BYTES`.
        CredentialEventError: a string (``$.principal``, ``$.event.text``) looks like a
            credential.
        InvalidEventError: the event is one only the ledger writes (an erasure, the rules
            in force), with ``field`` ``$.event.type``.
    """
    if len(data) > MAX_SUBMISSION_BYTES:
        raise BodyTooLargeError(len(data), MAX_SUBMISSION_BYTES, "$")
    try:
        submission = _decoder.decode(data)
    except msgspec.DecodeError as e:
        match = _PATH.search(str(e))
        field = match.group(1) if match else "$"
        missing = _MISSING.search(str(e))
        if missing:
            field = f"{field}.{missing.group(1)}"
        msg = f"invalid event: {e}; fix the field and resubmit"
        raise InvalidEventError(msg, field) from e
    _check_fingerprint(submission.event)
    # A grant's public key is checked by its schema, not screened: a grant submitted is
    # refused for its type, below.
    event = submission.event
    refuse_submitted_credentials(submission)
    if isinstance(event, LessonProposed) and not event.text.strip():
        # The catalogue cannot say it (stored lessons must still decode); a command's
        # LessonText refuses it, and so must the raw door (attack12).
        msg = "invalid event: a lesson's text is only spaces; write what the lesson says"
        raise InvalidEventError(msg, "$.event.text")
    refuse_ledger_only(event)
    if isinstance(event, OutcomeObserved | LessonProposed) and (
            getattr(event, "project", "") or getattr(event, "scope", "")) == "global":
        # Global is earned (a second project learns it, DESIGN §4), not stated: an
        # outcome "in global" would teach every project at once.
        msg = ("invalid event: an outcome or a lesson belongs to a project (its digest), "
               "not 'global'; a lesson becomes global when a second project learns it")
        raise InvalidEventError(msg, "$.event.project" if isinstance(event, OutcomeObserved)
                                else "$.event.scope")
    if isinstance(event, LessonProposed) and event.longevity == "explicit" \
            and event.source != "user":
        msg = (f"invalid event: an {event.source}'s lesson cannot be 'explicit' (only what a "
               "person states is); leave longevity out, or set source 'user'")
        raise InvalidEventError(msg, "$.event.longevity")
    refuse_overlong(submission)
    return submission


def refuse_submitted_credentials(submission: Submission) -> None:
    """Refuse a submission any field of which looks like a credential.

    The event's public-key fields are checked by its schema, not screened (see
    ``_Event.public_keys``).

    Raises:
        CredentialEventError: with ``field`` its JSON path (``$.event.text``).
    """
    event = submission.event
    found = (credential_field(submission, skip={"event"})
             or credential_field(event, skip=event.public_keys, path="$.event")
             or joined_operation(getattr(event, "operations", ()), "$.event"))
    if found is not None:
        raise CredentialEventError(found[1], found[0])


def refuse_overlong(submission: Submission) -> None:
    """Refuse a submission with a string too long to key the views by (:data:`KEYED_BYTES`).

    Raises:
        InvalidEventError: with ``field`` its JSON path (``$.event.operations[0].target``).
    """
    overlong = overlong_key(getattr(submission.event, "operations", ()), {
        "$.principal": submission.principal, "$.session": submission.session,
        "$.actor": submission.actor})
    if overlong is not None:
        field = overlong.replace("$.operations", "$.event.operations", 1)
        msg = (f"invalid event: {field[2:]} is too long to key the views by (an "
               "operation's op and target together, a principal, session or actor, at most "
               f"{KEYED_BYTES} bytes of UTF-8); shorten it (a digest of a long target)")
        raise InvalidEventError(msg, field)


def refuse_ledger_only(event: AnyEvent) -> None:
    """Refuse an event only the ledger writes, as its own decision (``ledger_only``).

    Raises:
        InvalidEventError: it is one, with ``field`` ``$.event.type``.
    """
    kind = tag_of(type(event))
    if kind in LEDGER_ONLY:
        msg = (f"invalid event: {kind} is written only by the ledger itself, as its own "
               "decision (its policies attribute outcomes to lessons; its commands edit, "
               "retire, erase and grant): publish the outcome, or run the command (for "
               "an erasure `lessonledger erase`, for a grant `lessonledger access grant`)")
        raise InvalidEventError(msg, "$.event.type")


def _check_fingerprint(event: AnyEvent) -> None:
    """Refuse a fingerprint over its bounds (:data:`Fingerprint`), before any pattern check.

    The catalogue does not bound it (events stored before the bound must still decode),
    so what comes in is checked here, as a command's is.
    """
    fingerprint = getattr(event, "fingerprint", None)
    if not fingerprint:
        return
    try:
        msgspec.convert(fingerprint, Fingerprint)
    except msgspec.ValidationError as e:
        match = _PATH.search(str(e))
        field = "$.event.fingerprint" + (match.group(1)[1:] if match else "")
        msg = f"invalid event: {e}; fix the field and resubmit"
        raise InvalidEventError(msg, field) from e


def new_event(
    event: AnyEvent,
    *,
    stream: UUID,
    version: int,
    event_id: UUID,
    actor: str,
    principal: str = "",
    session: str = "",
    occurred_at: int = 0,
) -> NewEvent:
    """Turn a catalogue event and its envelope fields into something the log appends.

    Raises:
        BodyTooLargeError: the encoded event is over :data:`MAX_BODY_BYTES`.
    """
    body = encode_event(event)
    if len(body) > MAX_BODY_BYTES:
        raise BodyTooLargeError(len(body), MAX_BODY_BYTES, "$.event")
    return NewEvent(
        stream=stream,
        version=version,
        type=event.__struct_config__.tag,  # type: ignore[arg-type]
        payload=body,
        event_id=event_id.bytes,
        occurred_at=occurred_at,
        actor=actor,
        principal=principal,
        session=session,
        scope=str(getattr(event, "scope", "") or getattr(event, "project", "")),
    )


def to_new_event(submission: Submission) -> NewEvent:
    """Turn a parsed submission into something the log appends."""
    return new_event(
        submission.event,
        stream=submission.stream,
        version=submission.version,
        event_id=submission.event_id,
        actor=submission.actor,
        principal=submission.principal,
        session=submission.session,
        occurred_at=int(submission.occurred_at.timestamp() * 1_000_000) * 1000,
    )
