"""Command handlers: check a command against the lesson view and decide its events.

A handler never writes; it returns :class:`Decided` events with the stream and version
each goes to. The caller appends them all in one transaction, under ids derived from
the command's idempotency key, so a retried command writes nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from typing import Any, Literal
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
from lessonledger.commands.refusals import refuse_credentials
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.events import (
    AnyEvent,
    EnvironmentChanged,
    LessonProposed,
    LessonSuperseded,
    OutcomeObserved,
    ReconcilePassed,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.rules import DAY_NS, Rules, clamp

__all__ = ["Decided", "command_digest", "command_id", "decide", "occurred_ns", "same_command"]

_NAMESPACE = UUID("0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90")


class Decided(msgspec.Struct, frozen=True):
    """An event a command decided, with the stream it goes to (None: a stream of its own)."""

    event: AnyEvent
    stream: UUID | None = None
    version: int = 0


def command_id(key: str) -> UUID:
    """The id every event of the command with this idempotency key derives from.

    A hash of the key, so a retry derives the same ids; unlike ids minted fresh it
    cannot be time-ordered, since a retry may come at any time.
    """
    return UUID(bytes=sha256(_NAMESPACE.bytes + key.encode()).digest()[:16], version=4)


def decide(command: AnyCommand, view: LessonView) -> list[Decided]:
    """Check ``command`` against ``view`` and return its events; raise if refused.

    The first event carries the command's digest, by which a retry is recognised.
    """
    handler: Callable[[Any, LessonView], list[Decided]] = _HANDLERS[type(command)]
    first, *rest = handler(command, view)
    stamped = msgspec.structs.replace(first.event, command_digest=command_digest(command))
    return [msgspec.structs.replace(first, event=stamped), *rest]


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


def _refuse(fields: Iterable[tuple[str, str]]) -> None:
    """Refuse a command if any of its (path, text) fields looks like a credential."""
    for path, text in fields:
        refuse_credentials(text, path)


def _fingerprint(values: dict[str, str]) -> Iterable[tuple[str, str]]:
    for name, value in values.items():
        yield "$.fingerprint (a name)", name
        yield f"$.fingerprint.{name}", value


def _observe(cmd: ObserveOutcome, view: LessonView) -> list[Decided]:
    _refuse([("$.task", cmd.task), *_fingerprint(cmd.fingerprint)])
    for i, op in enumerate(cmd.operations):
        _refuse((f"$.operations[{i}].{name}", getattr(op, name))
                for name in ("op", "target", "error"))
    outcome_id = derived_id(command_id(cmd.key), "outcome")
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
    _refuse([("$.text", cmd.text), ("$.avoid_op", cmd.avoid_op),
             ("$.prefer_op", cmd.prefer_op), ("$.target", cmd.target),
             *_fingerprint(cmd.fingerprint)])
    _check_evidence(cmd, view)
    rules = view.rules
    claim = cmd.source == "model" or not cmd.evidence
    lesson_id = derived_id(command_id(cmd.key), "lesson")
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
    refuse_credentials(cmd.text, "$.text")
    old = _current(view, cmd.lesson_id, cmd.expected_version)
    new_id = derived_id(command_id(cmd.key), "lesson")
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
    refuse_credentials(cmd.reason, "$.reason")
    old = _current(view, cmd.lesson_id, cmd.expected_version)
    return [Decided(LessonSuperseded(lesson_id=old.lesson_id, reason="retired:user",
                                     note=cmd.reason),
                    stream=old.lesson_id, version=old.version + 1)]


def _environment(cmd: DeclareEnvironmentChange, view: LessonView) -> list[Decided]:
    _refuse([("$.component", cmd.component), ("$.new", cmd.new)])
    old = next((r.fingerprint[cmd.component] for r in view.lessons.values()
                if r.scope == cmd.scope and cmd.component in r.fingerprint), "")
    return [Decided(EnvironmentChanged(scope=cmd.scope, component=cmd.component, old=old,
                                       new=cmd.new))]


def _reconcile(cmd: Reconcile, view: LessonView) -> list[Decided]:
    now = occurred_ns(cmd.now)
    rules = view.rules
    decided = [Decided(ReconcilePassed(now=now, decay=rules.decay))]
    survivors: dict[str, list[tuple[float, LessonRow]]] = {}
    for row in view.lessons.values():
        if not row.active:
            continue
        after = clamp(row.confidence - (rules.decay if row.in_play_epoch < view.epoch else 0.0))
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


def same_command(command: AnyCommand | SkillCommand, first: AnyEvent,
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


_HANDLERS: dict[type, Callable[[Any, LessonView], list[Decided]]] = {
    ObserveOutcome: _observe, ProposeLesson: _propose, EditLesson: _edit,
    RetireLesson: _retire, DeclareEnvironmentChange: _environment, Reconcile: _reconcile,
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
