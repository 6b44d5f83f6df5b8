"""The event log: positioned envelopes, erasable bodies and the hash chain, in LMDB.

Every append goes through :meth:`EventLog.append`, which opens one write transaction,
checks idempotency and stream versions, writes envelope, chain link, body and indexes,
and commits. LMDB allows one writer at a time across all processes, so positions
assigned inside the transaction are gap-free and in commit order.

Named databases of a log called ``name``:

- ``name.log``: ``position ‖ 0`` → envelope bytes ‖ chain link (32 bytes), and
  ``position ‖ 1`` → ``salt ‖ payload`` (the body; absent once erased). One tree keyed
  in append order: a commit touches few pages, and a replay is one cursor walk.
- ``name.streams``: stream key + version → position
- ``name.ids``: event id → position

The next position is one past the last envelope: envelopes are never deleted (erasure
and compaction remove bodies only), so it can never be handed out twice.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from hashlib import sha256
from itertools import islice
from operator import itemgetter
from typing import NamedTuple, cast

import lmdb
import msgspec
from lessonledger.ledger.envelope import (
    GENESIS,
    LINK_BYTES,
    MAX_BODY_BYTES,
    MAX_NAME_BYTES,
    MAX_STREAM_ID_BYTES,
    SALT_BYTES,
    Envelope,
    Position,
    StreamId,
    decode_envelope,
    encode_envelope,
    name_fits,
    stream_key,
)
from lessonledger.ledger.errors import (
    BodyTooLargeError,
    CredentialEventError,
    IdempotencyConflictError,
    InvalidEventError,
    LedgerCorruptError,
    LedgerStorageError,
    ReplayMismatchError,
    StreamConflictError,
)
from lessonledger.ledger.events import EVENT_TYPES, decode_event, tag_of
from lessonledger.ledger.lmdb_env import UNSWEPT_TREE, LMDBHome
from lessonledger.ledger.secrets import credential_field

__all__ = ["LOG_NAME", "EventLog", "NewEvent", "Record", "Writing", "log_names"]

#: The name of the lesson log in a home (eventsourcing applications use their own names).
LOG_NAME = "ledger"

#: Records per read transaction in :meth:`EventLog.scan`: measured faster than larger
#: chunks (a chunk's objects stay in cache), and pins pages for a shorter time.
_READ_CHUNK = 1024
_OFFSET = 1 << 63
#: A stream key is a 3-byte tag and length, then the id (see envelope.stream_key).
_MAX_STREAM_KEY = 3 + MAX_STREAM_ID_BYTES
_ENVELOPE, _BODY = b"\x00", b"\x01"
_new_record = tuple.__new__
#: A stored envelope's value less the chain link it ends with.
_WITHOUT_LINK = itemgetter(slice(None, -LINK_BYTES))


_pack_position = struct.Struct(">Q").pack


def _key(position: int, kind: bytes) -> bytes:
    return _pack_position(position) + kind


class NewEvent(msgspec.Struct, frozen=True, gc=False):
    """An event to append: the envelope's publisher-chosen fields plus the payload."""

    stream: StreamId
    version: int
    type: str
    payload: bytes
    event_id: bytes = b""
    occurred_at: int = 0
    actor: str = ""
    principal: str = ""
    session: str = ""
    scope: str = ""
    schema: int = 1


class Record(NamedTuple):
    """A stored event as read back: its envelope and payload (None once erased)."""

    envelope: Envelope
    payload: bytes | None


