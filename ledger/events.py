"""The event catalogue: every fact lessonledger records, as frozen, tagged msgspec Structs.

A stored event's type is its tag and its body is the msgpack of the Struct, tag
included, so a body decodes by itself into the right class. Tags are stable forever:
schemas evolve only by adding fields with defaults at the end; a changed meaning gets a
new event type, never a reused tag.

Bounds (``Meta``) make the decoder refuse oversized or malformed input with the path of
the offending field, before anything reaches the log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, ClassVar, Final, Literal
from uuid import UUID

import msgspec
from msgspec import Meta, Struct

__all__ = [
    "ACCESS_GRANTED",
    "ACCESS_REVOKED",
    "CITES_AN_OUTCOME",
    "DELTA_APPROVED",
    "DELTA_PROPOSED",
    "ENVIRONMENT_CHANGED",
    "ERASED",
    "ERASURE_ACKNOWLEDGED",
    "EVENT_CLASSES",
    "EVENT_TYPES",
    "FACT_LEARNED",
    "KEYED_BYTES",
    "LEDGER_ONLY",
    "LESSON_CONFIRMED",
    "LESSON_CONTRADICTED",
    "LESSON_DEMOTED",
    "LESSON_PROMOTED",
    "LESSON_PROPOSED",
    "LESSON_RECALLED",
    "LESSON_SUPERSEDED",
    "MINTS_AN_ID",
    "NAMES_A_DELTA",
    "NAMES_A_KEY",
    "NAMES_A_LESSON",
    "NAMES_A_PERSON",
    "NAMES_A_PRINCIPAL",
    "NEEDS_ADMIN",
    "OUTCOME_OBSERVED",
    "RECONCILE_PASSED",
    "SKILL_REGISTERED",
    "SNAPSHOT_TAKEN",
    "TRIGGERS_POLICIES",
    "Z85_ALPHABET",
    "Z85_KEY",
    "AccessGranted",
    "AccessRevoked",
    "AnyEvent",
    "Confidence",
    "ConsumerDeclared",
    "DeltaApproved",
    "DeltaArchived",
    "DeltaProposed",
    "DeltaRejected",
    "DeltaRestaged",
    "EnvironmentChanged",
    "Erased",
    "ErasureAcknowledged",
    "ErasureKind",
    "FactLearned",
    "Fingerprint",
    "Key",
    "KeyName",
    "LessonConfirmed",
    "LessonContradicted",
    "LessonDemoted",
    "LessonKind",
    "LessonPromoted",
    "LessonProposed",
    "LessonRecalled",
    "LessonSuperseded",
    "Longevity",
    "Name",
    "Operation",
    "OutcomeObserved",
    "Principal",
    "Project",
    "Provenance",
    "PublicKey",
    "ReconcilePassed",
    "RulesAdopted",
    "Scope",
    "SectionAnchor",
    "Signal",
    "SkillBaseRegistered",
    "SkillResolved",
    "SnapshotTaken",
    "Text",
    "decode_event",
    "encode_event",
    "overlong_key",
    "tag_of",
    "tags_with",
]

Name = Annotated[str, Meta(min_length=1, max_length=200)]
Key = Annotated[str, Meta(min_length=1, max_length=512)]
Text = Annotated[str, Meta(max_length=8192)]
#: A project digest (hex) or the literal ``global``. Patterns end in ``\Z``, never ``$``:
#: msgspec checks them with ``re.search``, where ``$`` matches before a final newline too.
Scope = Annotated[str, Meta(pattern=r"^(global|[0-9a-f]{16,64})\Z")]
#: A project digest alone: where an outcome happens and a lesson is learned. ``global``
#: is where a lesson goes when a second project learns it, never where one is put.
Project = Annotated[str, Meta(pattern=r"^[0-9a-f]{16,64}\Z")]
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
    """Base of every catalogue event; the tag lives in the ``type`` field.

    Each event declares its traits, and the code that must treat a kind of event alike
    derives its set of tags from them (:func:`tags_with`), never from a list of its own:
    erasure, the receipts, the policies' triggers and the lesson view.
    """

    #: The body is about one lesson (``lesson_id``): erasing the lesson takes it.
    names_a_lesson: ClassVar[bool] = False
    #: The body credits or blames a lesson on an outcome (``outcome_id``): erasing the
    #: outcome takes it, whoever's principal it carries.
    cites_an_outcome: ClassVar[bool] = False
    #: The policies react to it.
    triggers_policies: ClassVar[bool] = False
    #: The first event of a command that mints an id the receipt names.
    mints_an_id: ClassVar[bool] = False
    #: The body is about one learned delta (``delta_id``): erasing it takes the event.
    names_a_delta: ClassVar[bool] = False
    #: The body names a principal in a field of its own (``principal``), not only in
    #: its envelope: erasing that principal takes it too.
    names_a_principal: ClassVar[bool] = False
    #: The body is about one client key (``public_key``): erasing the principal a key
    #: was granted to takes the key's other events (its revocations) too.
    names_a_key: ClassVar[bool] = False
    #: Fields that hold a CURVE public key by their meaning: checked as a key by the
    #: schema, and left out of the credential screen, which takes any bare Z85 key for a
    #: secret one (the two look alike).
    public_keys: ClassVar[frozenset[str]] = frozenset()
    #: Only the ledger itself writes it, as the decision of a command it ran (an erasure
    #: deletes bodies as it records them; rules and grants change what the ledger does):
    #: a raw submission of one is refused, so no publisher can forge it.
    ledger_only: ClassVar[bool] = False
    #: The body names a person (a principal, or who did it) in a field of its own,
    #: beyond the envelope's actor and principal: :meth:`principals` says whom. A
    #: subject-access export (``lessonledger export --principal P``) takes such an event
    #: for each of them. Wider than ``names_a_principal`` (what erasing one takes): an
    #: erasure names whom it erased and who erased, and is never taken itself.
    names_a_person: ClassVar[bool] = False
    #: Only a command needing ``admin`` decides it (a reconcile, a skill's registration,
    #: a delta's proposal or decision, a fact), or its command checks it against the
    #: views (a resolution): a raw submission of it needs admin, or a writer of any
    #: project could approve deltas the command would refuse it.
    needs_admin: ClassVar[bool] = False

    def principals(self) -> frozenset[str]:
        """The people the body itself names (empty unless ``names_a_person``)."""
        return frozenset()


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

    triggers_policies: ClassVar[bool] = True
    mints_an_id: ClassVar[bool] = True

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

    names_a_lesson: ClassVar[bool] = True
    triggers_policies: ClassVar[bool] = True
    mints_an_id: ClassVar[bool] = True

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

    names_a_lesson: ClassVar[bool] = True
    cites_an_outcome: ClassVar[bool] = True
    triggers_policies: ClassVar[bool] = True
    #: Decided by the ledger's policies (or a command), never taken raw: a raw one
    #: would be the sender's verdict on an outcome (attack12, attack13).
    ledger_only: ClassVar[bool] = True

    lesson_id: UUID
    outcome_id: UUID
    project: Scope


class LessonContradicted(_Event, frozen=True, kw_only=True, tag="lesson.contradicted"):
    """An attributed outcome refutes the lesson.

    ``failed``: what the lesson prefers (or says to do) itself failed there for a lasting
    reason, not only what it avoids working: the lesson is in doubt in that project until
    an outcome there confirms it again (issue 12, rule 10).
    """

    names_a_lesson: ClassVar[bool] = True
    cites_an_outcome: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True

    lesson_id: UUID
    outcome_id: UUID
    project: Scope
    failed: bool = False


class LessonPromoted(_Event, frozen=True, kw_only=True, tag="lesson.promoted"):
    """The lesson's scope moves to global: a second distinct project confirmed it."""

    names_a_lesson: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True

    lesson_id: UUID
    projects: Annotated[list[Scope], Meta(min_length=2, max_length=64)]
    merged: Ids = []


