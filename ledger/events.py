"""The event catalogue: every fact lessonledger records, as frozen, tagged msgspec Structs.

A stored event's type is its tag and its body is the msgpack of the Struct, tag
included, so a body decodes by itself into the right class. Tags are stable forever:
schemas evolve only by adding fields with defaults at the end; a changed meaning gets a
new event type, never a reused tag.

Bounds (``Meta``) make the decoder refuse oversized or malformed input with the path of
the offending field, before anything reaches the log.
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

import msgspec
from msgspec import Meta, Struct

__all__ = [
    "EVENT_TYPES",
    "AnyEvent",
    "Confidence",
    "ConsumerDeclared",
    "DeltaApproved",
    "DeltaArchived",
    "DeltaProposed",
    "DeltaRejected",
    "EnvironmentChanged",
    "Erased",
    "ErasureKind",
    "FactLearned",
    "Fingerprint",
    "Key",
    "LessonConfirmed",
    "LessonContradicted",
    "LessonDemoted",
    "LessonKind",
    "LessonPromoted",
    "LessonProposed",
    "LessonRecalled",
    "LessonSuperseded",
    "Longevity",
    "Operation",
    "OutcomeObserved",
    "ReconcilePassed",
    "Scope",
    "SectionAnchor",
    "Signal",
    "SkillBaseRegistered",
    "Text",
    "decode_event",
    "encode_event",
]

Name = Annotated[str, Meta(min_length=1, max_length=200)]
Key = Annotated[str, Meta(min_length=1, max_length=512)]
Text = Annotated[str, Meta(max_length=8192)]
#: A project digest (hex) or the literal ``global``. Patterns end in ``\Z``, never ``$``:
#: msgspec checks them with ``re.search``, where ``$`` matches before a final newline too.
Scope = Annotated[str, Meta(pattern=r"^(global|[0-9a-f]{16,64})\Z")]
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
Ids = Annotated[list[UUID], Meta(max_length=1000)]
#: A fingerprint as it comes in (a command, a raw submission): each name a component (a
#: tool, a schema) of at most 200 characters, each value (its version, its hash) of at
#: most 512, as an environment change's ``component`` and ``new``. The catalogue's own
#: ``fingerprint`` fields keep no such bound, so events stored before it still decode.
Fingerprint = Annotated[
    dict[Annotated[str, Meta(max_length=200)], Annotated[str, Meta(max_length=512)]],
    Meta(max_length=64)]
#: A SHA-256 digest, or empty.
Digest = Annotated[bytes, Meta(max_length=32)]

Signal = Literal["verification", "user_correction", "undo", "accepted", "tool"]
LessonKind = Literal["prefer", "avoid", "do"]
Source = Literal["loop", "extractor", "model", "user"]
Derivation = Literal["direct", "hypothesis"]
Longevity = Literal["tentative", "ongoing", "durable", "explicit"]
#: ``refuted``: a tentative lesson whose avoided operation then worked (the failure it was
#: learned from was a blip).
SupersedeReason = Literal["replaced", "decayed", "cap", "expired", "retired:user", "refuted"]


class _Event(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="type"):
    """Base of every catalogue event; the tag lives in the ``type`` field."""


class Operation(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One operation an agent tried during a task.

    Attributes:
        op: the operation key (for example ``pytest:run``).
        target: the target key, relative to the project (a digest or a named kind).
        ok: whether it succeeded.
        error: a short error signature when it failed.
        order: its place in the task, from 0 (at most 2**63 - 1: a stored int is 64-bit).
    """

    op: Key
    target: Key
    ok: bool
    error: Annotated[str, Meta(max_length=1024)] = ""
    order: Annotated[int, Meta(ge=0, le=(1 << 63) - 1)] = 0


class OutcomeObserved(_Event, frozen=True, kw_only=True, tag="outcome.observed"):
    """A task ended; what was tried, how it was judged, and what was in front of the agent."""

    outcome_id: UUID
    project: Scope
    task: Text = ""
    passed: bool
    signal: Signal
    operations: Annotated[list[Operation], Meta(max_length=500)] = []
    in_play: Ids = []
    fingerprint: Annotated[dict[str, str], Meta(max_length=64)] = {}
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


class LessonProposed(_Event, frozen=True, kw_only=True, tag="lesson.proposed"):
    """A lesson enters the ledger, with the outcomes that support it."""

    lesson_id: UUID
    text: Annotated[str, Meta(min_length=1, max_length=2000)]
    kind: LessonKind
    avoid_op: Annotated[str, Meta(max_length=512)] = ""
    prefer_op: Annotated[str, Meta(max_length=512)] = ""
    target: Key
    scope: Scope
    source: Source
    derivation: Derivation = "direct"
    longevity: Longevity = "ongoing"
    fingerprint: Annotated[dict[str, str], Meta(max_length=64)] = {}
    evidence: Ids = []
    confidence: Confidence = 0.5
    supersedes: UUID | None = None
    #: The publisher's own embedding of the text, if it has one (else the ledger's
    #: embedder makes one). Kept in the body: erasing the lesson erases the vector.
    vector: Annotated[list[float], Meta(max_length=4096)] = []
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


class LessonConfirmed(_Event, frozen=True, kw_only=True, tag="lesson.confirmed"):
    """An attributed outcome supports the lesson."""

    lesson_id: UUID
    outcome_id: UUID
    project: Scope