def _check_raw(events: Sequence[NewEvent]) -> None:
    """Refuse a catalogue event appended raw that no view could fold, or holding a secret.

    The ledger's own events come from checked commands; one appended through the public
    path (a script, an application) is checked here as a submission is: no envelope
    name (actor, principal, session, scope, a stream id spelt as text) may hold a
    credential, since an envelope outlives any erasure; and a catalogue event's body
    must be the event its type names (else every fold after it would fail) and hold
    none. Other types' bodies (an eventsourcing application's) are the application's.

    Raises:
        InvalidEventError: a body is not its type's event.
        CredentialEventError: a field looks like a credential.
    """
    for index, event in enumerate(events):
        where = f"$[{index}]"
        # An envelope outlives any erasure: no name in it may hold a credential.
        names = {"actor": event.actor, "principal": event.principal,
                 "session": event.session, "scope": event.scope,
                 "stream": event.stream if isinstance(event.stream, str) else ""}
        found = credential_field(names, path=where) if any(names.values()) else None
        if found is not None:
            raise CredentialEventError(found[1], found[0])
        if event.type not in EVENT_TYPES:
            continue
        try:
            decoded = decode_event(event.payload)
        except msgspec.DecodeError as e:
            msg = (f"the body at {where} is not a {event.type!r} event ({e}); encode the "
                   "catalogue event itself, or use a type of your own")
            raise InvalidEventError(msg, f"{where}.payload") from None
        if tag_of(type(decoded)) != event.type:
            msg = (f"the body at {where} is a {tag_of(type(decoded))!r} event, not the "
                   f"{event.type!r} its type names")
            raise InvalidEventError(msg, f"{where}.type")
        found = credential_field(decoded, skip=decoded.public_keys, path=f"{where}.payload")
        if found is not None:
            raise CredentialEventError(found[1], found[0])


#: The envelope's names, each at most :data:`MAX_NAME_BYTES` long.
_NAMES = ("actor", "principal", "session", "scope")


def _refuse(event: NewEvent, where: str) -> None:
    """Raise the precise error for an event that the append loop found unstorable."""
    if len(event.payload) > MAX_BODY_BYTES:
        raise BodyTooLargeError(len(event.payload), MAX_BODY_BYTES, f"{where}.payload")
    if event.event_id and len(event.event_id) != 16:
        msg = f"event id must be 16 bytes, got {len(event.event_id)} at {where}.event_id"
        raise InvalidEventError(msg, f"{where}.event_id")
    if not 0 <= event.occurred_at < _OFFSET:
        msg = f"occurred_at {event.occurred_at} is not nanoseconds since 1970 at {where}"
        raise InvalidEventError(msg, f"{where}.occurred_at")
    if not -_OFFSET <= event.version < _OFFSET:
        msg = f"version {event.version} is out of the 64-bit range at {where}.version"
        raise InvalidEventError(msg, f"{where}.version")
    for name in _NAMES:
        if not name_fits(getattr(event, name)):
            msg = (f"{name} is over {MAX_NAME_BYTES} bytes of UTF-8 at {where}.{name}; "
                   "use a shorter name or a digest")
            raise InvalidEventError(msg, f"{where}.{name}")
    msg = f"stream id is over {MAX_STREAM_ID_BYTES} bytes at {where}.stream; use a digest"
    raise InvalidEventError(msg, f"{where}.stream")


def _walk(cursor: lmdb.Cursor, end: bytes) -> Iterator[Record]:
    """Yield records from the cursor's place up to the envelope key ``end``.

    An envelope's body, when not erased, is the very next entry of the tree.
    """
    pending = b""  # an envelope whose body, if any, comes next
    # Without buffers=True, py-lmdb hands out bytes, never memoryviews.
    for key, value in cast(Iterator[tuple[bytes, bytes]], cursor.iternext()):
        if key[8]:
            if pending:
                yield _new_record(Record, (
                    decode_envelope(pending[:-LINK_BYTES]), value[SALT_BYTES:]))
            pending = b""
            continue
        if pending:
            yield _new_record(Record, (decode_envelope(pending[:-LINK_BYTES]), None))
        if key >= end:
            return
        pending = value
    if pending:
        yield _new_record(Record, (decode_envelope(pending[:-LINK_BYTES]), None))


def _chunked(read: Callable[[int], list[Record]], start: int) -> Iterator[Record]:
    """Records from ``start`` on, read :data:`_READ_CHUNK` at a time by ``read(start)``."""
    while True:
        chunk = read(start)
        yield from chunk
        if len(chunk) < _READ_CHUNK:
            return
        start = chunk[-1].envelope.position + 1


def _put_new(txn: lmdb.Transaction, db: lmdb._Database, items: list[tuple[bytes, bytes]]) -> bool:
    """Put index entries whose keys must be new; False when any key was taken.

    A taken key keeps its old value, and the entries put so far stay in: see
    :func:`_take_back`.
    """
    return not items or txn.cursor(db=db).putmulti(items, overwrite=False)[1] == len(items)


