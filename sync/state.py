"""What a replica keeps about its sync, beside its log.

- ``REPLICA`` (a file in the home): the hub's address and the replica's name. A home
  with it is a replica: its log only ever grows by what it pulls, so nothing on it
  appends of its own (queries record nothing, commands wait in the outbox, policies
  never run).
- the ``sync`` tree, written in the same transaction as the records it is about:
  ``withheld`` (positions whose bodies the hub did not send: the key may not read them),
  ``erased_later`` (a checkout's: positions a later erasure took), ``later_erasures``
  (a checkout's: what each erasure after its snapshot took, and where it stood in the
  log it was taken from, so a restored hub refuses that content pushed back),
  ``pending`` (erasures applied whose acknowledgement is not yet recorded at the hub),
  ``unswept`` (bodies a restored hub said a later erasure took, deleted here but not
  yet compacted away), ``refill`` (where a pull that brought a grant started: see
  :mod:`~lessonledger.sync.refill`) and the outbox (``outbox/`` + sequence → based-on
  position and the command's JSON).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from operator import itemgetter
from pathlib import Path

import lmdb
import msgspec
from lessonledger.ledger.durable_files import PARTIAL, replace_durably
from lessonledger.ledger.lmdb_env import LMDBHome
from lessonledger.sync.errors import ReplicaMarkerError

__all__ = [
    "MARKER",
    "SYNC_TREE",
    "Outboxed",
    "ReplicaInfo",
    "SyncState",
    "drop_torn_marker",
    "excused",
    "read_marker",
    "stored_later_erasures",
    "stored_positions",
    "write_marker",
]

#: The file that makes a home a replica.
MARKER = "REPLICA"
#: The tree of sync's state (see the module docstring).
SYNC_TREE = "sync"
_OUTBOX = b"outbox/"
_positions = msgspec.msgpack.Decoder(list[int])
_later = msgspec.msgpack.Decoder(list[tuple[str, str, int]])
_LATER = b"later_erasures"
_encode = msgspec.msgpack.Encoder().encode


class ReplicaInfo(msgspec.Struct, frozen=True):
    """Where a replica pulls from and what it calls itself.

    ``key`` (its secret key file) and ``hub_key`` (the hub's public key file) are set
    when it connects with CURVE.
    """

    hub: str
    name: str
    key: str = ""
    hub_key: str = ""


class Outboxed(msgspec.Struct, frozen=True, array_like=True):
    """A command waiting to be pushed: the replica's head when it was made, its JSON."""

    based_on: int
    command: bytes


_outboxed = msgspec.msgpack.Decoder(Outboxed)


def read_marker(home: str | os.PathLike[str]) -> ReplicaInfo | None:
    """The replica's hub and name, or None when ``home`` is not a replica.

    Raises:
        ReplicaMarkerError: the marker is there but does not decode (cut short, edited).
    """
    path = Path(home, MARKER)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return msgspec.json.decode(raw, type=ReplicaInfo)
    except msgspec.DecodeError as e:  # a ValidationError too
        raise ReplicaMarkerError(str(path), str(e) or "empty") from None


def write_marker(home: str | os.PathLike[str], info: ReplicaInfo) -> None:
    """Make ``home`` a replica of ``info.hub``.

    Written whole or not at all: a clone killed here is run again into its directory
    (see :func:`drop_torn_marker`), so it must not find a marker cut short.
    """
    replace_durably(Path(home, MARKER),
                    (json.dumps(msgspec.to_builtins(info)) + "\n").encode())


def drop_torn_marker(home: str | os.PathLike[str]) -> None:
    """Remove a marker that does not decode, or its ``.partial`` copy, if that is all here.

    Nothing of a replica is written before its marker, so a directory holding only
    those is a clone killed before it began (a marker written in place, by an older
    version, may be cut short): its rerun starts afresh. Beside anything else, a damaged
    marker is left for :func:`read_marker` to refuse.
    """
    folder = Path(home)
    try:
        names = {p.name for p in folder.iterdir()}
    except (FileNotFoundError, NotADirectoryError):
        return
    if not names or not names <= {MARKER, MARKER + PARTIAL}:
        return
    if MARKER in names:
        try:
            read_marker(folder)
            return  # whole: a replica whose clone stopped before its log
        except ReplicaMarkerError:
            pass
    for name in names:
        (folder / name).unlink()


class SyncState:
    """The ``sync`` tree of an open home; every method takes the transaction to use."""

    def __init__(self, home: LMDBHome) -> None:
        self._db = home.db(SYNC_TREE)

    def positions(self, txn: lmdb.Transaction, key: str) -> list[int]:
        """A stored list of positions (``withheld``, ``erased_later``, ``pending``)."""
        raw = txn.get(key.encode(), db=self._db)
        return _positions.decode(raw) if raw else []

    def add_positions(self, txn: lmdb.Transaction, key: str, more: Iterable[int]) -> None:
        """Add positions to a stored list (kept sorted, each once)."""
        added = set(more)
        if added:
            txn.put(key.encode(), _encode(sorted(set(self.positions(txn, key)) | added)),
                    db=self._db)

    def remove_positions(self, txn: lmdb.Transaction, key: str, gone: Iterable[int]) -> None:
        """Take positions out of a stored list."""
        left = sorted(set(self.positions(txn, key)) - set(gone))
        txn.put(key.encode(), _encode(left), db=self._db)

    def add_later_erasures(self, txn: lmdb.Transaction,
                           more: Iterable[tuple[str, str, int]]) -> None:
        """Record erasures after a checkout's snapshot: (what, subject, position there)."""
        rows = sorted(set(self.later_erasures(txn)) | set(more), key=itemgetter(2))
        if rows:
            txn.put(_LATER, _encode(rows), db=self._db)

    def later_erasures(self, txn: lmdb.Transaction) -> list[tuple[str, str, int]]:
        """What :meth:`add_later_erasures` recorded, in position order."""
        raw = txn.get(_LATER, db=self._db)
        return _later.decode(raw) if raw else []

    def queue(self, txn: lmdb.Transaction, based_on: int, command: bytes) -> None:
        """Put a command in the outbox, after those already there."""
        cursor = txn.cursor(db=self._db)
        last = 0
        if cursor.set_range(_OUTBOX):
            for key in cursor.iternext(values=False):
                if not bytes(key).startswith(_OUTBOX):
                    break
                last = int.from_bytes(key[len(_OUTBOX):], "big")
        txn.put(_OUTBOX + (last + 1).to_bytes(8, "big"),
                _encode(Outboxed(based_on, command)), db=self._db)

    def outbox(self, txn: lmdb.Transaction) -> list[tuple[bytes, Outboxed]]:
        """The commands waiting, oldest first, with their keys (to drop once answered)."""
        cursor = txn.cursor(db=self._db)
        found: list[tuple[bytes, Outboxed]] = []
        if cursor.set_range(_OUTBOX):
            for key, value in cursor.iternext():
                if not bytes(key).startswith(_OUTBOX):
                    break
                found.append((bytes(key), _outboxed.decode(value)))
        return found

    def drop(self, txn: lmdb.Transaction, keys: Iterable[bytes]) -> None:
        """Take answered (or erased) commands out of the outbox."""
        for key in keys:
            txn.delete(key, db=self._db)


def stored_positions(home: LMDBHome, key: str) -> frozenset[int]:
    """A stored list of positions of ``home``, read without creating the ``sync`` tree."""
    raw = _stored(home, key.encode())
    return frozenset(_positions.decode(raw)) if raw else frozenset()


def stored_later_erasures(home: LMDBHome) -> list[tuple[str, str, int]]:
    """A checkout's erasures after its snapshot (see :meth:`SyncState.later_erasures`)."""
    raw = _stored(home, _LATER)
    return _later.decode(raw) if raw else []


def _stored(home: LMDBHome, key: bytes) -> bytes | None:
    """One value of ``home``'s ``sync`` tree, None where it or the tree is missing."""
    db = home.db(SYNC_TREE, create=False)
    if db is None:
        return None
    with home.env.begin() as txn:
        raw: bytes | None = txn.get(key, db=db)
    return raw


def excused(home: LMDBHome) -> tuple[frozenset[int], frozenset[int]]:
    """The positions ``verify`` takes for withheld, and for erased later, in ``home``.

    Empty for a home that is neither a partial replica nor a checkout; reads only.
    """
    db = home.db(SYNC_TREE, create=False)
    if db is None:
        return frozenset(), frozenset()
    with home.env.begin() as txn:
        found = [txn.get(key, db=db) for key in (b"withheld", b"erased_later")]
    withheld, later = (frozenset(_positions.decode(raw)) if raw else frozenset()
                       for raw in found)
    return withheld, later