class LessonDemoted(_Event, frozen=True, kw_only=True, tag="lesson.demoted"):
    """A global lesson contradicted from a third project returns to one project."""

    names_a_lesson: ClassVar[bool] = True
    cites_an_outcome: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True

    lesson_id: UUID
    to_scope: Scope
    outcome_id: UUID | None = None


class LessonSuperseded(_Event, frozen=True, kw_only=True, tag="lesson.superseded"):
    """The lesson leaves the active set: replaced, decayed, capped, expired, refuted, retired."""

    names_a_lesson: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True

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
    confidence, unless its longevity is ``exempt``: an unused lesson fades. Which lessons
    those are follows from the log.
    """

    needs_admin: ClassVar[bool] = True

    now: int
    decay: Confidence = 0.02
    #: Longevities that do not decay at this pass. Empty in passes recorded before issue
    #: 12 (when every unused lesson decayed), so a rebuild folds them as they ran.
    exempt: list[Longevity] = []
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""


class RulesAdopted(_Event, frozen=True, kw_only=True, tag="rules.adopted"):
    """The lesson rules in force from here on: their version and every figure.

    ``version`` names the rules' logic (what the policies do), ``figures`` the constants
    they and the view use (``projections.rules.Rules``, as builtins). A log with none of
    these was written under the default figures; each fold uses, at every position, the
    rules in force there.
    """

    ledger_only: ClassVar[bool] = True

    version: Annotated[int, Meta(ge=0)]
    figures: dict[Name, float | int | list[Name] | dict[Name, int]] = {}


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
    """An authored skill's identity, version, body digest and section anchors.

    The body itself is never stored: the caller keeps its ``SKILL.md`` and passes the
    text to resolution, which refuses it when its digest is not ``body_digest``.
    """

    needs_admin: ClassVar[bool] = True

    skill: Name
    root: Key
    version: Name
    body_digest: Annotated[str, Meta(pattern=r"^[0-9a-f]{64}\Z")]
    anchors: Annotated[list[SectionAnchor], Meta(max_length=500)] = []
    #: The tools the skill may use (its ``allowed-tools``): the only names a tool hint
    #: may carry.
    tools: Annotated[list[Name], Meta(max_length=200)] = []
    #: The skill's declared permissions (``filesystem:write:./**``, ``network:*``, …).
    permissions: Annotated[list[Key], Meta(max_length=100)] = []
    #: The digest of the whole command that wrote this as its first event (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    command_digest: Digest = b""


#: Where a delta came from; ``untrusted`` (a web page, a document, another agent's
#: output) is never auto-approved.
Provenance = Literal["user_instruction", "outcome", "extractor", "untrusted"]


class DeltaProposed(_Event, frozen=True, kw_only=True, tag="delta.proposed"):
    """A learned adjustment to a skill section, staged until approved.

    Tier 1 is a tool hint (``payload`` names the tool); tier 3 is prose (a preference,
    example or caveat). Tier 0 is a fact (:class:`FactLearned`), never a delta.
    """

    needs_admin: ClassVar[bool] = True
    names_a_delta: ClassVar[bool] = True
    mints_an_id: ClassVar[bool] = True

    delta_id: UUID
    skill: Name
    root: Key
    anchor: Name
    tier: Annotated[int, Meta(ge=0, le=3)]
    kind: Name
    payload: Text
    provenance: Name
    scope: Scope
    #: The base's body digest when proposed.
    base_digest: Annotated[str, Meta(pattern=r"^([0-9a-f]{64})?\Z")] = ""
    #: Outcomes behind it: erasing one takes the delta.
    evidence: Ids = []
    #: Deltas this one consolidates: superseded (never deleted) when it is approved.
    supersedes: Ids = []
    #: May the track record activate it without a person (trusted provenance only)?
    auto_approve: bool = False
    command_digest: Digest = b""


class DeltaApproved(_Event, frozen=True, kw_only=True, tag="delta.approved"):
    """A staged (or orphaned) delta becomes active, against the base digest named."""

    needs_admin: ClassVar[bool] = True
    names_a_delta: ClassVar[bool] = True
    names_a_person: ClassVar[bool] = True

    delta_id: UUID
    by: Name
    base_digest: Annotated[str, Meta(pattern=r"^([0-9a-f]{64})?\Z")] = ""
    command_digest: Digest = b""

    def principals(self) -> frozenset[str]:
        """Who decided it (``by``)."""
        return frozenset((self.by,))


class DeltaRejected(_Event, frozen=True, kw_only=True, tag="delta.rejected"):
    """A staged delta is refused."""

    needs_admin: ClassVar[bool] = True
    names_a_delta: ClassVar[bool] = True
    names_a_person: ClassVar[bool] = True

    delta_id: UUID
    by: Name
    reason: Text = ""
    command_digest: Digest = b""

    def principals(self) -> frozenset[str]:
        """Who decided it (``by``)."""
        return frozenset((self.by,))


class DeltaArchived(_Event, frozen=True, kw_only=True, tag="delta.archived"):
    """An active delta is reverted; kept in history."""

    needs_admin: ClassVar[bool] = True
    names_a_delta: ClassVar[bool] = True
    names_a_person: ClassVar[bool] = True

    delta_id: UUID
    by: Name
    reason: Text = ""
    command_digest: Digest = b""

    def principals(self) -> frozenset[str]:
        """Who decided it (``by``)."""
        return frozenset((self.by,))


class DeltaRestaged(_Event, frozen=True, kw_only=True, tag="delta.restaged"):
    """An active delta's track record fell below the bar: staged again, inert."""

    needs_admin: ClassVar[bool] = True
    names_a_delta: ClassVar[bool] = True

    delta_id: UUID
    attempts: Annotated[int, Meta(ge=0)]
    successes: Annotated[int, Meta(ge=0)]
    outcome_id: UUID | None = None