def _take_back(txn: lmdb.Transaction, db: lmdb._Database, items: list[tuple[bytes, bytes]]) -> None:
    """Delete the entries of ``items`` that :func:`_put_new` put.

    Their values are positions past the log's end, so an entry that was there before
    never has one of them.
    """
    for key, value in items:
        if txn.get(key, db=db) == value:
            txn.delete(key, db=db)


class EventLog:
    """A positioned, hash-chained event log stored in one LMDB home.

    Args:
        home: the shared LMDB environment.
        name: the log's name; its databases are prefixed with it.
    """

    def __init__(self, home: LMDBHome, name: str) -> None:
        self.home = home
        self.name = name
        self._env = home.env
        # Opening a log writes nothing: its trees are made by its first write, and until
        # then (on a home holding only other logs) it reads as empty. The three handles
        # are set once the trees exist; every method opens them (_trees) before use.
        self._opened = False
        self._trees(create=False)

    _log: lmdb._Database
    _streams: lmdb._Database
    _ids: lmdb._Database

    def _trees(self, *, create: bool) -> bool:
        """Open the log's three trees (making them when ``create``); False if not there."""
        if not self._opened:
            streams, ids, log = (self.home.db(f"{self.name}.{tree}", create=create)
                                 for tree in ("streams", "ids", "log"))
            if streams is None or ids is None or log is None:
                return False
            self._streams, self._ids, self._log = streams, ids, log
            self._opened = True
        return True

    # -- writing -------------------------------------------------------------------

    def append(
        self,
        events: Sequence[NewEvent],
        *,
        also: Callable[[lmdb.Transaction], None] | None = None,
    ) -> list[Position]:
        """Append events atomically and return their positions.

        An event whose id is already in the log is not written again: its original
        position is returned. ``also`` runs inside the same write transaction (a
        process recorder writes its tracking row there).

        Raises:
            StreamConflictError: a (stream, version) is already taken; nothing written.
            IdempotencyConflictError: an id was used before for another event.
            InvalidEventError: an event cannot be stored; nothing written.
        """
        _check_raw(events)
        return self.append_decided(events, also=also)

    def append_decided(
        self,
        events: Sequence[NewEvent],
        *,
        also: Callable[[lmdb.Transaction], None] | None = None,
    ) -> list[Position]:
        """As :meth:`append`, for events code made, not taken from outside.

        A policy's, a queued recall record, a benchmark's: their bodies are not decoded
        and screened again (each was built from a typed event by ``new_event``).
        """
        with self.writing() as writing:
            positions = writing.append(events)
            if also is not None:
                also(writing._txn)
        return positions

    @contextmanager
    def writing(self) -> Iterator[Writing]:
        """Hold the log's one writer slot: read the head, decide, append, commit once.

        A caller that must decide from the log as it stands *and* append in the same
        instant (a command and the policies it sets off) does so inside this block; no
        other process can append in between. Everything appended commits when the block
        ends, or nothing does if it raises.
        """
        self._trees(create=True)
        try:
            with self._env.begin(write=True) as txn:
                writing = Writing(self, txn)
                yield writing
        except lmdb.Error as e:
            # The project's own error, so a caller catches one family; LMDB aborted it.
            raise LedgerStorageError(str(e)) from e
        if writing.appended:
            self.home.notify(self.name)

    def _tail(self, txn: lmdb.Transaction) -> tuple[int, bytes, lmdb.Cursor]:
        """Return the next position, the chain link before it, and a cursor on the tree."""
        cursor = txn.cursor(db=self._log)
        if not cursor.last():
            return 1, GENESIS, cursor
        key = cast(bytes, cursor.key())
        last = int.from_bytes(key[:8], "big")
        # The last entry is the last body, or the last envelope when that body is erased.
        if key[8] and (not cursor.prev() or cursor.key() != _key(last, _ENVELOPE)):
            raise LedgerCorruptError(last)  # a body without its envelope: the tail is damaged
        return last + 1, cast(bytes, cursor.value())[-LINK_BYTES:], cursor

    def _append(
        self, txn: lmdb.Transaction, events: Sequence[NewEvent], salts: bytes, now: int
    ) -> list[Position]:
        positions = self._put(txn, events, salts, now)
        return (self._append_one_by_one(txn, events, salts, now) if positions is None
                else positions)

    def _put(
        self, txn: lmdb.Transaction, events: Sequence[NewEvent], salts: bytes, now: int
    ) -> list[Position] | None:
        # The hot path of every write. It assumes the usual case, no id seen before and no
        # stream version taken, and puts each tree's entries in one call. When a put finds
        # a key taken, it takes its own entries back out and returns None.
        position, previous, log = self._tail(txn)
        first = position
        ids: list[tuple[bytes, bytes]] = []
        versions: list[tuple[bytes, bytes]] = []
        entries: list[tuple[bytes, bytes]] = []
        last_stream: StreamId | None = None
        stream = b""
        salt = 0
        for event in events:
            event_id, version, occurred_at, payload = (
                event.event_id, event.version, event.occurred_at, event.payload)
            # A save's events share one stream object; an equal but distinct object
            # only costs recomputing the same key.
            if event.stream is not last_stream:
                last_stream = event.stream
                if isinstance(last_stream, str) and len(last_stream) > MAX_STREAM_ID_BYTES:
                    _refuse(event, f"$[{position - first}]")  # too long to make a key of
                stream = stream_key(last_stream)
            # What the log cannot store faithfully is refused here, before any put; the
            # message is built only for a refusal.
            if not (
                len(payload) <= MAX_BODY_BYTES and len(stream) <= _MAX_STREAM_KEY
                and (not event_id or len(event_id) == 16)
                and 0 <= occurred_at < _OFFSET and -_OFFSET <= version < _OFFSET
                and name_fits(event.actor) and name_fits(event.principal)
                and name_fits(event.session) and name_fits(event.scope)
            ):
                _refuse(event, f"$[{position - first}]")
            pkey = _pack_position(position)
            if event_id:
                ids.append((event_id, pkey))
            versions.append((stream + _pack_position(version + _OFFSET), pkey))
            body = salts[salt : salt + SALT_BYTES] + payload
            salt += SALT_BYTES
            # The Envelope's stored form (an array_like Struct is a msgpack array), encoded
            # from a tuple so no Struct is built per event.
            envelope = encode_envelope((
                position, event_id, stream, version, event.type, now,
                occurred_at or now, event.actor, event.principal, event.session,
                event.scope, event.schema, sha256(body).digest(),
            ))
            previous = sha256(previous + envelope).digest()
            entries.append((pkey + _ENVELOPE, envelope + previous))
            entries.append((pkey + _BODY, body))
            position += 1
        if not (_put_new(txn, self._ids, ids) and _put_new(txn, self._streams, versions)):
            _take_back(txn, self._ids, ids)
            _take_back(txn, self._streams, versions)
            return None
        # append=True refuses a key that is not past the last one; never acknowledge it.
        if entries and log.putmulti(entries, append=True)[1] != len(entries):
            raise LedgerCorruptError(first)
        return cast(list[Position], list(range(first, position)))

    def _append_one_by_one(
        self, txn: lmdb.Transaction, events: Sequence[NewEvent], salts: bytes, now: int
    ) -> list[Position]:
        # The slow path, for a batch holding a repeated id or a taken stream version. Each
        # new event is put before the next is looked at, so a repeat of an event earlier
        # in the batch finds it in the log like any other.
        positions: list[Position] = []
        for i, event in enumerate(events):
            seen = txn.get(event.event_id, db=self._ids) if event.event_id else None
            if seen is not None:
                positions.append(self._repeat(txn, event, int.from_bytes(seen, "big")))
                continue
            put = self._put(txn, events[i : i + 1],
                            salts[i * SALT_BYTES : (i + 1) * SALT_BYTES], now)
            if put is None:
                raise StreamConflictError(event.stream, event.version)
            positions += put
        return positions

    def _repeat(self, txn: lmdb.Transaction, event: NewEvent, position: int) -> Position:
        """Return the original position of a repeated event, or refuse a reused id."""
        stored = cast(bytes, txn.get(_key(position, _ENVELOPE), db=self._log))
        original = decode_envelope(stored[:-LINK_BYTES])
        if (original.stream_id, original.version, original.type) != (
            event.stream, event.version, event.type
        ):
            raise IdempotencyConflictError(event.event_id, position)
        return Position(position)

    def erase_bodies(self, positions: Sequence[int]) -> int:
        """Delete the bodies at ``positions``; envelopes and chain are untouched.

        The bytes stay in LMDB's free pages until the home is compacted.
        Returns how many bodies were present and are now gone. ``verify`` takes a body
        gone for erased only when an ``Erased`` record of this log names its position, so
        an erasure appends one in the same transaction (see ``Ledger.erase``).
        """
        with self.writing() as writing:
            return writing.erase_bodies(positions)

    # -- reading -------------------------------------------------------------------

    def head(self) -> int:
        """Return the last assigned position, 0 when the log is empty."""
        if not self._trees(create=False):
            return 0
        with self._env.begin() as txn:
            return self._tail(txn)[0] - 1

    def link_at(self, position: int) -> bytes:
        """The chain link stored at ``position`` (the genesis link for 0).

        Raises:
            LedgerCorruptError: the log has no envelope there.
        """
        if position == 0:
            return GENESIS
        stored = None
        if self._trees(create=False):
            with self._env.begin() as txn:
                stored = txn.get(_key(position, _ENVELOPE), db=self._log)
        if stored is None:
            raise LedgerCorruptError(position)
        return bytes(stored[-LINK_BYTES:])

    def position_of(self, event_id: bytes) -> Position | None:
        """Return the position of the event with this id, if any."""
        if not self._trees(create=False):
            return None
        with self._env.begin() as txn:
            return self._position_of(txn, event_id)

    def _position_of(self, txn: lmdb.Transaction, event_id: bytes) -> Position | None:
        raw = txn.get(event_id, db=self._ids)
        return Position(int.from_bytes(raw, "big")) if raw else None

    def read(
        self,
        start: int = 1,
        limit: int | None = None,
        stop: int | None = None,
        types: Sequence[str] = (),
    ) -> list[Record]:
        """Return records from ``start`` to ``stop`` (inclusive), in one snapshot.

        ``limit`` counts records after filtering by ``types``.
        """
        if not self._trees(create=False):
            return []
        with self._env.begin() as txn:
            return self._read(txn, start, limit, stop, types)

    def _read(self, txn: lmdb.Transaction, start: int, limit: int | None = None,
              stop: int | None = None, types: Sequence[str] = ()) -> list[Record]:
        end = _key(stop + 1, _ENVELOPE) if stop is not None else b"\xff" * 9
        wanted = frozenset(types)
        records: list[Record] = []
        cursor = txn.cursor(db=self._log)
        if not cursor.set_range(_key(max(start, 1), _ENVELOPE)):
            return records
        for record in _walk(cursor, end):
            if not wanted or record.envelope.type in wanted:
                records.append(record)
                if len(records) == limit:
                    break
        return records

    def scan(self, start: int = 1, stop: int | None = None) -> Iterator[Record]:
        """Yield every record from ``start`` on, in position order, for replay.

        Reads in chunks of short transactions, so a long replay never pins old pages.
        """
        yield from _chunked(lambda at: self.read(at, limit=_READ_CHUNK, stop=stop), start)

    def raw(self, start: int = 1, stop: int | None = None
            ) -> Iterator[tuple[int, bytes, bytes | None, bytes | None]]:
        """Yield ``(position, envelope, body, chain link)`` exactly as stored.

        For verification and sync, which must see the stored bytes. Reads in short
        transactions, so a long walk never pins old pages; ``stop`` (inclusive) ends it.
        """
        if not self._trees(create=False):
            return
        position = max(start, 1)
        end = _key(stop + 1, _ENVELOPE) if stop is not None else b"\xff" * 9
        while True:
            rows = []
            with self._env.begin() as txn:
                cursor = txn.cursor(db=self._log)
                if not cursor.set_range(_key(position, _ENVELOPE)):
                    return
                for key, value in cursor.iternext():
                    if key >= end:
                        break
                    if key[8]:
                        continue
                    position = int.from_bytes(key[:8], "big")
                    stored = value
                    link = stored[-LINK_BYTES:] if len(stored) >= LINK_BYTES else None
                    rows.append((position, stored[:-LINK_BYTES],
                                 txn.get(_key(position, _BODY), db=self._log), link))
                    if len(rows) == _READ_CHUNK:
                        break
            yield from rows
            if len(rows) < _READ_CHUNK or (stop is not None and position >= stop):
                return
            position += 1

    def stored(self, start: int, stop: int) -> tuple[list[bytes], list[bytes | None]]:
        """The stored envelopes and bodies of positions ``start`` to ``stop`` (inclusive).

        As :meth:`raw` gives them (envelope bytes without the link; a body as stored, or
        None when erased), from one cursor walk in one read transaction: what sync sends
        a segment from. Positions are gap-free, so the ``i``-th is ``start + i``.
        """
        envelopes: list[bytes] = []
        bodies: list[bytes | None] = []
        if start > stop or not self._trees(create=False):
            return envelopes, bodies
        # The tree holds at most two keys a position (its envelope, its body): the first
        # that many from the range's start are taken in one call.
        room = 2 * (stop - start + 1)
        with self._env.begin() as txn:
            cursor = txn.cursor(db=self._log)
            if not cursor.set_range(_key(start, _ENVELOPE)):
                return envelopes, bodies
            # Values only, sliced by map: a hub reads every record a clone moves here.
            values = cast(list[bytes], list(islice(cursor.iternext(keys=False), room)))
            if len(values) == room and cursor.key() == _key(stop, _BODY):
                # All the keys the range can hold are there: every body is.
                return (list(map(_WITHOUT_LINK, values[0::2])),
                        cast(list[bytes | None], values[1::2]))
            cursor.set_range(_key(start, _ENVELOPE))
            items = cast(list[tuple[bytes, bytes]], list(islice(cursor.iternext(), room)))
        end = _key(stop + 1, _ENVELOPE)
        keep, body = envelopes.append, bodies.append
        bodied = True  # whether the envelope before has its body yet
        for key, value in items:
            if key[8]:
                body(value)
                bodied = True
                continue
            if key >= end:
                break
            if not bodied:
                body(None)
            keep(value[:-LINK_BYTES])
            bodied = False
        if not bodied:
            body(None)
        return envelopes, bodies

    def stream(
        self,
        stream: StreamId,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """Return the records of one stream by version, as eventsourcing selects them."""
        prefix = stream_key(stream)
        low = stream_key(stream, gt + 1) if gt is not None else prefix
        records: list[Record] = []
        if not self._trees(create=False):
            return records
        with self._env.begin() as txn:
            cursor = txn.cursor(db=self._streams)
            if desc:
                keys = self._stream_desc(cursor, prefix, stream, lte)
            else:
                keys = cursor.iternext() if cursor.set_range(low) else iter(())
            for key, pkey in keys:
                if not key.startswith(prefix) or len(key) != len(prefix) + 8:
                    break
                version = int.from_bytes(key[-8:], "big") - _OFFSET
                if desc and gt is not None and version <= gt:
                    break
                if not desc and lte is not None and version > lte:
                    break
                stored = cast(bytes, txn.get(pkey + _ENVELOPE, db=self._log))
                body = txn.get(pkey + _BODY, db=self._log)
                records.append(Record(decode_envelope(stored[:-LINK_BYTES]),
                                      body[SALT_BYTES:] if body is not None else None))
                if limit is not None and len(records) >= limit:
                    break
        return records

    @staticmethod
    def _stream_desc(
        cursor: lmdb.Cursor, prefix: bytes, stream: StreamId, lte: int | None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Walk a stream's index keys from the highest version (≤ lte) down."""
        ceiling = stream_key(stream, lte + 1) if lte is not None else prefix + b"\xff" * 9
        if cursor.set_range(ceiling):
            if not cursor.prev():
                return iter(())
        elif not cursor.last():
            return iter(())
        return cast(Iterator[tuple[bytes, bytes]], cursor.iterprev())


class Writing:
    """The log inside one write transaction (see :meth:`EventLog.writing`).

    Reads see what this block appended so far; nothing is visible to others until the
    block ends.
    """

    def __init__(self, log: EventLog, txn: lmdb.Transaction) -> None:
        self._log = log
        self._txn = txn
        #: How many events this block has appended.
        self.appended = 0
        #: The chain link of the last record :meth:`import_records` put (empty before).
        self.link = b""
        #: When the block's first event was appended: every event it appends is recorded
        #: then, so a time (``--as-of TIME``) falls between transactions, never inside
        #: one, where a command's event would show without what its policies decided.
        self.recorded_at = 0

    @property
    def txn(self) -> lmdb.Transaction:
        """The write transaction: what must commit with these events is written in it.

        A view's rows, a process recorder's tracking row.
        """
        return self._txn

    def append(self, events: Sequence[NewEvent]) -> list[Position]:
        """As :meth:`EventLog.append`, committed when the block ends.

        An error may leave part of the batch in the transaction: let it leave the block,
        which then commits nothing.
        """
        if not self.recorded_at:
            self.recorded_at = time.time_ns()
        positions = self._log._append(self._txn, events, os.urandom(SALT_BYTES * len(events)),
                                      self.recorded_at)
        self.appended += len(events)
        return positions

    @property
    def head(self) -> int:
        """The last position, as this block sees it (what it appended included)."""
        return self._log._tail(self._txn)[0] - 1

    @property
    def transaction(self) -> lmdb.Transaction:
        """The LMDB write transaction, for rows kept in step with the log (sync's state)."""
        return self._txn

    def import_records(self, rows: Sequence[tuple[bytes, bytes | None]], *,
                       links: Sequence[bytes] | None = None,
                       envelopes_checked: bool = False) -> list[Envelope]:
        """Append records exactly as another log stored them: an import, a replica's pull.

        Each row is the stored envelope bytes and the stored body (``salt ‖ payload``,
        or None when it is erased or not sent). Positions, recorded times, salts and
        commitments are kept, so the chain here is the source's link for link. Each
        envelope must decode to its canonical form at the next position, with an id and
        stream a log stores; its link is recomputed here and, when ``links`` gives the
        source's (an export), must equal it. A body must match its envelope's commitment
        (hashed here, once: no caller hashes it before). ``envelopes_checked``: the caller
        has hashed these exact bytes against addresses it trusts (a replica, each segment
        against the hub's Merkle root), so they are what the source stored and are not
        re-encoded to check their form. Ids and stream versions are indexed as an append
        would, each tree in one batched put.

        Returns the envelopes, decoded; :attr:`link` is then the last one's chain link.

        Raises:
            ReplayMismatchError: a row does not fit; let it leave the block, which then
                commits nothing.
        """
        log = self._log
        position, previous, cursor = log._tail(self._txn)
        entries: list[tuple[bytes, bytes]] = []
        ids: list[tuple[bytes, bytes]] = []
        versions: list[tuple[bytes, bytes]] = []
        first = position
        decoded: list[Envelope] = []
        # Bound once: this loop runs for every record a clone moves.
        put, index, version, keep = entries.append, ids.append, versions.append, decoded.append
        pack, hashed = _pack_position, sha256
        for offset, (stored, body) in enumerate(rows):
            try:
                envelope = decode_envelope(stored)
            except msgspec.DecodeError as e:
                raise ReplayMismatchError(position, f"the envelope does not decode ({e})") from None
            if envelope.position != position:
                raise ReplayMismatchError(position, f"the envelope there is position "
                                          f"{envelope.position} (events missing or reordered)")
            event_id, stream = envelope.event_id, envelope.stream
            if len(event_id) not in (0, 16) or len(stream) > _MAX_STREAM_KEY \
                    or not (name_fits(envelope.actor) and name_fits(envelope.principal)
                            and name_fits(envelope.session) and name_fits(envelope.scope)):
                raise ReplayMismatchError(position, "its event id, stream id or a name "
                                          "(actor, principal, session, scope) is not one a "
                                          "log stores")
            if not envelopes_checked and encode_envelope(envelope) != stored:
                raise ReplayMismatchError(position, "the envelope is not in its canonical form")
            previous = hashed(previous + stored).digest()
            if links is not None and links[offset] != previous:
                raise ReplayMismatchError(position, "its chain link does not follow from the "
                                          "one before (an edited envelope, or events missing "
                                          "or reordered)")
            pkey = pack(position)
            put((pkey + _ENVELOPE, stored + previous))
            if body is not None:
                if len(body) < SALT_BYTES or hashed(body).digest() != envelope.commitment:
                    raise ReplayMismatchError(position, "its body does not match the "
                                              "envelope's commitment")
                put((pkey + _BODY, body))
            if event_id:
                index((event_id, pkey))
            version((stream + pack(envelope.version + _OFFSET), pkey))
            keep(envelope)
            position += 1
        if not (_put_new(self._txn, log._ids, ids)
                and _put_new(self._txn, log._streams, versions)):
            raise ReplayMismatchError(first, "an event id or stream version in it is already "
                                      "in the log")
        if entries and cursor.putmulti(entries, append=True)[1] != len(entries):
            raise LedgerCorruptError(first)
        self.appended += len(rows)
        self.link = previous
        return decoded

    def restore_bodies(self, bodies: Mapping[int, bytes]) -> int:
        """Put back bodies this log lacks: a partial replica's, once its key may read them.

        Each body (``salt ‖ payload``) must match the commitment of the envelope stored
        at its position, and that position must hold no body; envelopes and chain are
        untouched. Returns how many were put.

        Raises:
            ReplayMismatchError: a body does not fit; let it leave the block, which then
                commits nothing.
        """
        db = self._log._log
        for position, body in sorted(bodies.items()):
            stored = self._txn.get(_key(position, _ENVELOPE), db=db)
            if stored is None:
                raise ReplayMismatchError(position, "the log holds no envelope there")
            envelope = decode_envelope(bytes(stored)[:-LINK_BYTES])
            if len(body) < SALT_BYTES or sha256(body).digest() != envelope.commitment:
                raise ReplayMismatchError(position, "its body does not match the "
                                          "envelope's commitment")
            if not self._txn.put(_key(position, _BODY), body, db=db, overwrite=False):
                raise ReplayMismatchError(position, "a body is there already")
        return len(bodies)

    def erase_bodies(self, positions: Sequence[int]) -> int:
        """As :meth:`EventLog.erase_bodies`, committed when the block ends."""
        gone = sum(bool(self._txn.delete(_key(p, _BODY), db=self._log._log)) for p in positions)
        if gone:
            # Their bytes stay in free pages until a compaction, which drops this tree.
            self._log._env.open_db(UNSWEPT_TREE, txn=self._txn)
        return gone

    def scan(self, start: int = 1) -> Iterator[Record]:
        """Every record from ``start`` on, including this block's own appends so far."""
        yield from _chunked(lambda at: self._log._read(self._txn, at, limit=_READ_CHUNK), start)

    def read(self, start: int = 1, limit: int | None = None) -> list[Record]:
        """As :meth:`EventLog.read`, in this transaction."""
        return self._log._read(self._txn, start, limit)

    def position_of(self, event_id: bytes) -> Position | None:
        """As :meth:`EventLog.position_of`, in this transaction."""
        return self._log._position_of(self._txn, event_id)

    def next_version(self, stream: StreamId) -> int:
        """The version a new event of ``stream`` takes now: one past its highest, else 0."""
        prefix = stream_key(stream)
        cursor = self._txn.cursor(db=self._log._streams)
        for key, _ in self._log._stream_desc(cursor, prefix, stream, None):
            if key.startswith(prefix) and len(key) == len(prefix) + 8:
                return int.from_bytes(key[-8:], "big") - _OFFSET + 1
            break
        return 0


def log_names(home: LMDBHome) -> list[str]:
    """The name of every log in a home, the lesson log's first, then the others sorted.

    A log ``name`` is the named database ``name.log`` (with ``name.ids`` and
    ``name.streams``): the lesson log's, an eventsourcing application's (named after the
    application) and its snapshots' (``name.snapshots``). Named databases are the keys
    of LMDB's main database, so this lists them without opening or creating any.
    """
    with home.env.begin() as txn:
        names = {key[:-4].decode("utf-8", "replace")
                 for key in txn.cursor().iternext(values=False) if key.endswith(b".log")}
    return sorted(names, key=lambda name: (name != LOG_NAME, name))
