"""Packs: chunks a replica verified, stored whole until the log lays them out as rows.

A pull that does not fold (``clone --fold background``) stores each chunk it checked
(a whole segment's envelopes, the run its id hashes, every body matched to its
commitment) as ONE value of ``<log>.packs``, keyed by its first position: the run, the
bodies and, for the pull's last pack, the hub's chain link after it. The chain is
computed once, here, as the rows are laid out. Writing a few hundred values
instead of four rows an event is what makes such a clone about as fast as moving the
bytes. The log's rows (envelope and link, body, the id and stream index entries) are laid
out from the packs, in order, by :func:`unpack`, which every writable open of the home
runs first (:func:`~lessonledger.ledger.lmdb_env.acquire`): no reader ever sees a log
with packs pending, and the first process to open a fresh clone (the background fold it
starts) lays them out. Each transaction lays out some packs and deletes them, so an
unpacking killed midway continues where it stopped; a read-only open of a home with
packs pending is refused (:func:`refuse_pending`).

A pack never holds an erasure's record or a body gap: a pull packs only chunks with
every body and no ``Erased`` record, so what an erasure takes is always in rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import lmdb
import msgspec
from lessonledger.ledger.errors import LedgerConfigError, LedgerCorruptError, ReplayMismatchError
from lessonledger.ledger.lmdb_env import LMDBHome
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.objects import split_envelopes

__all__ = ["Pack", "packs_tree", "pending", "put_pack", "refuse_pending", "unpack"]

#: Bytes of packs one transaction of :func:`unpack` lays out, at least one pack.
UNPACK_BYTES = 4 << 20


class Pack(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A checked chunk: its envelopes as one run, its bodies, a chain link to check.

    ``link`` is the hub's head link when the pack is its pull's last, else empty.
    """

    run: bytes
    bodies: list[bytes]
    link: bytes


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Pack).decode


def _tree(name: str) -> str:
    return f"{name}.packs"


def packs_tree(home: LMDBHome, name: str = LOG_NAME) -> lmdb._Database:
    """The tree of the log's packs, made if missing: open it before the transaction."""
    return home.db(_tree(name))


def put_pack(txn: lmdb.Transaction, tree: lmdb._Database, start: int, pack: Pack) -> None:
    """Store ``pack`` (positions from ``start`` on) in ``txn``."""
    txn.put(start.to_bytes(8, "big"), _encode(pack), db=tree)


def pending(home: LMDBHome, name: str = LOG_NAME) -> bool:
    """True when the home holds packs not laid out yet."""
    db = home.db(_tree(name), create=False)
    if db is None:
        return False
    with home.env.begin() as txn:
        return bool(txn.stat(db)["entries"])


def unpack(home: LMDBHome, name: str = LOG_NAME) -> int:
    """Lay out every pack as the log's rows, in order; return how many records.

    Each record is checked again as any import is (its position, its body against its
    commitment), its link computed, and the link after a pull's last pack checked
    against the hub's head link it was stored with.

    Raises:
        LedgerCorruptError: a pack does not follow the log (a damaged file).
    """
    db = home.db(_tree(name), create=False)
    if db is None:
        return 0
    log = EventLog(home, name)
    done = 0
    while True:
        with log.writing() as writing:
            txn = writing.transaction
            taken: list[tuple[bytes, bytes]] = []
            size = 0
            # Without buffers=True, py-lmdb hands out bytes, never memoryviews.
            for key, value in cast(Iterator[tuple[bytes, bytes]],
                                   txn.cursor(db=db).iternext()):
                taken.append((key, value))
                size += len(value)
                if size >= UNPACK_BYTES:
                    break
            if not taken:
                return done
            for key, value in taken:
                pack = _decode(value)
                rows = list(zip(split_envelopes(pack.run),
                                [body or None for body in pack.bodies], strict=True))
                try:
                    writing.import_records(rows, envelopes_checked=True)
                except ReplayMismatchError as e:  # checked on arrival: the file is damaged
                    raise LedgerCorruptError(e.position) from e
                if pack.link and writing.link != pack.link:
                    raise LedgerCorruptError(int.from_bytes(key, "big"))
                txn.delete(key, db=db)
                done += len(rows)


def refuse_pending(home: LMDBHome) -> None:
    """Refuse a home opened read-only that still holds packs (nothing can lay them out).

    Raises:
        LedgerConfigError: it does.
    """
    if pending(home):
        msg = (f"ledger home {home.path!r} holds pulled records not laid out yet (a clone "
               "with --fold background that nothing opened since); open it once without "
               "--read-only (`lessonledger --home DIR fold`), then retry")
        raise LedgerConfigError(msg)
