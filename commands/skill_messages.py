"""The skill, delta and fact commands: strict msgspec Structs, like the lesson commands.

Each carries an idempotency ``key``; a retry writes nothing new. ``actor`` is who acts
(the ``by`` of an approval, a rejection or an archive).
"""

from __future__ import annotations

from typing import Annotated, ClassVar
from uuid import UUID

from lessonledger.commands.messages import _Command
from lessonledger.ledger.events import Key, Name, Provenance, Scope, Text
from lessonledger.projections.anchors import WHOLE_BODY
from msgspec import Meta, field

__all__ = [
    "SKILL_COMMANDS",
    "ApproveDeltas",
    "ArchiveDeltas",
    "DeclareConsumer",
    "LearnFact",
    "ProposeDelta",
    "RecordResolution",
    "RegisterSkill",
    "RejectDeltas",
    "SkillCommand",
]

#: Deltas one command may move at once.
DeltaIds = Annotated[list[UUID], Meta(min_length=1, max_length=1000)]
Ids = Annotated[list[UUID], Meta(max_length=1000)]
#: A skill body: the caller's text, read to compute its digest and anchors, never stored.
Body = Annotated[str, Meta(max_length=1_000_000)]


class RegisterSkill(_Command, frozen=True, kw_only=True, tag="register_skill"):
    """Register an authored skill, or a new version of it (a changed body orphans deltas).

    ``body`` is read for its digest and section anchors; only those are stored (so the
    credential check, which looks at what is stored, does not read it).
    """

    #: Fields read but never stored.
    unstored: ClassVar[frozenset[str]] = frozenset({"body"})

    skill: Name
    root: Key = "user"
    version: Name = "0"
    body: Body
    tools: Annotated[list[Name], Meta(max_length=200)] = field(default_factory=list)
    permissions: Annotated[list[Key], Meta(max_length=100)] = field(default_factory=list)


class ProposeDelta(_Command, frozen=True, kw_only=True, tag="propose_delta"):
    """Propose a learned adjustment to a skill; it is staged (inert) until approved.

    Tier 1: ``kind="tool_hint"`` and ``payload`` a tool the skill has. Tier 3:
    ``kind`` one of ``preference``, ``example``, ``caveat``, with prose anchored to a
    section (its slug). Facts are tier 0: :class:`LearnFact`.
    """

    skill: Name
    root: Key = "user"
    anchor: Name = WHOLE_BODY
    tier: Annotated[int, Meta(ge=0, le=3)]
    kind: Name
    payload: Annotated[str, Meta(min_length=1, max_length=8192, pattern=r"\S")]
    provenance: Provenance
    scope: Scope = "global"
    evidence: Ids = field(default_factory=list)
    supersedes: Ids = field(default_factory=list)
    auto_approve: bool = False


class ApproveDeltas(_Command, frozen=True, kw_only=True, tag="approve_deltas"):
    """Approve staged deltas, or re-approve orphaned ones against the current base."""

    delta_ids: DeltaIds


class RejectDeltas(_Command, frozen=True, kw_only=True, tag="reject_deltas"):
    """Reject staged (or orphaned) deltas; they stay in history."""

    delta_ids: DeltaIds
    reason: Text = ""


class ArchiveDeltas(_Command, frozen=True, kw_only=True, tag="archive_deltas"):
    """Revert active (or orphaned) deltas: archived, kept in history, never deleted."""

    delta_ids: DeltaIds
    reason: Text = ""


class LearnFact(_Command, frozen=True, kw_only=True, tag="learn_fact"):
    """Record a tier-0 fact: a value a tool reads, never prose in a prompt."""

    namespace: Name
    fact_key: Key
    value: Text
    scope: Scope = "global"
    provenance: Provenance = "user_instruction"
    evidence: Ids = field(default_factory=list)


class DeclareConsumer(_Command, frozen=True, kw_only=True, tag="declare_consumer"):
    """Declare that a tool reads a fact namespace (facts no tool reads are inert)."""

    tool: Name
    namespace: Name


class RecordResolution(_Command, frozen=True, kw_only=True, tag="record_resolution"):
    """What a session's resolution rendered (in play for its outcomes) and reported."""

    skill: Name
    root: Key = "user"
    scope: Scope = "global"
    rendered: Ids = field(default_factory=list)
    orphans_shown: Ids = field(default_factory=list)
    text_digest: Annotated[str, Meta(pattern=r"^([0-9a-f]{64})?\Z")] = ""


SkillCommand = (
    RegisterSkill | ProposeDelta | ApproveDeltas | RejectDeltas | ArchiveDeltas | LearnFact
    | DeclareConsumer | RecordResolution
)
SKILL_COMMANDS = SkillCommand.__args__
