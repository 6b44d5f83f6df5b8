"""The skill, delta and fact API: ``ledger.skills``.

    with open_ledger(home) as ledger:
        body = Path("skills/triage/SKILL.md").read_text()
        ledger.skills.register("triage", body, tools=["search", "summarize"])
        receipt = ledger.skills.propose("triage", tier=3, kind="preference",
                                        anchor="drafting-replies", provenance="user_instruction",
                                        payload="Keep declines to two sentences.")
        ledger.skills.approve([receipt.ids["delta_id"]])
        skill = ledger.skills.resolve("triage", body, session="s-7")
        prompt, tools = skill.text, skill.tools

The base text stays the caller's: registration stores its digest and section anchors,
and :meth:`Skills.resolve` takes the text again and refuses it (``BaseMismatchError``)
when its digest is not the registered version's, so no user file is copied into the log.

Resolution happens once per session: the first call with learning on for a (session,
skill, scope) against the skill as registered resolves and records what it rendered
(``SkillResolved``, written even when nothing rendered: those deltas are in play for the
session's outcomes, and orphans it reports are reported once). That first record is the
source of truth for the session in every process: a later call in the same session, here
or in another process, re-renders exactly the deltas it names (whatever their status
now, without the budget; deltas erased since are left out, and nothing renders on a
skill that has since gained a local capability) and records nothing more. So a delta
approved or archived mid-session applies from the next session on. Answers are cached
per session in this process; any erasure drops the cache.

The commands are :class:`SkillVerbs`, written once over ``execute``: a hub's client
(:class:`~lessonledger.sync.client.RemoteSkills`) has the same verbs. :class:`Skills`
over a read side alone (a :class:`~lessonledger.commands.read_side.Reader`, as a hub's
reader thread answers skill queries) answers every query; it writes nothing, so a
resolution asked with ``record=False`` is computed but not recorded (the caller records
it with :func:`resolution_record`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from hashlib import sha256
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID, uuid4

import msgspec
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.commands.messages import checked_project, command_from
from lessonledger.commands.receipts import Receipt
from lessonledger.commands.skill_errors import (
    UNRESOLVABLE,
    BaseMismatchError,
    DeltaRefusedError,
    UnknownDeltaError,
    UnknownSkillError,
)
from lessonledger.commands.skill_messages import (
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
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.projections.anchors import body_digest
from lessonledger.projections.deltas import BaseRow, DeltaRow, DeltaView
from lessonledger.projections.facts import FactRow, FactView
from lessonledger.projections.resolution import DEFAULT_BUDGET, EffectiveSkill, resolve
from lessonledger.projections.views import delta_view, fact_view

if TYPE_CHECKING:
    from lessonledger.commands.read_side import ReadSide

__all__ = ["ListedFact", "SkillVerbs", "Skills", "delta_from_prefix", "resolution_record"]

T = TypeVar("T")
_Cached = tuple[str, str, str, str, bool, int, tuple[str, ...] | None, str, tuple[UUID, ...]]
_copy = msgspec.msgpack.Decoder(list[DeltaRow])
_facts = msgspec.msgpack.Decoder(list[FactRow])
_encode = msgspec.msgpack.Encoder()


class ListedFact(msgspec.Struct, frozen=True):
    """A learned fact and the tools declared to read its namespace (none: inert)."""

    fact: FactRow
    consumers: list[str]


_listed = msgspec.msgpack.Decoder(list[ListedFact])


class SkillVerbs:
    """The skill commands as keyword methods over :meth:`execute`, which a subclass defines."""

    def execute(self, command: SkillCommand) -> Receipt:
        """Run one command; see the subclass."""
        raise NotImplementedError

    def _run(self, kind: type[SkillCommand], fields: dict[str, Any]) -> Receipt:
        fields.setdefault("key", f"{kind.__struct_config__.tag}:{uuid4()}")
        return self.execute(command_from(fields, kind))

    def register(self, skill: str, body: str, **fields: Any) -> Receipt:
        """Register a skill base (or a new version; a changed body orphans its deltas)."""
        return self._run(RegisterSkill, {"skill": skill, "body": body, **fields})

    def propose(self, skill: str, **fields: Any) -> Receipt:
        """Propose a delta (staged); ``receipt.ids["delta_id"]`` names it."""
        fields = {"skill": skill, **fields}
        fields.setdefault("key", f"propose_delta:{uuid4()}")
        return self._run(ProposeDelta, fields)

    def approve(self, delta_ids: Iterable[UUID], **fields: Any) -> Receipt:
        """Approve staged deltas, or re-approve orphans, all or none."""
        return self._run(ApproveDeltas, {"delta_ids": list(delta_ids), **fields})

    def reject(self, delta_ids: Iterable[UUID], **fields: Any) -> Receipt:
        """Reject staged or orphaned deltas."""
        return self._run(RejectDeltas, {"delta_ids": list(delta_ids), **fields})

    def archive(self, delta_ids: Iterable[UUID], **fields: Any) -> Receipt:
        """Revert active (or orphaned) deltas: archived, never deleted."""
        return self._run(ArchiveDeltas, {"delta_ids": list(delta_ids), **fields})

    def learn_fact(self, namespace: str, fact_key: str, value: str, **fields: Any) -> Receipt:
        """Record a tier-0 fact: ``fact_key`` = ``value`` in ``namespace``.

        ``fields`` may carry the command's idempotency ``key`` (a retry with it writes
        nothing and returns the original receipt), ``scope`` and ``provenance``.
        """
        return self._run(LearnFact, {"namespace": namespace, "fact_key": fact_key,
                                     "value": value, **fields})

    def declare_consumer(self, tool: str, namespace: str, **fields: Any) -> Receipt:
        """Declare that ``tool`` reads facts of ``namespace``."""
        return self._run(DeclareConsumer, {"tool": tool, "namespace": namespace, **fields})


def resolution_record(result: EffectiveSkill, session: str, actor: str,
                      principal: str) -> RecordResolution:
    """The command that records a session's first resolution (its key says what it saw)."""
    said = (result.skill, result.root, result.scope, result.text_digest, actor, principal,
            [str(i) for i in [*result.rendered, *result.orphans]])
    key = f"resolve:{session}:{sha256(_encode.encode(said)).hexdigest()[:32]}"
    return RecordResolution(
        key=key, skill=result.skill, root=result.root, scope=result.scope,
        rendered=result.rendered, orphans_shown=result.orphans,
        text_digest=result.text_digest, session=session, actor=actor, principal=principal)


