"""The event log: positioned envelopes, erasable bodies and the hash chain, in LMDB.

Every append goes through :meth:`EventLog.append`, which opens one write transaction,
checks idempotency and stream versions, writes envelope, body, chain link and indexes,
and commits. LMDB allows one writer at a time across all processes, so positions
assigned inside the transaction are gap-free and in commit order.

Named databases of a log called ``name``:

- ``name.envelopes``: position → envelope bytes
- ``name.bodies``: position → ``salt ‖ payload`` (absent once erased)
- ``name.chain``: position → chain hash of the envelope at that position
- ``name.streams``: stream key + version → position
- ``name.ids``: event id → position
- ``name.meta``: ``next`` → the next position to assign
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from hashlib import sha256
from typing import NamedTuple, cast

import lmdb
import msgspec
from lessonledger.ledger.envelope import (
    GENESIS,
    MAX_BODY_BYTES,
    MAX_STREAM_ID_BYTES,
    SALT_BYTES,
    Envelope,
    Position,
    StreamId,
    decode_envelope,
    encode_envelope,
    pos_key,
    stream_key,
)
from lessonledger.ledger.errors import (
    BodyTooLargeError,
    IdempotencyConflictError,
    InvalidEventError,
    LedgerCorruptError,
    StreamConflictError,
)
from lessonledger.ledger.lmdb_env import LMDBHome

__all__ = ["EventLog", "NewEvent", "Record"]

_NEXT = b"next"
_READ_CHUNK = 4096


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


def _check(event: NewEvent, index: int) -> None:
    """Refuse, before any write, what the log cannot store faithfully."""
    where = f"$[{index}]"
    if len(event.payload) > MAX_BODY_BYTES:
        raise BodyTooLargeError(len(event.payload), MAX_BODY_BYTES, f"{where}.payload")
    if event.event_id and len(event.event_id) != 16:
        msg = f"event id must be 16 bytes, got {len(event.event_id)} at {where}.event_id"
        raise InvalidEventError(msg, f"{where}.event_id")
    if isinstance(event.stream, str) and len(event.stream.encode()) > MAX_STREAM_ID_BYTES:
        msg = f"stream id is over {MAX_STREAM_ID_BYTES} bytes at {where}.stream; use a digest"
        raise InvalidEventError(msg, f"{where}.stream")
    if not 0 <= event.occurred_at < (1 << 63):
        msg = f"occurred_at {event.occurred_at} is not nanoseconds since 1970 at {where}"
        raise InvalidEventError(msg, f"{where}.occurred_at")
    if not -(1 << 63) <= event.version < (1 << 63):
        msg = f"version {event.version} is out of the 64-bit range at {where}.version"
        raise InvalidEventError(msg, f"{where}.version")


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
        self._envelopes = home.db(f"{name}.envelopes")
        self._bodies = home.db(f"{name}.bodies")
        self._chain = home.db(f"{name}.chain")
        self._streams = home.db(f"{name}.streams")
        self._ids = home.db(f"{name}.ids")
        self._meta = home.db(f"{name}.meta")

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
        for i, event in enumerate(events):
            _check(event, i)
        salts = os.urandom(SALT_BYTES * len(events))
        with self._env.begin(write=True) as txn:
            positions = self._append(txn, events, salts)
            if also is not None:
                also(txn)
        self.home.notify(self.name)
        return positions

    def _append(
        self, txn: lmdb.Transaction, events: Sequence[NewEvent], salts: bytes
    ) -> list[Position]:
        meta, ids, streams = self._meta, self._ids, self._streams
        envelopes, bodies, chain = self._envelopes, self._bodies, self._chain
        raw_next = txn.get(_NEXT, db=meta)
        position = int.from_bytes(raw_next, "big") if raw_next else 1
        previous: bytes = GENESIS
        if position > 1:
            previous = cast(bytes, txn.get(pos_key(position - 1), db=chain))
        now = time.time_ns()
        positions: list[Position] = []
        for i, event in enumerate(events):
            if event.event_id:
                seen = txn.get(event.event_id, db=ids)
                if seen is not None:
                    positions.append(self._repeat(txn, event, int.from_bytes(seen, "big")))
                    continue
            key = pos_key(position)
            stream = stream_key(event.stream)
            version_key = stream + (event.version + (1 << 63)).to_bytes(8, "big")
            if not txn.put(version_key, key, db=streams, overwrite=False):
                raise StreamConflictError(event.stream, event.version)
            if event.event_id:
                txn.put(event.event_id, key, db=ids)
            body = salts[i * SALT_BYTES : (i + 1) * SALT_BYTES] + event.payload
            envelope = encode_envelope(Envelope(
                position, event.event_id, stream, event.version, event.type, now,
                event.occurred_at or now, event.actor, event.principal, event.session,
                event.scope, event.schema, sha256(body).digest(),
            ))
            previous = sha256(previous + envelope).digest()
            # With append=True, LMDB refuses (put returns False) a key that is not past the
            # last one: `next` is behind what is stored. Never acknowledge such a write.
            if not (txn.put(key, envelope, db=envelopes, append=True)
                    and txn.put(key, body, db=bodies, append=True)
                    and txn.put(key, previous, db=chain, append=True)):
                raise LedgerCorruptError(position)
            positions.append(Position(position))
            position += 1
        txn.put(_NEXT, pos_key(position), db=meta)
        return positions

    def _repeat(self, txn: lmdb.Transaction, event: NewEvent, position: int) -> Position:
        """Return the original position of a repeated event, or refuse a reused id."""
        original = decode_envelope(cast(bytes, txn.get(pos_key(position), db=self._envelopes)))
        if (original.stream_id, original.version, original.type) != (
            event.stream, event.version, event.type
        ):
            raise IdempotencyConflictError(event.event_id, position)
        return Position(position)

    def erase_bodies(self, positions: Sequence[int]) -> int:
        """Delete the bodies at ``positions``; envelopes and chain are untouched.

        The bytes stay in LMDB's free pages until the home is compacted.
        Returns how many bodies were present and are now gone.
        """
        with self._env.begin(write=True) as txn:
            return sum(bool(txn.delete(pos_key(p), db=self._bodies)) for p in positions)

    # -- reading -------------------------------------------------------------------

    def head(self) -> int:
        """Return the last assigned position, 0 when the log is empty."""
        with self._env.begin() as txn:
            raw = txn.get(_NEXT, db=self._meta)
        return int.from_bytes(raw, "big") - 1 if raw else 0

    def position_of(self, event_id: bytes) -> Position | None:
        """Return the position of the event with this id, if any."""
        with self._env.begin() as txn:
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
        records: list[Record] = []
        wanted = frozenset(types)
        with self._env.begin(buffers=False) as txn:
            for envelope_bytes, body in self._pairs(txn, start):
                envelope = decode_envelope(envelope_bytes)
                if stop is not None and envelope.position > stop:
                    break
                if wanted and envelope.type not in wanted:
                    continue
                records.append(Record(envelope, body[SALT_BYTES:] if body else None))
                if limit is not None and len(records) >= limit:
                    break
        return records

    def scan(self, start: int = 1, stop: int | None = None) -> Iterator[Record]:
        """Yield every record from ``start`` on, in position order, for replay.

        Reads in chunks of short transactions, so a long replay never pins old pages.
        """
        while True:
            chunk = self.read(start, limit=_READ_CHUNK, stop=stop)
            yield from chunk
            if len(chunk) < _READ_CHUNK:
                return
            start = chunk[-1].envelope.position + 1

    def _pairs(
        self, txn: lmdb.Transaction, start: int
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """Walk envelopes and bodies side by side; a missing body yields None."""
        envelopes = txn.cursor(db=self._envelopes)
        bodies = txn.cursor(db=self._bodies)
        key = pos_key(max(start, 1))
        if not envelopes.set_range(key):
            return
        has_body = bodies.set_range(key)
        # Without buffers=True, py-lmdb hands out bytes, never memoryviews.
        for pkey, envelope_bytes in cast(Iterator[tuple[bytes, bytes]], envelopes):
            while has_body and cast(bytes, bodies.key()) < pkey:
                has_body = bodies.next()
            body = bodies.value() if has_body and bodies.key() == pkey else None
            yield envelope_bytes, cast(bytes | None, body)

    def raw(self, start: int = 1) -> Iterator[tuple[int, bytes, bytes | None, bytes | None]]:
        """Yield ``(position, envelope, body, chain link)`` as stored, from ``start`` on.

        For verification and sync, which must see the exact stored bytes. Reads in
        short transactions, so a long walk never pins old pages.
        """
        key = pos_key(max(start, 1))
        while True:
            with self._env.begin() as txn:
                cursor = txn.cursor(db=self._envelopes)
                if not cursor.set_range(key):
                    return
                for count, (key, envelope) in enumerate(cursor, 1):
                    yield (int.from_bytes(key, "big"), envelope,
                           txn.get(key, db=self._bodies), txn.get(key, db=self._chain))
                    if count == _READ_CHUNK:
                        break
                else:
                    return
            key = pos_key(int.from_bytes(key, "big") + 1)

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
        with self._env.begin() as txn:
            cursor = txn.cursor(db=self._streams)
            if desc:
                keys = self._stream_desc(cursor, prefix, stream, lte)
            else:
                keys = cursor.iternext() if cursor.set_range(low) else iter(())
            for key, pkey in keys:
                if not key.startswith(prefix) or len(key) != len(prefix) + 8:
                    break
                version = int.from_bytes(key[-8:], "big") - (1 << 63)
                if desc and gt is not None and version <= gt:
                    break
                if not desc and lte is not None and version > lte:
                    break
                body = txn.get(pkey, db=self._bodies)
                envelope = decode_envelope(cast(bytes, txn.get(pkey, db=self._envelopes)))
                records.append(Record(envelope, body[SALT_BYTES:] if body else None))
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
