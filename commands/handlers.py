"""Command handlers: check a command against the lesson view and decide its events.

A handler never writes; it returns :class:`Decided` events with the stream and version
each goes to. The caller appends them all in one transaction, under ids derived from
the command's idempotency key, so a retried command writes nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import msgspec
from lessonledger.commands.errors import (
    EvidenceError,
    InactiveLessonError,
    InvalidCommandError,
    RetiredEvidenceError,
    StaleVersionError,
    UnknownLessonError,
)
from lessonledger.commands.messages import (
    AnyCommand,
    DeclareEnvironmentChange,
    EditLesson,
    ObserveOutcome,
    ProposeLesson,
    Reconcile,
    RetireLesson,
)
from lessonledger.commands.policies import verdict
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.events import (
    AnyEvent,
    EnvironmentChanged,
    LessonProposed,
    LessonSuperseded,
    OutcomeObserved,
    ReconcilePassed,
    RulesAdopted,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.rules import DAY_NS, RULES_VERSION, Rules, clamp, figures_of

if TYPE_CHECKING:
    from lessonledger.commands.access import AccessCommand

__all__ = [
    "Decided",
    "adopt",
    "command_digest",
    "command_id",
    "could_be",
    "decide",
    "key_owner",
    "occurred_ns",
    "same_command",
]

_NAMESPACE = UUID("0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90")


class Decided(msgspec.Struct, frozen=True):
    """An event a command decided, with the stream it goes to (None: a stream of its own)."""

    event: AnyEvent
    stream: UUID | None = None
    version: int = 0


def command_id(key: str, principal: str = "") -> UUID:
    """The id every event of ``principal``'s command with this idempotency key derives from.

    A hash of the key, so a retry derives the same ids; unlike ids minted fresh it
    cannot be time-ordered, since a retry may come at any time. The key is the
    principal's own: on a hub, keys are chosen by many callers and are often guessable
    (``task-42``), and a key shared by every principal would let one refuse another's
    commands in advance by sending first. The empty principal (a local home) keeps the
    unscoped hash, so ids written before keys were scoped still derive the same.
    """
    scope = b"" if not principal else len(principal.encode()).to_bytes(2, "big") + (
        principal.encode())
    return UUID(bytes=sha256(_NAMESPACE.bytes + scope + key.encode()).digest()[:16], version=4)


def key_owner(command: msgspec.Struct) -> str:
    """The principal whose key ``command``'s is: its own, or "" for an operator's grant."""
    return str(getattr(command, "principal", "")) if getattr(
        command, "keyed_by_principal", True) else ""


def decide(command: AnyCommand, view: LessonView) -> list[Decided]:
    """Check ``command`` against ``view`` and return its events; raise if refused.

    The first event carries the command's digest, by which a retry is recognised.
    """
    handler: Callable[[Any, LessonView], list[Decided]] = _HANDLERS[type(command)]
    first, *rest = handler(command, view)
    stamped = msgspec.structs.replace(first.event, command_digest=command_digest(command))
    return [msgspec.structs.replace(first, event=stamped), *rest]


def adopt(view: LessonView) -> RulesAdopted | None:
    """The ``RulesAdopted`` to write before the next command, if the rules wanted differ.

    Issue 12, rule 9: written in the command's transaction, ahead of the command, under
    an id of its own (never the command's key, so a retry is still known as one), and
    folded before the command is decided: the command, its policies and every later fold
    then use the rules it records.
    """
    wanted = view.to_adopt()
    if wanted is None:
        return None
    return RulesAdopted(version=RULES_VERSION, figures=figures_of(wanted))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_canonical = msgspec.msgpack.Encoder(order="deterministic")


def _instant(value: object) -> object:
    """A time as microseconds since the epoch: the same instant in any zone is equal."""
    if not isinstance(value, datetime):
        return value
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def command_digest(command: msgspec.Struct) -> bytes:
    """SHA-256 of the whole command in a canonical form: what a retry must match.

    Every field counts, the envelope's too (actor, principal, session, ``occurred_at``);
    a field left out equals its default given explicitly, and a time equals the same
    instant in another zone. An omitted ``occurred_at`` (the ledger's clock) is part of
    the command as omitted, so a retry that omits it again is a retry.
    """
    fields = {name: _instant(value)
              for name, value in msgspec.structs.asdict(command).items()}
    tag = str(command.__struct_config__.tag)
    return sha256(_canonical.encode((tag, fields))).digest()


def _observe(cmd: ObserveOutcome, view: LessonView) -> list[Decided]:
    outcome_id = derived_id(command_id(cmd.key, cmd.principal), "outcome")
    return [Decided(OutcomeObserved(
        outcome_id=outcome_id, project=cmd.project, task=cmd.task, passed=cmd.passed,
        signal=cmd.signal, operations=cmd.operations, in_play=cmd.in_play,
        fingerprint=cmd.fingerprint), stream=outcome_id)]


def _check_evidence(cmd: ProposeLesson, view: LessonView) -> None:
    # Evidence must show what the lesson claims, judged as attribution judges it.
    probe = LessonRow(
        lesson_id=UUID(int=0), text="", kind=cmd.kind, avoid_op=cmd.avoid_op,
        prefer_op=cmd.prefer_op, target=cmd.target, scope=cmd.project, origin=cmd.project,
        source=cmd.source, derivation="direct", longevity=cmd.longevity, fingerprint={},
        evidence=[], confidence=0.0, status="trial", created_at=0, last_evidence_at=0)
    for outcome_id in cmd.evidence:
        outcome = view.outcomes.get(outcome_id)
        if outcome is None:
            raise EvidenceError(outcome_id, "is not an observed outcome")
        if outcome.project != cmd.project:
            raise EvidenceError(outcome_id, f"was observed in project {outcome.project}")
        if verdict(probe, outcome.operations) is not True:
            raise EvidenceError(outcome_id, "does not show what the lesson claims")
    retired = next((r for r in view.retired() if cmd.evidence
                    and set(cmd.evidence) <= set(r.evidence)), None)
    if retired is not None:
        raise RetiredEvidenceError(retired.lesson_id)


def _propose(cmd: ProposeLesson, view: LessonView) -> list[Decided]:
    _check_evidence(cmd, view)
    rules = view.rules
    claim = cmd.source == "model" or not cmd.evidence
    lesson_id = derived_id(command_id(cmd.key, cmd.principal), "lesson")
    return [Decided(LessonProposed(
        lesson_id=lesson_id, text=cmd.text, kind=cmd.kind, avoid_op=cmd.avoid_op,
        prefer_op=cmd.prefer_op, target=cmd.target, scope=cmd.project, source=cmd.source,
        derivation="hypothesis" if claim else "direct",
        longevity="explicit" if cmd.source == "user" else cmd.longevity,
        # The model's own lesson is a claim whatever it cites: what it cites must exist
        # and show the lesson (checked above), but only an attributed confirmation gives
        # a claim evidence.
        fingerprint=cmd.fingerprint, evidence=[] if claim else cmd.evidence, vector=cmd.vector,
        confidence=rules.start_claim if claim else rules.start_extractor,
    ), stream=lesson_id)]


def _current(view: LessonView, lesson_id: UUID, expected: int | None) -> LessonRow:
    row = view.lessons.get(lesson_id)
    if row is None:
        raise UnknownLessonError(lesson_id)
    if expected is not None and expected != row.version:
        raise StaleVersionError(lesson_id, expected, row.version)
    if not (row.active or row.status == "claimed"):
        # Changing history would fork the supersede chain.
        raise InactiveLessonError(lesson_id, row.status, row.superseded_by)
    return row


def _edit(cmd: EditLesson, view: LessonView) -> list[Decided]:
    old = _current(view, cmd.lesson_id, cmd.expected_version)
    new_id = derived_id(command_id(cmd.key, cmd.principal), "lesson")
    fields = {f: getattr(old, f) for f in ("kind", "avoid_op", "prefer_op", "target",
                                           "source", "derivation", "longevity",
                                           "fingerprint", "evidence", "confidence")}
    return [
        Decided(LessonProposed(lesson_id=new_id, text=cmd.text, scope=old.scope,
                               supersedes=old.lesson_id, **fields), stream=new_id),
        Decided(LessonSuperseded(lesson_id=old.lesson_id, reason="replaced", by=new_id),
                stream=old.lesson_id, version=old.version + 1),
    ]


def _retire(cmd: RetireLesson, view: LessonView) -> list[Decided]:
    old = _current(view, cmd.lesson_id, cmd.expected_version)
    return [Decided(LessonSuperseded(lesson_id=old.lesson_id, reason="retired:user",
                                     note=cmd.reason),
                    stream=old.lesson_id, version=old.version + 1)]


def _environment(cmd: DeclareEnvironmentChange, view: LessonView) -> list[Decided]:
    # Briefs: a lesson's fingerprint is in its row, and reading every lesson's history
    # (most of a big home's view) to find it would keep all of it in memory.
    old = next((r.fingerprint[cmd.component] for r in view.briefs()
                if r.scope == cmd.scope and cmd.component in r.fingerprint), "")
    return [Decided(EnvironmentChanged(scope=cmd.scope, component=cmd.component, old=old,
                                       new=cmd.new))]


def _reconcile(cmd: Reconcile, view: LessonView) -> list[Decided]:
    now = occurred_ns(cmd.now)
    rules = view.rules
    exempt = list(rules.no_decay)
    decided = [Decided(ReconcilePassed(now=now, decay=rules.decay, exempt=exempt))]
    survivors: dict[str, list[tuple[float, LessonRow]]] = {}
    # Briefs: the pass reads figures alone, and a day's pass over every lesson's history
    # read it all in (the fold reads the history of the lessons it moves).
    for row in view.briefs():
        if not row.active:
            continue
        fades = row.in_play_epoch < view.epoch and row.longevity not in exempt
        after = clamp(row.confidence - (rules.decay if fades else 0.0))
        reason = _leaves(row, after, now, rules)
        if reason:
            decided.append(Decided(LessonSuperseded(lesson_id=row.lesson_id, reason=reason)))
        else:
            survivors.setdefault(row.scope, []).append((after, row))
    for rows in survivors.values():
        rows.sort(key=lambda pair: (-pair[0], -pair[1].last_evidence_at, str(pair[1].lesson_id)))
        decided += [Decided(LessonSuperseded(lesson_id=row.lesson_id, reason="cap"))
                    for _, row in rows[rules.cap:]]
    return decided


def _leaves(row: LessonRow, confidence: float, now: int,
            rules: Rules) -> Literal["decayed", "expired", ""]:
    """Why a lesson leaves the active set at this pass, or '' when it stays."""
    if confidence < rules.floor:
        return "decayed"
    days = rules.expiry_days.get(row.longevity)
    if days is not None and now - row.last_evidence_at > days * DAY_NS:
        return "expired"
    return ""


def same_command(command: AnyCommand | SkillCommand | AccessCommand, first: AnyEvent,
                 envelope: Envelope) -> bool:
    """Whether ``first``, the first event written under ``command``'s key, is its own.

    True for a retry; False when the key was used before for another command (of
    another kind, or the same kind saying anything else: every field must match, see
    :func:`command_digest`). An event an older ledger wrote has no digest: its body's
    fields and its envelope's actor, principal and session are compared instead, all
    that it kept of the command.
    """
    digest = getattr(first, "command_digest", b"")
    if digest:
        return bool(digest == command_digest(command))
    if (envelope.actor, envelope.principal, envelope.session) != (
            command.actor, command.principal, command.session):
        return False
    match command, first:
        case ObserveOutcome(), OutcomeObserved():
            return (first.project, first.passed, first.task, first.operations) == (
                command.project, command.passed, command.task, command.operations)
        case ProposeLesson(), LessonProposed():
            return (first.text, first.kind, first.target, first.scope) == (
                command.text, command.kind, command.target, command.project)
        case EditLesson(), LessonProposed():
            return (first.text, first.supersedes) == (command.text, command.lesson_id)
        case RetireLesson(), LessonSuperseded():
            return first.lesson_id == command.lesson_id
        case DeclareEnvironmentChange(), EnvironmentChanged():
            return (first.scope, first.component, first.new) == (
                command.scope, command.component, command.new)
        case Reconcile(), ReconcilePassed():
            return first.now == occurred_ns(command.now)
    return False


def could_be(command: AnyCommand | SkillCommand | AccessCommand, envelope: Envelope) -> bool:
    """Whether an erased first event, of which only ``envelope`` is left, is ``command``'s.

    What the envelope kept must match: the event type the command writes first, its
    actor, principal and session, its project (or scope) where it names one, and its
    ``occurred_at`` when it gives one. A command that differs only in what the body held
    cannot be told from a retry, and is taken as one: writing it would bring back what
    was erased.
    """
    scope = str(getattr(command, "project", "") or getattr(command, "scope", ""))
    return (envelope.type == _FIRST.get(type(command), envelope.type)
            and (envelope.actor, envelope.principal, envelope.session)
            == (command.actor, command.principal, command.session)
            and (not scope or envelope.scope == scope)
            and (command.occurred_at is None
                 or envelope.occurred_at == occurred_ns(command.occurred_at)))


_HANDLERS: dict[type, Callable[[Any, LessonView], list[Decided]]] = {
    ObserveOutcome: _observe, ProposeLesson: _propose, EditLesson: _edit,
    RetireLesson: _retire, DeclareEnvironmentChange: _environment, Reconcile: _reconcile,
}


#: The type of the first event each command writes (what its key's event id points at).
_FIRST: dict[type, str] = {
    ObserveOutcome: str(OutcomeObserved.__struct_config__.tag),
    ProposeLesson: str(LessonProposed.__struct_config__.tag),
    EditLesson: str(LessonProposed.__struct_config__.tag),
    RetireLesson: str(LessonSuperseded.__struct_config__.tag),
    DeclareEnvironmentChange: str(EnvironmentChanged.__struct_config__.tag),
    Reconcile: str(ReconcilePassed.__struct_config__.tag),
}


def occurred_ns(when: datetime | None) -> int:
    """A command's ``occurred_at`` as nanoseconds, 0 (the ledger's clock) when absent."""
    if when is None:
        return 0
    aware = when if when.tzinfo else when.replace(tzinfo=UTC)
    nanoseconds = int(aware.timestamp() * 1_000_000) * 1000
    if not 0 <= nanoseconds < 1 << 63:
        msg = f"time {when.isoformat()} is outside 1970-2261, the years the ledger's clock holds"
        raise InvalidCommandError(msg, "$.occurred_at")
    return nanoseconds
