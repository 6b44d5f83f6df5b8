"""The audit index: which positions touch which principal, session, lesson and outcome.

DESIGN §5's index, so that an erasure, ``why`` and a lookup of an erased lesson read the
few positions they need instead of scanning the whole log:

- by **principal** and by **session**: every event whose envelope names it (erasures
  themselves excepted: they are the audit trail, never taken); by principal also every
  event whose body names it (``names_a_principal``: a grant names its grantee), and
  every revocation of a key while it was granted to that principal (``names_a_key``),
  so erasing a principal takes its grants and what ended them;
- by **lesson**: every event about that lesson (the catalogue's ``names_a_lesson``);
- by **outcome**: the outcome itself and every event crediting or blaming a lesson on it
  (``cites_an_outcome``);
- the **erasures**: each ``Erased`` record's position, kind and subject.

Positions are kept whether or not their body is still there (an envelope outlives its
body); a reader checks for the body. It reads the ids it keys by from the body the
runner decoded for every view (a partial decode of its own only for a body that is not
a catalogue event), and an erasure of bodies it read refolds it from position 0, so an
erased body's ids leave it.
"""

from __future__ import annotations

from array import array
from typing import ClassVar
from uuid import UUID

import msgspec
from lessonledger.ledger.events import (
    ACCESS_GRANTED,
    CITES_AN_OUTCOME,
    ERASED,
    NAMES_A_KEY,
    NAMES_A_LESSON,
    NAMES_A_PRINCIPAL,
    OUTCOME_OBSERVED,
    AnyEvent,
    Erased,
)
from lessonledger.ledger.log import Record
from lessonledger.projections.body import shared_event

__all__ = ["AuditIndex", "ErasureEntry"]


class _Ids(msgspec.Struct):
    """The ids an indexed body is keyed by; every other field is skipped."""

    lesson_id: UUID | None = None
    outcome_id: UUID | None = None
    principal: str | None = None


class ErasureEntry(msgspec.Struct, frozen=True):
    """One ``Erased`` record: where, what kind, whose."""

    position: int
    what: str
    subject: str


class _State(msgspec.Struct, kw_only=True):
    position: int = 0
    # Positions as packed unsigned 64-bit integers: a home of millions of events keeps
    # 8 bytes a reference, not a Python int's 28 plus a list slot.
    principal: dict[str, bytes] = {}
    session: dict[str, bytes] = {}
    lesson: dict[str, bytes] = {}
    outcome: dict[str, bytes] = {}
    erasures: list[ErasureEntry] = []
    #: The principal each client key (by its stream) is granted to now.
    holders: dict[str, str] = {}


_ids = msgspec.msgpack.Decoder(_Ids)
_erased = msgspec.msgpack.Decoder(Erased)
_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(_State)
_INDEXED = NAMES_A_LESSON | CITES_AN_OUTCOME | NAMES_A_PRINCIPAL | NAMES_A_KEY | {
    OUTCOME_OBSERVED}