def delta_from_prefix(ids: Iterable[UUID], text: str) -> UUID:
    """The one id of ``ids`` that is ``text`` or starts with it.

    Raises:
        InvalidCommandError: none does, or more than one.
    """
    if not text.strip():  # every id starts with it: a lone delta would be the answer
        msg = f"{text!r} is no delta id: give the id or a prefix of it (`lessonledger deltas list`)"
        raise InvalidCommandError(msg, "$.delta")
    matches = [i for i in ids if str(i).startswith(text.lower())]
    if len(matches) == 1:
        return matches[0]
    what = "no delta id starts" if not matches else f"{len(matches)} delta ids start"
    msg = f"{what} with {text!r}; see `lessonledger deltas list`"
    raise InvalidCommandError(msg, "$.delta")


class Skills(SkillVerbs):
    """Skill bases, their deltas and tier-0 facts, on one ledger.

    Args:
        ledger: the read side the queries fold and read.
        execute: runs a command (the ledger's own); None on a read side alone, whose
            commands are refused.
    """

    def __init__(self, ledger: ReadSide,
                 execute: Callable[[SkillCommand], Receipt] | None = None) -> None:
        self._ledger = ledger
        self._execute = execute
        self._cache: dict[_Cached, EffectiveSkill] = {}
        self._erasures: tuple[int, int] = (0, 0)

    def execute(self, command: SkillCommand) -> Receipt:
        """Run one command on the ledger.

        Raises:
            LedgerConfigError: these skills are over a read side alone.
        """
        if self._execute is None:
            msg = (f"{self._ledger.home} is open for queries only here: a skill command "
                   "needs the home's ledger (or its hub)")
            raise LedgerConfigError(msg)
        return self._execute(command)

    # -- queries -----------------------------------------------------------------------

    @property
    def view(self) -> DeltaView:
        """The delta view, folded to the head as a query folds (live: it moves on).

        A read-side fold: what others appended is folded in, nothing is reacted to and
        nothing written (commands react in their own transactions).
        """
        self._ledger.fold_to_head()
        return delta_view(self._ledger.runner)

    @property
    def facts(self) -> FactView:
        """The fact table, folded as :attr:`view` is (live, as it is)."""
        self._ledger.fold_to_head()
        return fact_view(self._ledger.runner)

    @property
    def _lock(self) -> AbstractContextManager[Any]:
        """The ledger's lock: a query reads the views while no other thread folds."""
        lock: AbstractContextManager[Any] = self._ledger._lock
        return lock

    def deltas(self, skill: str | None = None, root: str | None = None,
               status: str | None = None) -> list[DeltaRow]:
        """Deltas (of a skill, in a status) in rendering order, as copies."""
        with self._lock:
            rows = sorted((r for r in self.view.deltas.values()
                           if (skill is None or r.skill == skill)
                           and (root is None or r.root == root)
                           and (status is None or r.status == status)),
                          key=lambda r: (r.skill, r.root, r.order))
            return _copy.decode(_encode.encode(rows))

    def base(self, skill: str, root: str = "user") -> BaseRow | None:
        """A registered skill base (a copy), or None."""
        with self._lock:
            row = self.view.base(skill, root)
            return None if row is None else msgspec.structs.replace(row)

    def find_delta(self, text: str) -> UUID:
        """A delta id from its full form or a unique prefix of it.

        Raises:
            InvalidCommandError: no delta, or more than one, has such an id.
        """
        with self._lock:
            ids = list(self.view.deltas)
        return delta_from_prefix(ids, text)

    def learned(self, namespace: str, default: T, scope: str = "global") -> dict[str, str] | T:
        """The values of a fact namespace (global ones, overridden by the scope's)."""
        with self._lock:
            return self.facts.learned(namespace, scope) or default

    def inert(self) -> list[FactRow]:
        """Facts no declared consumer reads."""
        with self._lock:
            return _facts.decode(_encode.encode(self.facts.inert()))

    def fact_list(self, namespace: str | None = None, *, inert: bool = False
                  ) -> list[ListedFact]:
        """The learned facts (of a namespace; only inert ones), each with its readers."""
        with self._lock:
            facts = self.facts
            rows = facts.inert() if inert else facts.facts(namespace)
            listed = [ListedFact(row, list(facts.consumers(row.namespace))) for row in rows]
            return _listed.decode(_encode.encode(listed))

    def first_recorded(self, session: str, skill: str, root: str = "user",
                       scope: str = "global") -> bool:
        """Whether the session's first resolution of the skill (at the scope) is recorded."""
        with self._lock:
            return self.view.first_resolution(session, skill, root, scope) is not None

    def resolve(self, skill: str, base_text: str, *, root: str = "user",
                scope: str = "global", learning: bool = True, session: str = "",
                budget: int = DEFAULT_BUDGET, available: Iterable[str] | None = None,
                actor: str = "agent", principal: str = "",
                trial: Iterable[UUID] = (), record: bool = True) -> EffectiveSkill:
        """The effective skill for a session, resolved once and cached for it.

        ``trial`` names staged deltas to try in this resolution (trusted ones proposed
        with ``auto_approve``; others are ignored): rendered, they earn a track record.
        With ``record`` off, a first resolution is neither recorded nor cached (a hub's
        read side answers so; its client records it).

        Raises:
            UnknownSkillError: no such skill is registered.
            BaseMismatchError: ``base_text`` is not the registered version.
            InvalidCommandError: ``budget`` is negative, or ``scope`` is neither a project
                digest nor ``global``.
        """
        if budget < 0:
            msg = f"budget must be 0 or more tokens, not {budget}"
            raise InvalidCommandError(msg, "$.budget")
        scope = checked_project(scope)  # no delta is ever scoped to a typo: it would match none
        tools = None if available is None else tuple(sorted(available))
        digest = body_digest(base_text)
        tried = tuple(dict.fromkeys(trial))
        cached: _Cached = (session, skill, root, scope, learning, budget, tools, digest, tried)
        with self._lock:
            view = self.view  # caught up: an erasure or a record by another process shows
            erasures = (id(self._ledger.runner), self._ledger.runner.erasures)
            if erasures != self._erasures:
                self._cache.clear()  # nothing erased is served from the cache
                self._erasures = erasures
            if session and cached in self._cache:
                return self._cache[cached]
            base = view.base(skill, root)
            if base is None:
                raise UnknownSkillError(skill, root)
            if digest != base.body_digest:
                raise BaseMismatchError(skill, base.body_digest, digest)
            first = view.first_resolution(session, skill, root, scope) if learning else None
            result = resolve(view, base, base_text, scope, learning=learning, budget=budget,
                             available=tools, replay=first, trial=tried)
        if not record:
            return result
        if session and learning and first is None:
            if not self._recorded(result, session, actor, principal):
                # A delta it rendered was decided in between (by another process): the
                # record is refused, so resolve from the view as it stands now.
                with self._lock:
                    view = self.view
                    if view.first_resolution(session, skill, root, scope) is None:
                        result = resolve(view, base, base_text, scope, learning=learning,
                                         budget=budget, available=tools, trial=tried)
                        self._record(result, session, actor, principal)
            with self._lock:  # another process may have recorded the session's first
                view = self.view
                first = view.first_resolution(session, skill, root, scope)
                if first is not None and first != result.rendered:
                    result = resolve(view, base, base_text, scope, budget=budget,
                                     available=tools, replay=first)
        if session:
            with self._lock:
                self._cache[cached] = result
        return result

    def _record(self, result: EffectiveSkill, session: str, actor: str,
                principal: str) -> None:
        self.execute(resolution_record(result, session, actor, principal))

    def _recorded(self, result: EffectiveSkill, session: str, actor: str,
                  principal: str) -> bool:
        """Record ``result``; False when a delta it names was decided since it resolved."""
        try:
            self._record(result, session, actor, principal)
        except DeltaRefusedError as e:
            if e.rule != UNRESOLVABLE:
                raise
            return False
        return True

    def diff(self, skill: str, base_text: str, delta_id: UUID, *, root: str = "user",
             scope: str = "global") -> tuple[EffectiveSkill, EffectiveSkill]:
        """The effective skill without and with one delta made active (nothing written)."""
        without = self.resolve(skill, base_text, root=root, scope=scope)
        with self._lock:
            trial = DeltaView.load(self.view.dump())
        row = trial.deltas.get(delta_id)
        base = trial.base(skill, root)
        if row is None or base is None or (row.skill, row.root) != (skill, root):
            raise UnknownDeltaError(delta_id)
        row.status = "active"
        return without, resolve(trial, base, base_text, scope)
