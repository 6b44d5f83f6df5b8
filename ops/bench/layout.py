"""The physical ceiling of our log's format: raw LMDB puts of exactly what it stores.

``bench append`` sets our recorder against raw LMDB puts of the event bodies alone. That
ceiling leaves out everything the log adds to each event: the envelope with its chain
link, the salt, and the id and stream index entries. This contender writes those exact
entries (taken from a log the corpus was appended to) with plain LMDB puts, in the same
trees and transactions, and no Python work per event beyond the puts. So
``layout ÷ raw`` is what the format costs on disk, and ``ours ÷ layout`` is what our code
costs on top of it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from typing import NamedTuple

import lmdb
from lessonledger.ledger.lmdb_env import DEFAULT_MAP_SIZE, acquire, release
from lessonledger.ledger.log import EventLog, NewEvent

__all__ = ["Entries", "layout", "layout_entries"]

Pairs = list[tuple[bytes, bytes]]


class Entries(NamedTuple):
    """What the log stored for each event, in position order.

    Attributes:
        log: the envelope entry, then the body entry, of every event.
        ids: each event's id index entry.
        streams: each event's stream index entry.
    """

    log: Pairs
    ids: Pairs
    streams: Pairs


def layout_entries(events: Sequence[NewEvent], workdir: str, name: str) -> Entries:
    """Append ``events`` to a scratch log (no fsync) and return what it stored.

    Every event must carry an id, so that the id entries line up with the events.
    """
    with tempfile.TemporaryDirectory(dir=workdir) as path:
        home = acquire(path, sync=False)
        try:
            log = EventLog(home, name)
            log.append_decided(events)
            with home.env.begin() as txn:
                trees = [list(txn.cursor(db=home.db(f"{name}.{tree}")))
                         for tree in ("log", "ids", "streams")]
        finally:
            release(home)
    by_position = sorted(trees[1], key=lambda kv: kv[1]), sorted(trees[2], key=lambda kv: kv[1])
    return Entries(trees[0], *by_position)


def layout(path: str, entries: Entries, name: str, batch: int) -> float:
    """Durably put ``entries``, ``batch`` events per transaction; return events per second.

    The environment settings are our homes' (only ``max_dbs`` is cut to what is used).
    """
    env = lmdb.open(path, map_size=DEFAULT_MAP_SIZE, max_dbs=3, sync=True, metasync=True)
    try:
        log, ids, streams = (env.open_db(f"{name}.{tree}".encode())
                             for tree in ("log", "ids", "streams"))
        count = len(entries.streams)  # every event has one stream entry
        started = time.perf_counter()
        for start in range(0, count, batch):
            with env.begin(write=True) as txn:
                cursor = txn.cursor(db=log)
                for key, value in entries.log[2 * start : 2 * (start + batch)]:
                    cursor.put(key, value, append=True)
                for key, value in entries.ids[start : start + batch]:
                    txn.put(key, value, db=ids, overwrite=False)
                for key, value in entries.streams[start : start + batch]:
                    txn.put(key, value, db=streams, overwrite=False)
        return count / (time.perf_counter() - started)
    finally:
        env.close()