class AuditIndex:
    """The view; positions come back in log order."""

    def __init__(self) -> None:
        self._position = 0
        self._maps: dict[str, dict[str, array[int]]] = {
            "principal": {}, "session": {}, "lesson": {}, "outcome": {}}
        self._erasures: list[ErasureEntry] = []
        self._holders: dict[str, str] = {}

    @property
    def position(self) -> int:
        """The last log position folded in."""
        return self._position

    def positions(self, kind: str, key: str | UUID) -> list[int]:
        """Positions naming ``key`` (a principal, session, lesson or outcome), in order.

        ``kind`` is ``principal``, ``session``, ``lesson`` or ``outcome``; a lesson or an
        outcome is named by its id.
        """
        found = self._maps[kind].get(str(key))
        return found.tolist() if found is not None else []

    @property
    def erasures(self) -> list[ErasureEntry]:
        """Every ``Erased`` record, in log order."""
        return list(self._erasures)

    #: It folds every record (by its envelope) and reads the bodies of these types.
    folds: ClassVar[frozenset[str] | None] = None
    reads: ClassVar[frozenset[str]] = _INDEXED | {ERASED}
    decodes: ClassVar[frozenset[str]] = _INDEXED | {ERASED}

    def apply(self, record: Record) -> None:
        """Fold one record in."""
        self.fold(record, shared_event(record.payload)
                  if record.envelope.type in self.decodes else None)

    def skip_to(self, position: int) -> None:
        """Move the position (never called: it folds every record)."""
        self._position = position

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        envelope = record.envelope
        position = self._position = envelope.position
        if envelope.type == ERASED:
            if record.payload is not None:
                erased = event
                if not isinstance(erased, Erased):
                    erased = _erased.decode(record.payload)  # refused as it always was
                self._erasures.append(ErasureEntry(position, erased.what, erased.subject))
            return
        if envelope.principal:
            self._add("principal", envelope.principal, position)
        if envelope.session:
            self._add("session", envelope.session, position)
        if envelope.type in NAMES_A_KEY and record.payload is None:
            # An erased grant or revocation ends the key's grant (as the access view has it).
            self._holders.pop(str(envelope.stream_id), None)
        if record.payload is None or envelope.type not in _INDEXED:
            return
        if event is not None:  # the fields the partial decode would read, by name
            lesson_id: UUID | None = getattr(event, "lesson_id", None)
            outcome_id: UUID | None = getattr(event, "outcome_id", None)
            principal: str | None = getattr(event, "principal", None)
        else:
            try:
                ids = _ids.decode(record.payload)
            except msgspec.DecodeError:
                return  # another writer's body under our tag: nothing of ours to index
            lesson_id, outcome_id, principal = ids.lesson_id, ids.outcome_id, ids.principal
        if envelope.type in NAMES_A_KEY:
            self._key_event(envelope.type, str(envelope.stream_id), principal,
                            envelope.principal, position)
        elif (envelope.type in NAMES_A_PRINCIPAL and principal
              and principal != envelope.principal):
            self._add("principal", principal, position)
        if lesson_id is not None and envelope.type in NAMES_A_LESSON:
            self._add("lesson", str(lesson_id), position)
        if outcome_id is not None and (envelope.type in CITES_AN_OUTCOME
                                       or envelope.type == OUTCOME_OBSERVED):
            self._add("outcome", str(outcome_id), position)

    def _key_event(self, kind: str, stream: str, named: str | None, stamped: str,
                   position: int) -> None:
        """Index a grant under its grantee, a revocation under the key's holder then."""
        holder = named if kind == ACCESS_GRANTED else self._holders.get(stream)
        if kind == ACCESS_GRANTED and named:
            self._holders[stream] = named
        else:
            self._holders.pop(stream, None)
        if holder and holder != stamped:
            self._add("principal", holder, position)

    def _add(self, kind: str, key: str, position: int) -> None:
        found = self._maps[kind].get(key)
        if found is None:
            found = self._maps[kind][key] = array("Q")
        found.append(position)

    def dump(self) -> bytes:
        """The whole state as bytes; views folded from the same log dump the same."""
        packed = {kind: {key: found.tobytes() for key, found in entries.items()}
                  for kind, entries in self._maps.items()}
        return _encoder.encode(_State(position=self._position, erasures=self._erasures,
                                      holders=self._holders, **packed))

    @classmethod
    def load(cls, data: bytes) -> AuditIndex:
        """A view from :meth:`dump`'s bytes."""
        state = _decoder.decode(data)
        view = cls()
        view._position, view._erasures = state.position, list(state.erasures)
        view._holders = dict(state.holders)
        for kind in view._maps:
            for key, raw in getattr(state, kind).items():
                found = array("Q")
                found.frombytes(raw)
                view._maps[kind][key] = found
        return view
