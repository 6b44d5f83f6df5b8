"""The delta view: every authored skill base and the learned deltas on it.

A fold, like the lesson view: it reads events in position order and never decides.

- ``DeltaProposed`` → ``staged`` (inert: never rendered);
- ``DeltaApproved`` → ``active`` (from ``staged``, or from ``orphaned``: a re-approval
  against the base as it now is); a consolidating delta's approval makes the deltas it
  names ``superseded`` (kept, never deleted);
- ``DeltaRejected`` → ``rejected``; ``DeltaArchived`` → ``archived`` (a revert);
  ``DeltaRestaged`` → ``staged`` (its track record fell below the bar);
- ``SkillBaseRegistered`` with a new body digest, or with permissions that differ
  (compared normalised, :mod:`.capabilities`), → every staged or active delta on that
  skill is ``orphaned``, renders nothing until re-approved, and is listed once in the
  next resolution's notice (``SkillResolved.orphans_shown`` marks it shown);
- ``SkillResolved`` puts the rendered deltas in play for the session (the session's
  first one for a skill, scope and base is kept as what the session renders), and
  ``OutcomeObserved`` counts an attempt (and a success when it passed) for each delta in
  play in its project: rendered in its session (a ``SkillResolved`` of that session names
  it). An outcome's ``in_play`` does not make a delta in play: only what reached the
  agent counts, so a staged delta never rendered earns no record.

A delta's ``attempts``/``successes`` are its record since its status last changed (what
the track-record policy judges); ``total_*`` count every attributed outcome.
"""

from __future__ import annotations

from typing import ClassVar, Literal
from uuid import UUID

import msgspec
from lessonledger.ledger.events import (
    DELTA_APPROVED,
    DELTA_PROPOSED,
    SKILL_REGISTERED,
    AnyEvent,
    DeltaApproved,
    DeltaArchived,
    DeltaProposed,
    DeltaRejected,
    DeltaRestaged,
    OutcomeObserved,
    SkillBaseRegistered,
    SkillResolved,
    decode_event,
    tag_of,
)
from lessonledger.ledger.log import Record
from lessonledger.projections.capabilities import permission_set
from lessonledger.projections.state_view import StateCodec, StateView

__all__ = ["LIVE", "BaseRow", "DeltaRow", "DeltaStatus", "DeltaView", "skill_key"]


DeltaStatus = Literal["staged", "active", "rejected", "archived", "orphaned", "superseded"]
#: Statuses a base change orphans.
LIVE: frozenset[str] = frozenset({"staged", "active"})


def skill_key(skill: str, root: str) -> str:
    """The key of a skill in the view: a delta follows the (name, root) pair."""
    return f"{root}\x1f{skill}"


def _first_key(session: str, skill: str, root: str, scope: str, digest: str) -> str:
    return "\x1f".join((session, skill_key(skill, root), scope, digest))


class BaseRow(msgspec.Struct, kw_only=True):
    """A registered authored skill, as last registered."""

    skill: str
    root: str
    version: str
    body_digest: str
    anchors: list[str]
    tools: list[str]
    permissions: list[str]
    position: int


class DeltaRow(msgspec.Struct, kw_only=True):
    """A delta and where it stands."""

    delta_id: UUID
    skill: str
    root: str
    anchor: str
    tier: int
    kind: str
    payload: str
    provenance: str
    scope: str
    created_at: int
    position: int
    base_digest: str
    evidence: list[UUID]
    supersedes: list[UUID]
    auto_approve: bool
    status: DeltaStatus = "staged"
    superseded_by: UUID | None = None
    #: Last status change: (position, event type, by).
    changed: tuple[int, str, str] = (0, "", "")
    attempts: int = 0
    successes: int = 0
    total_attempts: int = 0
    total_successes: int = 0

    @property
    def order(self) -> tuple[int, str, int, str]:
        """The rendering order: (tier, kind, created_at, id)."""
        return (self.tier, self.kind, self.created_at, str(self.delta_id))