class LessonContradicted(_Event, frozen=True, kw_only=True, tag="lesson.contradicted"):
    """An attributed outcome refutes the lesson."""

    lesson_id: UUID
    outcome_id: UUID
    project: Scope


class LessonPromoted(_Event, frozen=True, kw_only=True, tag="lesson.promoted"):
    """The lesson's scope moves to global: a second distinct project confirmed it."""

    lesson_id: UUID
    projects: Annotated[list[Scope], Meta(min_length=2, max_length=64)]
    merged: Ids = []


class LessonDemoted(_Event, frozen=True, kw_only=True, tag="lesson.demoted"):
    """A global lesson contradicted from a third project returns to one project."""

    lesson_id: UUID
    to_scope: Scope
    outcome_id: UUID | None = None


class LessonSuperseded(_Event, frozen=True, kw_only=True, tag="lesson.superseded"):
    """The lesson leaves the active set: replaced, decayed, capped, expired, refuted, retired."""

    lesson_id: UUID
    reason: SupersedeReason
    by: UUID | None = None
    #: A person's own words, when one retired it.
    note: Text = ""
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


class LessonRecalled(_Event, frozen=True, kw_only=True, tag="lesson.recalled"):
    """Lessons were put in front of an agent: moves the usage clock, never the evidence clock."""

    lesson_ids: Ids
    project: Scope
    query: Text = ""


class ReconcilePassed(_Event, frozen=True, kw_only=True, tag="reconcile.passed"):
    """A reconcile pass ran as of ``now`` (nanoseconds since the epoch).

    Every active lesson that was not in play since the previous pass loses ``decay``
    confidence: an unused lesson fades. Which lessons those are follows from the log.
    """

    now: int
    decay: Confidence = 0.02
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


class EnvironmentChanged(_Event, frozen=True, kw_only=True, tag="environment.changed"):
    """A component of a scope's environment fingerprint changed."""

    scope: Scope
    component: Name
    old: Annotated[str, Meta(max_length=512)] = ""
    new: Annotated[str, Meta(max_length=512)]
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


class SectionAnchor(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A section of an authored skill: its slug and the digest of its text."""

    slug: Name
    digest: Annotated[str, Meta(pattern=r"^[0-9a-f]{64}\Z")]


class SkillBaseRegistered(_Event, frozen=True, kw_only=True, tag="skill.registered"):
    """An authored skill's identity, version, body digest and section anchors."""

    skill: Name
    root: Key
    version: Name
    body_digest: Annotated[str, Meta(pattern=r"^[0-9a-f]{64}\Z")]
    anchors: Annotated[list[SectionAnchor], Meta(max_length=500)] = []


class DeltaProposed(_Event, frozen=True, kw_only=True, tag="delta.proposed"):
    """A learned adjustment to a skill section, staged until approved."""

    delta_id: UUID
    skill: Name
    root: Key
    anchor: Name
    tier: Annotated[int, Meta(ge=0, le=2)]
    kind: Name
    payload: Text
    provenance: Name
    scope: Scope


class DeltaApproved(_Event, frozen=True, kw_only=True, tag="delta.approved"):
    """A staged delta becomes active."""

    delta_id: UUID
    by: Name


class DeltaRejected(_Event, frozen=True, kw_only=True, tag="delta.rejected"):
    """A staged delta is refused."""

    delta_id: UUID
    by: Name
    reason: Text = ""


class DeltaArchived(_Event, frozen=True, kw_only=True, tag="delta.archived"):
    """An active delta is reverted; kept in history."""

    delta_id: UUID
    by: Name
    reason: Text = ""


class FactLearned(_Event, frozen=True, kw_only=True, tag="fact.learned"):
    """A tier-0 learned value."""

    fact_id: UUID
    key: Key
    value: Text
    scope: Scope


class ConsumerDeclared(_Event, frozen=True, kw_only=True, tag="fact.consumer"):
    """A tool declares that it reads a fact key."""

    key: Key
    tool: Name


ErasureKind = Literal["principal", "session", "lesson", "outcome"]


class Erased(_Event, frozen=True, kw_only=True, tag="erasure.erased"):
    """Content was erased for good: what, by whom and why, never the content itself.

    ``positions`` names the events whose bodies went, so that an auditor sees what the
    erasure took and a replica that applies it deletes the same bodies.
    """

    what: ErasureKind
    subject: Key
    by: Name
    reason: Text
    positions: list[Annotated[int, Meta(ge=1)]] = []
    #: The digest of the whole command that wrote this as its first record (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


AnyEvent = (
    OutcomeObserved
    | LessonProposed
    | LessonConfirmed
    | LessonContradicted
    | LessonPromoted
    | LessonDemoted
    | LessonSuperseded
    | LessonRecalled
    | ReconcilePassed
    | EnvironmentChanged
    | SkillBaseRegistered
    | DeltaProposed
    | DeltaApproved
    | DeltaRejected
    | DeltaArchived
    | FactLearned
    | ConsumerDeclared
    | Erased
)

#: Every catalogue tag, which is also the event's stored type.
EVENT_TYPES: frozenset[str] = frozenset(
    cls.__struct_config__.tag for cls in AnyEvent.__args__
)

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[AnyEvent] = msgspec.msgpack.Decoder(AnyEvent)


def encode_event(event: AnyEvent) -> bytes:
    """Return the body bytes of a catalogue event."""
    return _encoder.encode(event)


def decode_event(body: bytes) -> AnyEvent:
    """Decode body bytes into their catalogue event."""
    return _decoder.decode(body)
