"""The audit index: which positions touch which principal, session, lesson and outcome.

DESIGN §5's index, so that an erasure, ``why`` and a lookup of an erased lesson read the
few positions they need instead of scanning the whole log:

- by **principal** and by **session**: every event whose envelope names it (erasures
  themselves excepted: they are the audit trail, never taken); by principal also every
  event it wrote as the envelope's actor, every event whose body names it as a person
  (``names_a_principal``: a grant names its grantee; ``names_a_person``: a delta it
  approved), and every revocation of a key while it was granted to that principal
  (``names_a_key``), so erasing a principal takes what a subject-access export of it
  shows: its grants and what ended them, and its decisions;
- by **lesson**: every event about that lesson (the catalogue's ``names_a_lesson``);
- by **outcome**: the outcome itself and every event crediting or blaming a lesson on it
  (``cites_an_outcome``);
- the **erasures**: each ``Erased`` record's position, kind and subject.

Positions are kept whether or not their body is still there (an envelope outlives its
body); a reader checks for the body. It reads the ids it keys by from the body the
runner decoded for every view (a partial decode of its own only for a body that is not
a catalogue event), and an erasure of bodies it read refolds it from position 0, so an
erased body's ids leave it.

What it indexes is versioned (:data:`FORMAT`, in the saved header): an index saved by
an older ledger, which may lack what this one indexes, is never used; it is folded
again from position 0 and saved afresh.

It is saved as rows (:class:`~lessonledger.projections.runner.RowProjection`): a header
(position, erasures, key holders) and, per principal, session, lesson and outcome, its
positions in chunks of :data:`CHUNK`; a list only grows, so a save rewrites the last
chunk of each list that grew and adds the ones after it, in the command's transaction.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import ClassVar
from uuid import UUID

import msgspec
from lessonledger.ledger.envelope import ROLE_ACTORS
from lessonledger.ledger.events import (
    ACCESS_GRANTED,
    CITES_AN_OUTCOME,
    ERASED,
    NAMES_A_KEY,
    NAMES_A_LESSON,
    NAMES_A_PERSON,
    NAMES_A_PRINCIPAL,
    OUTCOME_OBSERVED,
    AnyEvent,
    Erased,
)
from lessonledger.ledger.log import Record
from lessonledger.projections.body import shared_event
from lessonledger.projections.store import PinnedRows

__all__ = ["CHUNK", "FORMAT", "AuditIndex", "ErasureEntry"]

#: Positions per saved chunk of a list (8 bytes each).
CHUNK = 64
#: What the index holds: 1 (no version saved) had no actors and no ``names_a_person``
#: bodies under a principal; 2 has them.
FORMAT = 2
_HEADER = b"h"
_KINDS = {"principal": b"p", "session": b"s", "lesson": b"l", "outcome": b"o"}
_NAMES = {v: k for k, v in _KINDS.items()}


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
    format: int = 1


class _Header(msgspec.Struct, array_like=True):
    position: int
    erasures: list[ErasureEntry]
    holders: dict[str, str]
    #: Last, with a default: a header saved before it decodes as format 1.
    format: int = 1


_ids = msgspec.msgpack.Decoder(_Ids)
_header = msgspec.msgpack.Decoder(_Header)
_erased = msgspec.msgpack.Decoder(Erased)
_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(_State)
_INDEXED = (NAMES_A_LESSON | CITES_AN_OUTCOME | NAMES_A_PRINCIPAL | NAMES_A_PERSON
            | NAMES_A_KEY | {OUTCOME_OBSERVED})


class AuditIndex:
    """The view; positions come back in log order."""

    def __init__(self) -> None:
        self._position = 0
        self._maps: dict[str, dict[str, array[int]]] = {
            "principal": {}, "session": {}, "lesson": {}, "outcome": {}}
        self._erasures: list[ErasureEntry] = []
        self._holders: dict[str, str] = {}
        #: Every row is written afresh at the next save (nothing tracked until then).
        self._full = True
        #: How many positions each list held at the last save, for those that grew since.
        self._grown: dict[tuple[str, str], int] = {}
        #: The saved rows of lists not read yet (None: every list is in memory). A list
        #: is read when first asked for or added to; one with no saved rows is then
        #: known empty.
        self._pin: PinnedRows | None = None
        self._absent: set[tuple[str, str]] = set()
        #: The position the rows were last saved at (what a newer snapshot must hold).
        self._base = 0
        #: Folded afresh over an index saved in another format: its first save replaces
        #: those rows even at the position they were saved at (see the runner's save).
        self.replaces = False

    @property
    def position(self) -> int:
        """The last log position folded in."""
        return self._position

    def positions(self, kind: str, key: str | UUID) -> list[int]:
        """Positions naming ``key`` (a principal, session, lesson or outcome), in order.

        ``kind`` is ``principal``, ``session``, ``lesson`` or ``outcome``; a lesson or an
        outcome is named by its id.
        """
        found = self._list(kind, str(key))
        return found.tolist() if found is not None else []

    def _list(self, kind: str, key: str) -> array[int] | None:
        """The positions naming ``key``, read from the saved rows the first time."""
        found = self._maps[kind].get(key)
        if found is not None or self._pin is None or (kind, key) in self._absent:
            return found
        rows = self._pin.under(_prefix(kind, key))
        if not rows:
            self._absent.add((kind, key))
            return None
        found = self._maps[kind][key] = array("Q")
        for _, value in rows:
            found.frombytes(value)
        return found

    def _everything(self) -> dict[str, dict[str, array[int]]]:
        """Every list, each read from the saved rows unless already in memory."""
        if self._pin is not None:
            loaded = AuditIndex.load_rows(self._pin.under())
            for kind, entries in loaded._maps.items():
                known = self._maps[kind]
                for key, found in known.items():
                    entries[key] = found  # grown since: memory holds the saved part too
                self._maps[kind] = entries
            self._pin.close()
            self._pin = None
            self._absent.clear()
        return self._maps

    def repin(self) -> None:
        """Read from a newer snapshot when the store holds what this index last saved."""
        if self._pin is not None:
            self._pin.renew(self._base)

    def unpin(self) -> None:
        """Read every saved row not read yet, and let the snapshot go."""
        self._everything()

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
        if envelope.session:
            self._add("session", envelope.session, position)
        # Everyone the record names, each once: its principal, who wrote it, and the
        # people its body names.
        # A role actor (agent, policy, ledger) stamps nearly every event: indexing under
        # it would grow the index by a position per event, and erasing a principal so
        # named would take everything agents wrote.
        people = {envelope.principal} | ({envelope.actor} - ROLE_ACTORS)
        try:
            self._body(record, event, people)
        finally:
            for person in sorted(people - {""}):
                self._add("principal", person, position)

    def _body(self, record: Record, event: AnyEvent | None, people: set[str]) -> None:
        """Index what the body names; add the people it names to ``people``."""
        envelope = record.envelope
        position = envelope.position
        if envelope.type in NAMES_A_KEY and record.payload is None:
            # An erased grant or revocation ends the key's grant (as the access view has it).
            self._holders.pop(str(envelope.stream_id), None)
        if record.payload is None or envelope.type not in _INDEXED:
            return
        if envelope.type in NAMES_A_PERSON:
            # Given no shared body, decoded here as the runner would have (the people a
            # body names come from its methods, not from one field a partial decode reads).
            named = event if event is not None else shared_event(record.payload)
            if named is not None:
                people.update(named.principals())
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
            people.add(self._key_event(envelope.type, str(envelope.stream_id), principal))
        elif envelope.type in NAMES_A_PRINCIPAL and principal:
            people.add(principal)
        if lesson_id is not None and envelope.type in NAMES_A_LESSON:
            self._add("lesson", str(lesson_id), position)
        if outcome_id is not None and (envelope.type in CITES_AN_OUTCOME
                                       or envelope.type == OUTCOME_OBSERVED):
            self._add("outcome", str(outcome_id), position)

    def _key_event(self, kind: str, stream: str, named: str | None) -> str:
        """Whom a key event is indexed under: a grant its grantee, a revocation the holder."""
        holder = named if kind == ACCESS_GRANTED else self._holders.get(stream)
        if kind == ACCESS_GRANTED and named:
            self._holders[stream] = named
        else:
            self._holders.pop(stream, None)
        return holder or ""

    def _add(self, kind: str, key: str, position: int) -> None:
        found = self._maps[kind].get(key)
        if found is None:
            found = self._list(kind, key)
        if found is None:
            found = self._maps[kind][key] = array("Q")
            self._absent.discard((kind, key))
        if not self._full and (kind, key) not in self._grown:
            self._grown[kind, key] = len(found)
        found.append(position)

    # -- saved as rows -------------------------------------------------------------------

    def _head(self) -> bytes:
        return _encoder.encode(_Header(self._position, self._erasures, self._holders, FORMAT))

    def rows(self) -> Iterator[tuple[bytes, bytes]]:
        """Every row, the header first."""
        yield _HEADER, self._head()
        for kind, entries in self._everything().items():
            for key, found in entries.items():
                for chunk in range(-(-len(found) // CHUNK)):
                    yield _key(kind, key, chunk), found[chunk * CHUNK:(chunk + 1) * CHUNK
                                                         ].tobytes()

    def changes(self) -> list[tuple[bytes, bytes | None]] | None:
        """The rows changed since the last :meth:`saved`; None: write every row."""
        if self._full:
            return None
        out: list[tuple[bytes, bytes | None]] = [(_HEADER, self._head())]
        for (kind, key), saved in self._grown.items():
            found = self._maps[kind][key]
            for chunk in range(saved // CHUNK, -(-len(found) // CHUNK)):
                out.append((_key(kind, key, chunk),
                            found[chunk * CHUNK:(chunk + 1) * CHUNK].tobytes()))
        return out

    def saved(self) -> None:
        """What :meth:`changes` (or :meth:`rows`) gave is stored: track from here."""
        self._full = False
        self._grown.clear()
        self._base = self._position
        self.replaces = False

    @classmethod
    def load_rows(cls, rows: Iterable[tuple[bytes, bytes]]) -> AuditIndex:
        """A view from the rows :meth:`rows` and :meth:`changes` gave."""
        view = cls()
        for k, value in rows:
            if k == _HEADER:
                head = _header.decode(value)
                if head.format != FORMAT:
                    return cls._replacing()
                view._position, view._erasures = head.position, head.erasures
                view._holders = head.holders
                continue
            size = int.from_bytes(k[1:3], "big")
            key = k[3:3 + size].decode()
            entries = view._maps[_NAMES[k[:1]]]
            found = entries.get(key)
            if found is None:
                found = entries[key] = array("Q")
            found.frombytes(value)
        view._full = False
        view._base = view._position
        return view

    @classmethod
    def _replacing(cls) -> AuditIndex:
        """An empty index for one saved in another format: folded again from position 0."""
        view = cls()
        view.replaces = True
        return view

    @classmethod
    def pinned(cls, pin: PinnedRows) -> AuditIndex:
        """A view of the saved rows ``pin`` reads: the header now, each list when needed."""
        view = cls()
        raw = pin.get(_HEADER)
        if raw is not None:
            head = _header.decode(raw)
            if head.format != FORMAT:
                pin.close()
                return cls._replacing()
            view._position, view._erasures = head.position, head.erasures
            view._holders = head.holders
        view._base = view._position
        view._pin = pin
        view._full = False
        return view

    def dump(self) -> bytes:
        """The whole state as bytes; views folded from the same log dump the same."""
        packed = {kind: {key: found.tobytes() for key, found in entries.items()}
                  for kind, entries in self._everything().items()}
        return _encoder.encode(_State(position=self._position, erasures=self._erasures,
                                      holders=self._holders, format=FORMAT, **packed))

    @classmethod
    def load(cls, data: bytes) -> AuditIndex:
        """A view from :meth:`dump`'s bytes."""
        state = _decoder.decode(data)
        view = cls()
        if state.format != FORMAT:
            return cls._replacing()
        view._position, view._erasures = state.position, list(state.erasures)
        view._holders = dict(state.holders)
        for kind in view._maps:
            for key, raw in getattr(state, kind).items():
                found = array("Q")
                found.frombytes(raw)
                view._maps[kind][key] = found
        return view


def _key(kind: str, key: str, chunk: int) -> bytes:
    """A chunk's row key: the kind, the key (length first, so none is another's prefix)."""
    return _prefix(kind, key) + chunk.to_bytes(4, "big")


def _prefix(kind: str, key: str) -> bytes:
    """What the keys of every chunk of one list start with."""
    raw = key.encode()
    return _KINDS[kind] + len(raw).to_bytes(2, "big") + raw