class _State(msgspec.Struct):
    position: int = 0
    bases: dict[str, BaseRow] = {}
    deltas: dict[UUID, DeltaRow] = {}
    #: Per session, the deltas a resolution rendered (in play for its outcomes).
    rendered: dict[str, list[UUID]] = {}
    #: Per skill, orphans no resolution has shown yet.
    unshown: dict[str, list[UUID]] = {}
    #: Per (session, skill, scope, base digest): what the session's first resolution
    #: rendered, the source of truth for every later one in that session.
    first: dict[str, list[UUID]] = {}


#: The events the view folds: skill bases and their resolutions, deltas, and outcomes
#: (which count towards the track record of the deltas rendered in their session).
_FOLDS: frozenset[str] = frozenset(tag_of(kind) for kind in (
    SkillBaseRegistered, SkillResolved, DeltaProposed, DeltaApproved, DeltaRejected,
    DeltaArchived, DeltaRestaged, OutcomeObserved))


class DeltaView(StateView[_State]):
    """Folds skill and delta events; resolution and the commands read it."""

    _codec = StateCodec(_State)

    def __init__(self) -> None:
        self._s = _State()
        # Delta ids by skill key (derived, not saved): resolution reads one skill's.
        self._by_skill: dict[str, list[UUID]] = {}

    def _loaded(self) -> None:
        for row in self._s.deltas.values():
            self._by_skill.setdefault(skill_key(row.skill, row.root), []).append(row.delta_id)

    # -- queries ----------------------------------------------------------------------

    @property
    def deltas(self) -> dict[UUID, DeltaRow]:
        """Every delta ever proposed (and not erased), by id."""
        return self._s.deltas

    @property
    def bases(self) -> dict[str, BaseRow]:
        """Every registered base by :func:`skill_key`."""
        return self._s.bases

    def base(self, skill: str, root: str) -> BaseRow | None:
        """The skill's base as last registered, or None."""
        return self._s.bases.get(skill_key(skill, root))

    def on(self, skill: str, root: str) -> list[DeltaRow]:
        """Every delta on a skill, in rendering order."""
        deltas = self._s.deltas
        rows = [deltas[i] for i in self._by_skill.get(skill_key(skill, root), [])]
        return sorted(rows, key=lambda r: r.order)

    def unshown_orphans(self, skill: str, root: str) -> list[UUID]:
        """Orphans on the skill that no resolution has reported yet."""
        return list(self._s.unshown.get(skill_key(skill, root), []))

    def first_resolution(self, session: str, skill: str, root: str,
                         scope: str) -> list[UUID] | None:
        """What the session's first recorded resolution of the skill rendered, or None.

        Only a resolution against the base as now registered, in this scope, counts.
        """
        base = self.base(skill, root)
        if not session or base is None:
            return None
        found = self._s.first.get(_first_key(session, skill, root, scope, base.body_digest))
        return None if found is None else list(found)

    def rendered_in(self, session: str) -> list[UUID]:
        """Deltas rendered to the agent in this session."""
        return self._s.rendered.get(session, [])

    # -- the fold ---------------------------------------------------------------------

    #: The types it folds (the runner hands it no other record) and whose bodies it reads.
    folds: ClassVar[frozenset[str] | None] = _FOLDS
    reads: ClassVar[frozenset[str]] = _FOLDS
    decodes: ClassVar[frozenset[str]] = _FOLDS

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        self._s.position = record.envelope.position
        if record.payload is None or record.envelope.type not in _FOLDS:
            return
        if event is None:
            event = decode_event(record.payload)  # refused as it always was
        position, at = record.envelope.position, record.envelope.recorded_at
        match event:
            case SkillBaseRegistered():
                self._register(event, position)
            case DeltaProposed():
                self._propose(event, position, at)
            case DeltaApproved():
                self._approve(event, position)
            case DeltaRejected():
                self._move(event.delta_id, "rejected", position, event, event.by)
            case DeltaArchived():
                self._move(event.delta_id, "archived", position, event, event.by)
            case DeltaRestaged():
                self._move(event.delta_id, "staged", position, event, "policy")
            case SkillResolved():
                self._resolved(event, record.envelope.session)
            case OutcomeObserved():
                self._attribute(event, record.envelope.session)

    def _register(self, event: SkillBaseRegistered, position: int) -> None:
        key = skill_key(event.skill, event.root)
        old = self._s.bases.get(key)
        self._s.bases[key] = BaseRow(
            skill=event.skill, root=event.root, version=event.version,
            body_digest=event.body_digest, anchors=[a.slug for a in event.anchors],
            tools=list(event.tools), permissions=list(event.permissions), position=position)
        if old is None or (old.body_digest == event.body_digest and permission_set(
                old.permissions) == permission_set(event.permissions)):
            return
        orphans = self._s.unshown.setdefault(key, [])
        for row in self.on(event.skill, event.root):
            if row.status in LIVE:
                self._set(row, "orphaned", position, SKILL_REGISTERED, "base changed")
                orphans.append(row.delta_id)

    def _propose(self, event: DeltaProposed, position: int, at: int) -> None:
        if event.delta_id in self._s.deltas:
            return
        self._s.deltas[event.delta_id] = DeltaRow(
            delta_id=event.delta_id, skill=event.skill, root=event.root, anchor=event.anchor,
            tier=event.tier, kind=event.kind, payload=event.payload,
            provenance=event.provenance, scope=event.scope, created_at=at, position=position,
            base_digest=event.base_digest, evidence=list(event.evidence),
            supersedes=list(event.supersedes), auto_approve=event.auto_approve,
            changed=(position, DELTA_PROPOSED, ""))
        self._by_skill.setdefault(skill_key(event.skill, event.root), []).append(event.delta_id)

    def _approve(self, event: DeltaApproved, position: int) -> None:
        row = self._s.deltas.get(event.delta_id)
        if row is None:
            return
        row.base_digest = event.base_digest or row.base_digest
        self._forget_orphan(row)
        self._set(row, "active", position, DELTA_APPROVED, event.by)
        for old_id in row.supersedes:
            old = self._s.deltas.get(old_id)
            if old is not None and old.status in ("staged", "active", "orphaned"):
                self._forget_orphan(old)
                self._set(old, "superseded", position, DELTA_APPROVED, event.by)
                old.superseded_by = row.delta_id

    def _move(self, delta_id: UUID, status: DeltaStatus, position: int,
              event: msgspec.Struct, by: str) -> None:
        row = self._s.deltas.get(delta_id)
        if row is not None:
            self._forget_orphan(row)
            self._set(row, status, position, str(event.__struct_config__.tag), by)

    def _set(self, row: DeltaRow, status: DeltaStatus, position: int, why: str,
             by: str) -> None:
        row.status = status
        row.changed = (position, why, by)
        row.attempts = row.successes = 0

    def _forget_orphan(self, row: DeltaRow) -> None:
        listed = self._s.unshown.get(skill_key(row.skill, row.root))
        if listed and row.delta_id in listed:
            listed.remove(row.delta_id)

    def _resolved(self, event: SkillResolved, session: str) -> None:
        base = self.base(event.skill, event.root)
        if session and base is not None:
            self._s.first.setdefault(_first_key(session, event.skill, event.root, event.scope,
                                                base.body_digest), list(event.rendered))
        if session and event.rendered:
            seen = self._s.rendered.setdefault(session, [])
            seen.extend(i for i in event.rendered if i not in seen)
        listed = self._s.unshown.get(skill_key(event.skill, event.root), [])
        for delta_id in event.orphans_shown:
            if delta_id in listed:
                listed.remove(delta_id)

    def _attribute(self, event: OutcomeObserved, session: str) -> None:
        deltas = self._s.deltas
        for delta_id in self.rendered_in(session):
            row = deltas.get(delta_id)
            if row is None or row.scope not in (event.project, "global"):
                continue
            row.attempts += 1
            row.total_attempts += 1
            row.successes += event.passed
            row.total_successes += event.passed
