"""Skill, delta and fact command handlers: check against the views, decide the events.

Pure, like :func:`lessonledger.commands.handlers.decide`: a refusal raises a typed
error and nothing is written. The write-path rules for a delta (see
:mod:`lessonledger.commands.skill_errors` for their names) are checked in
:func:`_check_delta`: instruction injection first (an attack is named as one), then in
the order a person would fix them. The shape checks (permission changes, fact-shaped
lines) read the payload folded (:func:`lessonledger.ledger.text.folded`, space runs made
one) and look at every line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping
from typing import Any
from uuid import UUID

import msgspec
from lessonledger.commands.access import AccessCommand, GrantAccess, RevokeAccess, decide_access
from lessonledger.commands.errors import CredentialError
from lessonledger.commands.handlers import Decided, command_digest, command_id, decide
from lessonledger.commands.injection import refuse_injection
from lessonledger.commands.messages import AnyCommand
from lessonledger.commands.skill_errors import (
    UNRESOLVABLE,
    AnchorGoneError,
    CrossSkillSupersedeError,
    DeltaRefusedError,
    DeltaStateError,
    FactShapedError,
    UnknownAnchorError,
    UnknownDeltaError,
    UnknownSkillError,
)
from lessonledger.commands.skill_messages import (
    SKILL_COMMANDS,
    ApproveDeltas,
    ArchiveDeltas,
    DeclareConsumer,
    LearnFact,
    ProposeDelta,
    RecordResolution,
    RegisterSkill,
    RejectDeltas,
    SkillCommand,
)
from lessonledger.ledger.events import (
    AnyEvent,
    ConsumerDeclared,
    DeltaApproved,
    DeltaArchived,
    DeltaProposed,
    DeltaRejected,
    FactLearned,
    SkillBaseRegistered,
    SkillResolved,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.secrets import credential_in
from lessonledger.ledger.text import folded
from lessonledger.projections.anchors import WHOLE_BODY, anchors, body_digest, headings, slug
from lessonledger.projections.capabilities import local_capabilities, normalised_permission
from lessonledger.projections.deltas import BaseRow, DeltaRow, DeltaView
from lessonledger.projections.resolution import DEFAULT_BUDGET, fits, render_item, tokens
from lessonledger.projections.runner import Projection, Runner
from lessonledger.projections.views import delta_view, lesson_view

__all__ = [
    "GRAMMAR",
    "decide_any",
    "decide_skill",
]

#: The kinds each tier holds. Tier 0 is facts (never a delta); tier 2 is deferred.
GRAMMAR: dict[int, frozenset[str]] = {
    1: frozenset({"tool_hint"}),
    3: frozenset({"preference", "example", "caveat"}),
}
_WIDENING_KINDS = frozenset({"permission", "permissions", "security_tier", "tool",
                             "new_tool", "allowed_tools"})
#: Read folded (format characters dropped, NFKC) with space runs made one, on any line.
_WIDENING_TEXT = re.compile(
    r"(?i)\b(permissions?|security[\s_-]*tiers?|allowed[\s_-]*tools?)\s*(?:[:=]|[+-]=)"
    r"|\bgrant\w*\b[^.\n]{0,30}\bpermissions?\b"
    r"|\bpermissions?\b[^.\n]{0,20}\b(grant|add|widen|raise|elevat)\w*")
#: A ``name = value`` line (also ``:=``, ``->``, ``=>``): a fact, on any line.
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][\w.@+-]*)\s*(?:=|:=|->|=>)\s*(\S.*?)\s*$")
#: A ``name: value`` line whose value is one word: a fact when every line is one.
_COLON_PAIR = re.compile(r"^\s*([A-Za-z_][\w.@+-]*)\s*:\s*([^\s:]+)\s*$")


def decide_any(command: AnyCommand | SkillCommand | AccessCommand,
               views: Runner | Mapping[str, Projection]) -> list[Decided]:
    """Decide any command against the views it reads."""
    if isinstance(command, (GrantAccess, RevokeAccess)):
        return decide_access(command, views)
    if isinstance(command, ProposeDelta) and command.provenance == "outcome":
        _check_evidence(command, lesson_view(views).outcomes)
    if isinstance(command, (RegisterSkill, ProposeDelta, ApproveDeltas, RejectDeltas,
                            ArchiveDeltas, LearnFact, DeclareConsumer, RecordResolution)):
        return decide_skill(command, delta_view(views))
    return decide(command, lesson_view(views))


def decide_skill(command: SkillCommand, deltas: DeltaView) -> list[Decided]:
    """Check a skill command and return its events, the first carrying its digest."""
    handler: Callable[[Any, DeltaView], list[AnyEvent]] = _HANDLERS[type(command)]
    first, *rest = handler(command, deltas)
    stamped = msgspec.structs.replace(first, command_digest=command_digest(command))
    return [Decided(e) for e in (stamped, *rest)]


def _refuse_local(base: BaseRow) -> None:
    """Refuse any delta on a skill whose current registration is not connector-only."""
    local = local_capabilities(base.permissions)
    if local:
        _refuse("no-local-capability", f"skill {base.skill!r} has local-capability "
                f"permissions ({', '.join(map(repr, local))}); only a skill with no "
                "permission or connector-only ones (network:…, mcp:connect) takes deltas",
                "deltas are not allowed on such skills; edit the authored skill instead",
                "$.skill")


def _register(cmd: RegisterSkill, view: DeltaView) -> list[AnyEvent]:
    # The body is not stored, but its headings are, as slugs: screened as they were
    # written, since lower-casing hides the shape of many keys from the screen.
    for index, heading in enumerate(headings(cmd.body)):
        for text in (heading, slug(heading)):
            kind = credential_in(text)
            if kind is not None:
                raise CredentialError(kind, f"$.body (heading {index + 1})")
    return [SkillBaseRegistered(
        skill=cmd.skill, root=cmd.root, version=cmd.version,
        body_digest=body_digest(cmd.body), anchors=anchors(cmd.body)[:500],
        tools=list(dict.fromkeys(cmd.tools)), permissions=list(dict.fromkeys(cmd.permissions)))]


def _check_evidence(cmd: ProposeDelta, outcomes: Container[UUID]) -> None:
    """Provenance ``outcome`` must cite outcomes the ledger has."""
    unknown = [str(i) for i in cmd.evidence if i not in outcomes]
    if not cmd.evidence or unknown:
        what = ("cites no outcome" if not cmd.evidence
                else f"cites unknown outcomes ({', '.join(unknown)})")
        _refuse("outcome-needs-evidence", f"a delta of provenance 'outcome' {what}",
                "cite the outcome ids it was learned from as evidence, or use another "
                "provenance", "$.evidence")


def _base(view: DeltaView, skill: str, root: str) -> BaseRow:
    base = view.base(skill, root)
    if base is None:
        raise UnknownSkillError(skill, root)
    return base


def _refuse(rule: str, problem: str, remedy: str, field: str) -> None:
    raise DeltaRefusedError(rule, problem, remedy, field)


def _plain(text: str) -> str:
    """Text as the shape checks read it: folded, each run of spaces made one."""
    return re.sub(r"[^\S\n]+", " ", folded(text))


def _fact_line(payload: str) -> re.Match[str] | None:
    """The first line that makes the payload a fact, if any."""
    lines = [line for line in _plain(payload).splitlines() if line.strip()]
    for line in lines:
        if found := _ASSIGNMENT.match(line):
            return found
    pairs = [_COLON_PAIR.match(line) for line in lines]
    return pairs[0] if pairs and all(pairs) else None


def _check_fact_shape(cmd: ProposeDelta) -> None:
    assignment = _fact_line(cmd.payload) if cmd.tier != 1 else None
    if cmd.tier == 0 or normalised_permission(cmd.kind) == "fact" or assignment:
        key, value = assignment.groups() if assignment else ("", cmd.payload)
        raise FactShapedError(cmd.skill, key, value)


def _check_delta(cmd: ProposeDelta, base: BaseRow) -> None:
    refuse_injection(cmd.payload, "$.payload")  # first: an attack is named as one
    kind = normalised_permission(cmd.kind).replace("-", "_").replace(" ", "_")
    if kind in _WIDENING_KINDS or _WIDENING_TEXT.search(_plain(cmd.payload)):
        _refuse("no-permission-change", "a delta may not change permissions, allowed "
                "tools or the security tier", "deltas only narrow; change the authored "
                "skill itself and register the new version", "$.kind")
    _check_fact_shape(cmd)
    _refuse_local(base)
    if cmd.kind not in GRAMMAR.get(cmd.tier, frozenset()):
        kinds = "; ".join(f"tier {t}: {', '.join(sorted(k))}" for t, k in GRAMMAR.items())
        _refuse("delta-grammar", f"kind {cmd.kind!r} is not a tier-{cmd.tier} kind",
                f"use one of {kinds}", "$.kind")
    if cmd.tier >= 2 and not fits(cmd.kind, cmd.anchor, cmd.payload):
        size = tokens(render_item(cmd.kind, cmd.anchor, cmd.payload))
        _refuse("over-budget", f"the item is {size} tokens (4 bytes of UTF-8 a "
                "token), more than the learned "
                f"block's default budget of {DEFAULT_BUDGET} can ever hold",
                "state it shorter, or split it into smaller deltas", "$.payload")
    if cmd.tier == 1 and cmd.payload not in base.tools:
        have = ", ".join(base.tools) or "none declared"
        _refuse("no-new-tool", f"tool {cmd.payload!r} is not one the skill has ({have})",
                "a hint can only point at a tool the agent already has", "$.payload")
    if cmd.provenance == "untrusted" and cmd.auto_approve:
        _refuse("untrusted-never-auto", "untrusted provenance cannot be auto-approved",
                "propose it without auto_approve; a person approves it", "$.auto_approve")


def _propose(cmd: ProposeDelta, view: DeltaView) -> list[AnyEvent]:
    base = _base(view, cmd.skill, cmd.root)
    _check_delta(cmd, base)
    # Prose anchors to a section; the whole body only when the base has no heading.
    sections = base.anchors if cmd.tier == 3 else [*base.anchors, WHOLE_BODY]
    if cmd.anchor not in sections:
        raise UnknownAnchorError(cmd.anchor, list(dict.fromkeys(sections)))
    for delta_id in cmd.supersedes:
        old = view.deltas.get(delta_id)
        if old is None:
            raise UnknownDeltaError(delta_id)
        if (old.skill, old.root) != (cmd.skill, cmd.root):
            raise CrossSkillSupersedeError(delta_id, f"{old.skill!r} ({old.root})",
                                           f"{cmd.skill!r} ({cmd.root})")
        if old.scope != cmd.scope:
            # Approving it would supersede the other scope's delta: a decision about
            # one project would change what another project's resolution renders.
            _refuse("supersedes-own-scope", f"delta {delta_id} is of scope {old.scope}, "
                    f"not {cmd.scope}", "name only deltas of the proposal's own scope in "
                    "supersedes", "$.supersedes")
    _refuse_rejected(cmd, view)
    delta_id = derived_id(command_id(cmd.key, cmd.principal), "delta")
    return [DeltaProposed(
        delta_id=delta_id, skill=cmd.skill, root=cmd.root, anchor=cmd.anchor, tier=cmd.tier,
        kind=cmd.kind, payload=cmd.payload, provenance=cmd.provenance, scope=cmd.scope,
        base_digest=base.body_digest, evidence=cmd.evidence, supersedes=cmd.supersedes,
        auto_approve=cmd.auto_approve)]


def _refuse_rejected(cmd: ProposeDelta, view: DeltaView) -> None:
    """Refuse a proposal a person already rejected, unless it is a person's own again.

    Otherwise whoever sent it once (a web page, another agent) sends it again under a
    new key until someone approves it by mistake.
    """
    if cmd.provenance == "user_instruction":
        return
    said = (cmd.anchor, cmd.tier, cmd.kind, _plain(cmd.payload).strip())
    for row in view.on(cmd.skill, cmd.root):
        if row.status == "rejected" and (
                row.anchor, row.tier, row.kind, _plain(row.payload).strip()) == said:
            _refuse("rejected-stays-rejected", f"delta {row.delta_id} said the same and "
                    "was rejected", "a rejected delta is not proposed again; a person may "
                    "propose it as their own (provenance user_instruction)", "$.payload")


def _moves(delta_ids: list[Any], view: DeltaView, move: str,
           allowed: list[str]) -> list[Any]:
    rows = []
    for delta_id in dict.fromkeys(delta_ids):
        row = view.deltas.get(delta_id)
        if row is None:
            raise UnknownDeltaError(delta_id)
        if row.status not in allowed:
            raise DeltaStateError(delta_id, row.status, move, allowed)
        rows.append(row)
    return rows


def _approve(cmd: ApproveDeltas, view: DeltaView) -> list[AnyEvent]:
    rows = _moves(cmd.delta_ids, view, "approved", ["staged", "orphaned"])
    approved: list[AnyEvent] = []
    for row in rows:
        base = _base(view, row.skill, row.root)
        _refuse_local(base)
        sections = base.anchors if row.tier == 3 else [*base.anchors, WHOLE_BODY]
        if row.anchor not in sections:
            raise AnchorGoneError(row.delta_id, row.anchor, base.anchors)
        approved.append(DeltaApproved(delta_id=row.delta_id, by=cmd.actor,
                                      base_digest=base.body_digest))
    return approved


def _reject(cmd: RejectDeltas, view: DeltaView) -> list[AnyEvent]:
    rows = _moves(cmd.delta_ids, view, "rejected", ["staged", "orphaned"])
    return [DeltaRejected(delta_id=r.delta_id, by=cmd.actor, reason=cmd.reason) for r in rows]


def _archive(cmd: ArchiveDeltas, view: DeltaView) -> list[AnyEvent]:
    rows = _moves(cmd.delta_ids, view, "archived", ["active", "orphaned"])
    return [DeltaArchived(delta_id=r.delta_id, by=cmd.actor, reason=cmd.reason) for r in rows]


def _learn(cmd: LearnFact, view: DeltaView) -> list[AnyEvent]:
    for text, field in ((cmd.namespace, "$.namespace"), (cmd.fact_key, "$.fact_key"),
                        (cmd.value, "$.value")):
        refuse_injection(text, field)
    return [FactLearned(
        fact_id=derived_id(command_id(cmd.key, cmd.principal), "fact"), namespace=cmd.namespace,
        key=cmd.fact_key, value=cmd.value, scope=cmd.scope, provenance=cmd.provenance,
        evidence=cmd.evidence)]


def _consumer(cmd: DeclareConsumer, view: DeltaView) -> list[AnyEvent]:
    return [ConsumerDeclared(key=cmd.namespace, tool=cmd.tool)]


def _resolved(cmd: RecordResolution, view: DeltaView) -> list[AnyEvent]:
    base = _base(view, cmd.skill, cmd.root)
    # A later resolution in the session renders what this names whatever its status:
    # only what a resolution here could have rendered (or reported) may be named.
    for index, delta_id in enumerate(cmd.rendered):
        row = view.deltas.get(delta_id)
        if row is None or not _renderable(row, base, cmd.scope):
            _refuse(UNRESOLVABLE, f"delta {delta_id} is not one a "
                    f"resolution of {cmd.skill!r} ({cmd.root}) in scope {cmd.scope} renders "
                    "(an active delta of the skill in that scope or global, or a trial one)",
                    "record what the resolution returned", f"$.rendered[{index}]")
    for index, delta_id in enumerate(cmd.orphans_shown):
        row = view.deltas.get(delta_id)
        if row is None or (row.skill, row.root) != (cmd.skill, cmd.root) or (
                row.scope not in (cmd.scope, "global")):
            _refuse(UNRESOLVABLE, f"delta {delta_id} is not an "
                    f"orphan of {cmd.skill!r} ({cmd.root}) in scope {cmd.scope}",
                    "record what the resolution returned", f"$.orphans_shown[{index}]")
    return [SkillResolved(skill=cmd.skill, root=cmd.root, scope=cmd.scope,
                          rendered=cmd.rendered, orphans_shown=cmd.orphans_shown,
                          text_digest=cmd.text_digest)]


def _renderable(row: DeltaRow, base: BaseRow, scope: str) -> bool:
    """Whether a resolution of ``base`` in ``scope`` may render ``row`` (or try it)."""
    if (row.skill, row.root) != (base.skill, base.root) or row.scope not in (scope, "global"):
        return False
    return row.status == "active" or (
        row.status == "staged" and row.auto_approve and row.provenance != "untrusted")


_HANDLERS: dict[type, Callable[[Any, DeltaView], list[AnyEvent]]] = {
    RegisterSkill: _register, ProposeDelta: _propose, ApproveDeltas: _approve,
    RejectDeltas: _reject, ArchiveDeltas: _archive, LearnFact: _learn,
    DeclareConsumer: _consumer, RecordResolution: _resolved,
}
assert set(_HANDLERS) == set(SKILL_COMMANDS)