class SkillResolved(_Event, frozen=True, kw_only=True, tag="skill.resolved"):
    """A session resolved a skill: the deltas rendered are in play for its outcomes.

    ``orphans_shown`` lists the orphaned deltas the resolution reported, each once.
    """

    # Its command (RecordResolution) needs only a write grant, but checks what it names
    # against the delta view; a raw one would skip that check, so it needs admin.
    needs_admin: ClassVar[bool] = True

    skill: Name
    root: Key
    scope: Scope
    rendered: Ids = []
    orphans_shown: Ids = []
    text_digest: Annotated[str, Meta(pattern=r"^([0-9a-f]{64})?\Z")] = ""
    command_digest: Digest = b""


class FactLearned(_Event, frozen=True, kw_only=True, tag="fact.learned"):
    """A tier-0 learned value: a row a tool reads, never prose in a prompt."""

    needs_admin: ClassVar[bool] = True

    fact_id: UUID
    key: Key
    value: Text
    scope: Scope
    namespace: Name = "default"
    provenance: Name = "user_instruction"
    #: Outcomes behind it: erasing one takes the fact.
    evidence: Ids = []
    command_digest: Digest = b""


class ConsumerDeclared(_Event, frozen=True, kw_only=True, tag="fact.consumer"):
    """A tool declares that it reads a fact namespace (``key`` holds the namespace)."""

    needs_admin: ClassVar[bool] = True

    key: Key
    tool: Name
    command_digest: Digest = b""


