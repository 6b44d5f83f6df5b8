"""Erasure: which stored bodies an :class:`Erase` deletes, decided from the log itself.

- ``principal`` / ``session``: every event whose envelope names that principal or
  session (earlier erasures excepted). The policies stamp what they decide with the
  trigger's principal and session, so lessons learned from someone's outcomes go with
  them.
- ``lesson``: every event about that lesson (its proposal and each confirmation,
  contradiction, promotion, demotion or supersede naming it).
- ``outcome``: the outcome, everything the policies decided from it (and from what they
  decided: a lesson's promotion or absorption), and every event about the lessons they
  proposed from it.

Whatever the kind, every confirmation, contradiction or demotion that cites an erased
outcome goes too: the evidence is gone, so what it counted for goes with it. So do the
deltas and facts derived from what is erased, and every event about an erased delta
(:mod:`lessonledger.commands.skill_erasure`).

Envelopes hold no content (DESIGN §3), so they stay, and the chain with them. What the
views derived from the erased bodies goes when they are rebuilt from the log without
them (:meth:`Ledger.erase` does that, and so does every process that folds the
``Erased`` event). The bytes leave the file only at the next compaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import NamedTuple
from uuid import UUID

import msgspec
from lessonledger.commands.errors import (
    InvalidCommandError,
    KeyReusedError,
    UnknownLessonError,
)
from lessonledger.commands.handlers import command_digest, command_id, key_owner, occurred_ns
from lessonledger.commands.messages import Erase
from lessonledger.commands.policies import copy_id, trigger_id
from lessonledger.commands.skill_erasure import with_skill_derived
from lessonledger.ledger.events import (
    CITES_AN_OUTCOME,
    OUTCOME_OBSERVED,
    AnyEvent,
    Erased,
    LessonDemoted,
    LessonProposed,
    OutcomeObserved,
    decode_event,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.log import NewEvent, Record, Writing
from lessonledger.ledger.submission import new_event
from lessonledger.projections.audit_index import AuditIndex

__all__ = [
    "ERASED_PER_RECORD",
    "Erasure",
    "NothingToEraseError",
    "UnknownOutcomeError",
    "erased_positions",
    "erasure_of",
    "erasure_records",
]

#: Positions named per ``Erased`` record: about 500 KB of body, half the limit.
ERASED_PER_RECORD = 100_000



class Erasure(NamedTuple):
    """What an erasure did.

    Attributes:
        position: the ``Erased`` event's.
        erased: the positions whose bodies it deleted.
    """

    position: int
    erased: list[int]


class NothingToEraseError(InvalidCommandError):
    """No event names this principal or session, or all of its events are erased already.

    For a lesson or an outcome, only the latter: one never known is an
    :class:`UnknownLessonError` or an :class:`UnknownOutcomeError`.
    """

    def __init__(self, what: str, subject: str, erased: int,
                 erased_at: int | None = None) -> None:
        #: How many of their events are erased already (0: none names them).
        self.erased = erased
        #: The position of the ``Erased`` record that took them, when it is known.
        self.erased_at = erased_at
        if erased:
            where = f" (at position {erased_at})" if erased_at is not None else ""
            msg = f"the {erased} events of {what} {subject!r} are erased already{where}"
        else:
            msg = f"no event names {what} {subject!r}; check the name (nothing was recorded)"
        super().__init__(msg, "$.subject")


class UnknownOutcomeError(InvalidCommandError, KeyError):
    """No outcome with this id is in the log (an erased one is :class:`NothingToEraseError`)."""

    def __init__(self, outcome_id: UUID) -> None:
        msg = f"no outcome {outcome_id} in the log; check the id with `lessonledger log`"
        super().__init__(msg, "$.subject")
        self.outcome_id = outcome_id

    def __str__(self) -> str:
        return str(self.args[0])


def erased_positions(log: Writing, command: Erase, index: AuditIndex) -> list[int]:
    """Return, in order, the positions whose bodies ``command`` erases (present ones only).

    ``index`` is the audit index folded to the head of ``log``: the positions come from
    it, and only their records are read, never the whole log.

    Raises:
        NothingToEraseError: no present body names the principal or session, or the
            lesson or outcome is erased already (a retry of a killed ``erase`` finishes
            its compaction on this).
        InvalidCommandError: a lesson or outcome subject is not a UUID.
        UnknownLessonError: no lesson with that id was ever proposed.
        UnknownOutcomeError: no outcome with that id is in the log.
    """
    what, subject = command.what, command.subject
    if what in ("principal", "session"):
        # Erasures themselves stay: the index leaves them out (the audit trail).
        named = index.positions(what, subject)
        positions = [r.envelope.position for r in _records(log, named) if r.payload is not None]
        if not positions:
            raise NothingToEraseError(what, subject, len(named))
    elif what == "lesson":
        target = _uuid(subject)
        positions = _about(log, index, {target})
        if not positions:
            # An erased lesson's ids left the index with its bodies; the Erased record
            # naming it is what is left (the subject is the lesson's full id).
            taken = [e.position for e in index.erasures
                     if e.what == "lesson" and e.subject == str(target)]
            if not taken:
                raise UnknownLessonError(target)
            raise NothingToEraseError(what, subject, len(_erased_by(log, taken)), taken[-1])
    else:
        positions = _outcome(log, index, _uuid(subject))
    return with_skill_derived(log, _with_attributions(log, index,
                                                      _with_copies(log, index, positions)))


def _records(log: Writing, positions: Iterable[int]) -> list[Record]:
    """The records at ``positions``, in order."""
    return [log.read(p, limit=1)[0] for p in positions]


def _with_attributions(log: Writing, index: AuditIndex, positions: list[int]) -> list[int]:
    """``positions`` and every event crediting or blaming a lesson on an outcome among them.

    Whoever's the lesson, the evidence was the erased outcome: a confirmation made when
    another lesson absorbed one citing it, say, carries the absorbed one's principal.
    """
    erased = set(positions)
    outcomes = {_outcome_id(r.payload) for r in _records(log, positions)
                if r.payload is not None and r.envelope.type == OUTCOME_OBSERVED} - {None}
    for outcome_id in outcomes:
        erased.update(r.envelope.position
                      for r in _records(log, index.positions("outcome", str(outcome_id)))
                      if r.payload is not None and r.envelope.type in CITES_AN_OUTCOME)
    return sorted(erased)


def _with_copies(log: Writing, index: AuditIndex, positions: list[int]) -> list[int]:
    """``positions`` and every event about a copy of a lesson whose proposal is among them.

    A demoted global lesson gives each other project that supported it a lesson of its
    own with the same text (``policies._copies``), decided from the contradicting
    outcome, so it carries that outcome's principal and session, not the words' owner.
    The copies are decided with the lesson's demotion, so they are found from it: among
    what the policies decided from the demotion's trigger, each proposal whose id is the
    copy's derived id. A copy of a copy goes too.
    """
    erased = set(positions)
    pending = [e.lesson_id for r in _records(log, positions)
               if r.payload is not None and isinstance(e := _event(r.payload), LessonProposed)]
    seen: set[UUID] = set()
    while pending:
        lesson = pending.pop()
        if lesson in seen:
            continue
        seen.add(lesson)
        for copy in _copies_of(log, index, lesson):
            erased.update(_about(log, index, {copy}))
            pending.append(copy)
    return sorted(erased)


def _copies_of(log: Writing, index: AuditIndex, lesson: UUID) -> set[UUID]:
    """The ids of the copies the policies made of ``lesson`` when they demoted it."""
    copies: set[UUID] = set()
    for record in _records(log, index.positions("lesson", str(lesson))):
        demoted = _event(record.payload) if record.payload is not None else None
        if not isinstance(demoted, LessonDemoted):
            continue
        for observed in _records(log, index.positions("outcome", str(demoted.outcome_id))):
            if observed.envelope.type != OUTCOME_OBSERVED:
                continue
            trigger = trigger_id(observed.envelope)
            for i in itertools.count():
                position = log.position_of(derived_id(trigger, f"policy:{i}").bytes)
                if position is None:
                    break
                payload = log.read(position, limit=1)[0].payload
                event = _event(payload) if payload is not None else None
                if isinstance(event, LessonProposed) \
                        and event.lesson_id == copy_id(trigger, lesson, event.scope):
                    copies.add(event.lesson_id)
    return copies


def _erased_by(log: Writing, erasures: list[int]) -> set[int]:
    """The positions the ``Erased`` records at ``erasures`` took."""
    events = [_event(r.payload) for r in _records(log, erasures) if r.payload is not None]
    return {p for e in events if isinstance(e, Erased) for p in e.positions}


def _uuid(subject: str) -> UUID:
    try:
        return UUID(subject)
    except ValueError:
        msg = f"subject {subject!r} is not a UUID; a lesson or an outcome is named by its id"
        raise InvalidCommandError(msg, "$.subject") from None


def _about(log: Writing, index: AuditIndex, lessons: set[UUID]) -> list[int]:
    """Positions of the present bodies that name one of ``lessons``."""
    named = sorted({p for lesson in lessons for p in index.positions("lesson", str(lesson))})
    return [r.envelope.position for r in _records(log, named) if r.payload is not None]


def _outcome(log: Writing, index: AuditIndex, outcome_id: UUID) -> list[int]:
    """The outcome, what the policies decided from it (and from that), and its lessons."""
    # Every observation of the id: a publisher may observe one again (on a stream of its
    # own), and the view shows the last, so erasing the first alone would leave it.
    observed = [r for r in _records(log, index.positions("outcome", str(outcome_id)))
                if r.payload is not None and r.envelope.type == OUTCOME_OBSERVED]
    if not observed:
        # An outcome's stream is its id (handlers._observe): what is left once erased.
        erased = [r.envelope.position for r in log.scan()
                  if r.envelope.type == OUTCOME_OBSERVED and r.payload is None
                  and r.envelope.stream_id == outcome_id]
        if not erased:
            raise UnknownOutcomeError(outcome_id)
        # Which erasure took it (this kind's, or its principal's or session's): read
        # only on this refusal, one Erased record after another until it is found.
        at = next((e.position for e in index.erasures
                   if erased[0] in _erased_by(log, [e.position])), None)
        raise NothingToEraseError(what="outcome", subject=str(outcome_id), erased=len(erased),
                                  erased_at=at)
    positions = {r.envelope.position for r in observed}
    lessons: set[UUID] = set()
    triggers = [r.envelope for r in observed]
    while triggers:
        # The policies' events carry ids derived from their trigger's, numbered from 0,
        # and may be triggers themselves (a lesson proposed, then promoted or absorbed).
        trigger = trigger_id(triggers.pop())
        for i in itertools.count():
            position = log.position_of(derived_id(trigger, f"policy:{i}").bytes)
            if position is None:
                break
            record = log.read(position, limit=1)[0]
            if position in positions or record.payload is None:
                continue
            positions.add(position)
            triggers.append(record.envelope)
            event = _event(record.payload)
            if isinstance(event, LessonProposed):
                lessons.add(event.lesson_id)
    if lessons:
        positions.update(_about(log, index, lessons))
    return sorted(positions)


def _outcome_id(payload: bytes) -> UUID | None:
    event = _event(payload)
    return event.outcome_id if isinstance(event, OutcomeObserved) else None


def _event(payload: bytes) -> AnyEvent | None:
    """The catalogue event of a body, or None for another writer's (an application's)."""
    try:
        return decode_event(payload)
    except msgspec.DecodeError:
        return None


def erasure_records(command: Erase, erased: list[int]) -> list[NewEvent]:
    """The ``Erased`` records of ``command``: several when one would pass the body limit."""
    chunks = [erased[i : i + ERASED_PER_RECORD]
              for i in range(0, len(erased), ERASED_PER_RECORD)] or [[]]
    parent = command_id(command.key, key_owner(command))
    digest = command_digest(command)  # on the first record: what a retry must match
    return [new_event(Erased(what=command.what, subject=command.subject, by=command.actor,
                             reason=command.reason, positions=chunk,
                             command_digest=b"" if i else digest),
                      stream=eid, version=0, event_id=eid, actor=command.actor,
                      principal=command.principal, session=command.session,
                      occurred_at=occurred_ns(command.occurred_at))
            for i, eid, chunk in ((i, _record_id(parent, i), c) for i, c in enumerate(chunks))]


def erasure_of(log: Writing, command: Erase) -> Erasure | None:
    """What ``command``'s key erased before, if it was used: a retry's answer.

    Raises:
        KeyReusedError: the key was used for an erasure saying anything else (another
            subject, reason, actor, principal, session or time).
    """
    parent = command_id(command.key, key_owner(command))
    records: list[tuple[int, Erased]] = []
    for part in itertools.count():
        position = log.position_of(_record_id(parent, part).bytes)
        if position is None:
            break
        payload = log.read(position, limit=1)[0].payload
        event = decode_event(payload) if payload is not None else None
        assert isinstance(event, Erased), "an erasure's records are never erased"
        records.append((position, event))
    if not records:
        return None
    first = records[0][1]
    # Every field of the command must match (an older ledger's record has no digest:
    # then what it kept of the command, its body's fields).
    same = (first.command_digest == command_digest(command) if first.command_digest
            else (first.what, first.subject, first.by, first.reason)
            == (command.what, command.subject, command.actor, command.reason))
    if not same:
        raise KeyReusedError(command.key, f"erasing {first.what} {first.subject}, "
                             f"position {records[0][0]}")
    return Erasure(records[0][0], [p for _, event in records for p in event.positions])


def _record_id(parent: UUID, part: int) -> UUID:
    """The id of an erasure's ``part``-th record.

    Never ``"0"``, the first id of every other command: an erasure and another command
    sent with the same key must not take each other for a retry.
    """
    return derived_id(parent, f"erasure:{part}" if part else "erasure")