#: The Z85 alphabet (ZeroMQ RFC 32), in which a 32-byte CURVE key is 40 characters.
Z85_ALPHABET: Final = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")
#: A CURVE key as Z85 text: exactly 40 characters of the alphabet.
Z85_KEY: Final = r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}\Z"
#: A client's CURVE public key, Z85.
PublicKey = Annotated[str, Meta(pattern=Z85_KEY)]
#: A key's name: also its file's (``NAME.key``), so no path separator, space or dot first.
KeyName = Annotated[str, Meta(min_length=1, max_length=100,
                              pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")]
#: Whose the key is: the principal stamped on every event the hub writes for it.
Principal = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^\S(.*\S)?\Z")]
Projects = Annotated[list[Scope], Meta(max_length=1000)]


class AccessGranted(_Event, frozen=True, kw_only=True, tag="access.granted"):
    """A client key may connect to the hub, as ``principal``, with these grants.

    ``read`` and ``write`` list project digests (``global`` is allowed too); lessons of
    the global scope are readable with any grant. ``admin`` may erase and grant. A new
    grant for the same public key replaces the previous one whole (not a union).
    """

    names_a_principal: ClassVar[bool] = True
    names_a_person: ClassVar[bool] = True
    names_a_key: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True
    public_keys: ClassVar[frozenset[str]] = frozenset({"public_key"})

    key_name: KeyName
    public_key: PublicKey
    principal: Principal
    read: Projects = []
    write: Projects = []
    admin: bool = False
    command_digest: Digest = b""

    def principals(self) -> frozenset[str]:
        """The grantee."""
        return frozenset((self.principal,))


class AccessRevoked(_Event, frozen=True, kw_only=True, tag="access.revoked"):
    """A client key may no longer connect: new connections from it are refused."""

    names_a_key: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True
    public_keys: ClassVar[frozenset[str]] = frozenset({"public_key"})

    key_name: KeyName
    public_key: PublicKey
    command_digest: Digest = b""


ErasureKind = Literal["principal", "session", "lesson", "outcome"]


class Erased(_Event, frozen=True, kw_only=True, tag="erasure.erased"):
    """Content was erased for good: what, by whom and why, never the content itself.

    ``positions`` names the events whose bodies went, so that an auditor sees what the
    erasure took and a replica that applies it deletes the same bodies.
    """

    names_a_person: ClassVar[bool] = True
    ledger_only: ClassVar[bool] = True

    what: ErasureKind
    subject: Key
    by: Name
    reason: Text
    positions: list[Annotated[int, Meta(ge=1)]] = []
    #: The digest of the whole command that wrote this as its first record (see
    #: ``commands.handlers.command_digest``): a retry under the same key must match it.
    #: Empty when a policy decided the event, or an older ledger wrote it.
    command_digest: Digest = b""

    def principals(self) -> frozenset[str]:
        """Who erased (``by``), and whose data it was when a principal was erased."""
        return frozenset((self.by, self.subject) if self.what == "principal" else (self.by,))


class SnapshotTaken(_Event, frozen=True, kw_only=True, tag="sync.snapshot"):
    """A ref now names a snapshot of the log up to the position before this event.

    The fields are the snapshot's (:class:`lessonledger.ledger.objects.Snapshot`), so
    its id can be recomputed from the log; ``previous`` is the id the ref named when the
    snapshot was taken (empty for a new ref): refs move only by compare-and-swap. Written
    with no principal or session, so no erasure takes it.
    """

    ledger_only: ClassVar[bool] = True

    name: Name
    previous: Digest = b""
    parent: Digest = b""
    first: Annotated[int, Meta(ge=1)] = 1
    last: Annotated[int, Meta(ge=0)] = 0
    root: Digest = b""
    link: Digest = b""
    erasures: Annotated[int, Meta(ge=0)] = 0
    created_at: Annotated[int, Meta(ge=0)] = 0
    origin: Annotated[str, Meta(max_length=200)] = ""


class ErasureAcknowledged(_Event, frozen=True, kw_only=True, tag="sync.erasure_acked"):
    """A replica applied an erasure: deleted its bodies, refolded its views, compacted.

    Attributes:
        erasure: the position of the ``Erased`` record it applied.
        replica: the replica's name (its key's name once keys are in use).
    """

    ledger_only: ClassVar[bool] = True

    erasure: Annotated[int, Meta(ge=1)]
    replica: Name


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
    | RulesAdopted
    | EnvironmentChanged
    | SkillBaseRegistered
    | DeltaProposed
    | DeltaApproved
    | DeltaRejected
    | DeltaArchived
    | DeltaRestaged
    | SkillResolved
    | FactLearned
    | ConsumerDeclared
    | Erased
    | SnapshotTaken
    | ErasureAcknowledged
    | AccessGranted
    | AccessRevoked
)

#: Every catalogue event class.
EVENT_CLASSES: tuple[type[_Event], ...] = AnyEvent.__args__


def tag_of(kind: type[_Event]) -> str:
    """An event class's tag: the ``type`` it is stored under."""
    return str(kind.__struct_config__.tag)


#: Every catalogue tag, which is also the event's stored type.
EVENT_TYPES: frozenset[str] = frozenset(tag_of(cls) for cls in EVENT_CLASSES)


#: The most bytes the strings one row of a view is keyed by may hold: an operation's op
#: and target together, a principal, a session. LMDB refuses keys over 511 bytes and a
#: row's key adds its view's prefix and a project to them (attack13: an outcome with a
#: 300-character op and target was taken, and every later save of the views failed).
#: Checked where commands and submissions come in, not by the schema: what is stored
#: must still decode.
KEYED_BYTES: Final = 400


def overlong_key(operations: Sequence[Operation], labels: Mapping[str, str]) -> str | None:
    """The JSON path (from the command or event) of the first string over :data:`KEYED_BYTES`.

    ``labels`` are the principal and session by the path they have (``$.principal``).
    """
    for i, op in enumerate(operations):
        if len(op.op.encode()) + len(op.target.encode()) > KEYED_BYTES:
            return f"$.operations[{i}].target"
    for path, value in labels.items():
        if len(value.encode()) > KEYED_BYTES:
            return path
    return None


def tags_with(trait: str) -> frozenset[str]:
    """The tags of the events that declare ``trait`` (see :class:`_Event`)."""
    return frozenset(tag_of(cls) for cls in EVENT_CLASSES if getattr(cls, trait))


OUTCOME_OBSERVED: Final = tag_of(OutcomeObserved)
LESSON_PROPOSED: Final = tag_of(LessonProposed)
LESSON_CONFIRMED: Final = tag_of(LessonConfirmed)
LESSON_CONTRADICTED: Final = tag_of(LessonContradicted)
LESSON_PROMOTED: Final = tag_of(LessonPromoted)
LESSON_DEMOTED: Final = tag_of(LessonDemoted)
LESSON_SUPERSEDED: Final = tag_of(LessonSuperseded)
LESSON_RECALLED: Final = tag_of(LessonRecalled)
RECONCILE_PASSED: Final = tag_of(ReconcilePassed)
ENVIRONMENT_CHANGED: Final = tag_of(EnvironmentChanged)
ERASED: Final = tag_of(Erased)
SKILL_REGISTERED: Final = tag_of(SkillBaseRegistered)
DELTA_PROPOSED: Final = tag_of(DeltaProposed)
DELTA_APPROVED: Final = tag_of(DeltaApproved)
FACT_LEARNED: Final = tag_of(FactLearned)
SNAPSHOT_TAKEN: Final = tag_of(SnapshotTaken)
ERASURE_ACKNOWLEDGED: Final = tag_of(ErasureAcknowledged)
ACCESS_GRANTED: Final = tag_of(AccessGranted)
ACCESS_REVOKED: Final = tag_of(AccessRevoked)
#: Events naming a principal in their body: what erasing the principal takes besides
#: the events its envelopes name.
NAMES_A_PRINCIPAL: Final = tags_with("names_a_principal")
#: Events about one client key.
NAMES_A_KEY: Final = tags_with("names_a_key")
#: Events about one learned delta: what erasing a delta's source takes with it.
NAMES_A_DELTA: Final = tags_with("names_a_delta")
#: Events about one lesson: what erasing a lesson takes.
NAMES_A_LESSON: Final = tags_with("names_a_lesson")
#: Events crediting or blaming a lesson on an outcome: what erasing the outcome takes.
CITES_AN_OUTCOME: Final = tags_with("cites_an_outcome")
#: Events whose bodies name a person beyond their envelope (``_Event.principals``).
NAMES_A_PERSON: Final = tags_with("names_a_person")
#: Events the policies react to.
TRIGGERS_POLICIES: Final = tags_with("triggers_policies")
#: First events whose ids a command's receipt names.
MINTS_AN_ID: Final = tags_with("mints_an_id")
#: Events only the ledger writes: never accepted as a raw submission.
LEDGER_ONLY: Final = tags_with("ledger_only")
#: Events a raw submission of which needs admin (as the commands deciding them do).
NEEDS_ADMIN: Final = tags_with("needs_admin")

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[AnyEvent] = msgspec.msgpack.Decoder(AnyEvent)


def encode_event(event: AnyEvent) -> bytes:
    """Return the body bytes of a catalogue event."""
    return _encoder.encode(event)


def decode_event(body: bytes) -> AnyEvent:
    """Decode body bytes into their catalogue event."""
    return _decoder.decode(body)
