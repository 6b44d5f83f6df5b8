"""Rewrite a home's data file so that no byte of an erased body is left in it.

An LMDB delete wipes nothing: the page that held a value goes to the free list
untouched, and a live page keeps old bytes in its unused gap. LMDB's own compacting
copy (``env.copy(compact=True)``) is not enough either: it skips free pages but copies
every overflow page whole, and the tail of an overflow page past its value's end holds
whatever the page buffer held before. LMDB zeroes only a freshly malloc'd buffer; one
it recycles inside a long-lived writer is not, so a body written after another (an
agent writing for hours) can carry the earlier body's bytes in its tail. Measured: two
1.5 kB bodies erased after a 2.1 kB one was written left 23 copies of their text.

So compaction does not copy pages: it writes every live value, tree by tree and in key
order, into a brand-new environment, and swaps that file in. A new environment's page
buffers start zeroed and are only ever reused for its own pages, so every byte of the
new file is a live key, a live value, LMDB's own structure, or zero. Erasure is: delete
the bodies (:meth:`~lessonledger.ledger.log.EventLog.erase_bodies`), then
:func:`compact`.

LMDB cannot swap its file under an open map, so compaction needs the home closed in
every process. Every opener holds a shared flock on ``home.lock`` (see
:mod:`lessonledger.ledger.lmdb_env`); compaction takes it exclusively, without waiting,
and holds it throughout, so nobody opens the home until the new file is in place. Only
openers that go through :func:`~lessonledger.ledger.lmdb_env.acquire` take that lock: an
outside LMDB tool on a live home is not seen.

Each step leaves an openable home with every committed event, should the process die
there: the copy goes to a temporary directory inside the home, which LMDB never looks
at and the next compaction removes; ``os.replace`` swaps the data file atomically, and
the new file is fsynced before it. ``lock.mdb`` is kept: LMDB rebuilds its lock table
when the first process opens the environment, and nobody has it open at the swap.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from typing import Any

import lmdb
import msgspec
from lessonledger.ledger.durable_files import fsync_path
from lessonledger.ledger.errors import HomeBusyError, LedgerConfigError
from lessonledger.ledger.lmdb_env import (
    MAX_DBS,
    UNSWEPT_TREE,
    acquire,
    compaction_due,
    open_environment,
    open_lock_file,
    release,
)

__all__ = ["Compacted", "check_unused", "compact", "due"]

_DATA_FILE = "data.mdb"
#: Temporary directories of compactions; one left behind was cut short by a crash.
_TEMP_PREFIX = ".compact-"
#: How much to write per transaction of the rewrite.
_BATCH_BYTES = 64 << 20
#: Values handed to LMDB per call (one C loop each, not a Python call per value).
_BATCH_ROWS = 4096


class Compacted(msgspec.Struct, frozen=True):
    """What a compaction did.

    Attributes:
        bytes_before: the size of the data file before.
        bytes_after: its size after: the live pages only.
        seconds: how long it took, lock to unlock.
    """

    bytes_before: int
    bytes_after: int
    seconds: float


def compact(path: str) -> Compacted:
    """Rewrite the data file of the home at ``path`` without free pages.

    Needs room on the disk for the live pages, for a moment, next to the old file.

    Raises:
        HomeBusyError: a process, perhaps this one, has the home open; nothing changed.
        LedgerConfigError: ``path`` is not a ledger home, or the copy failed (the home
            is then unchanged).
    """
    real = os.path.realpath(path)
    data = os.path.join(real, _DATA_FILE)
    if not os.path.isfile(data):
        msg = f"{path} is not a ledger home (it has no {_DATA_FILE}); pass the home directory"
        raise LedgerConfigError(msg)
    started = time.perf_counter()
    lock = _lock_exclusive(real)
    try:
        _remove_leftovers(real)
        before = os.path.getsize(data)
        _rewrite(real)
        after = os.path.getsize(data)
    finally:
        os.close(lock)  # drops the exclusive flock: openers waiting on it go ahead
    return Compacted(before, after, time.perf_counter() - started)


def due(path: str) -> bool:
    """True when bodies were deleted from the home at ``path`` since its last compaction."""
    home = acquire(path)
    try:
        return compaction_due(home)
    finally:
        release(home)


def check_unused(path: str) -> None:
    """Raise :class:`HomeBusyError` if a process, perhaps this one, has the home open.

    For a caller that prepares the home before compacting it and should not touch it
    when the compaction could not run anyway; :func:`compact` checks again itself.
    """
    os.close(_lock_exclusive(os.path.realpath(path)))


def _lock_exclusive(real: str) -> int:
    """Take ``home.lock`` exclusively, or raise :class:`HomeBusyError` at once."""
    fd = open_lock_file(real)
    try:
        # Not waiting: an agent may keep its home open for hours, and someone asking to
        # compact is better told to stop it than left hanging.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as e:
        os.close(fd)
        raise HomeBusyError(real) from e
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_leftovers(real: str) -> None:
    """Remove temporary directories left by a compaction that died (we hold the lock)."""
    for entry in os.scandir(real):
        if entry.name.startswith(_TEMP_PREFIX) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)


def _rewrite(real: str) -> None:
    """Write the live values to a new file and swap it in for ``data.mdb``."""
    temp = tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=real)
    try:
        source = open_environment(real, sync=True)
        try:
            _write_live_values(source, temp)
        except lmdb.Error as e:
            msg = f"cannot compact ledger home {real!r}: {e}; the home is unchanged"
            raise LedgerConfigError(msg) from e
        finally:
            source.close()
        fresh = os.path.join(temp, _DATA_FILE)
        old = os.path.join(real, _DATA_FILE)
        # LMDB creates the copy with its own mode; keep the permissions the home had.
        os.chmod(fresh, stat.S_IMODE(os.stat(old).st_mode))
        fsync_path(fresh)  # the new file is whole on disk before any name points at it
        os.replace(fresh, old)
        fsync_path(real)  # and the swap itself is durable
    finally:
        # Should this fail, the directory is a leftover the next compaction removes.
        shutil.rmtree(temp, ignore_errors=True)


def _write_live_values(source: lmdb.Environment, temp: str) -> None:
    """Put every key and value of ``source``, tree by tree, into a new environment.

    In transactions of about :data:`_BATCH_BYTES` each, so a large home needs no more
    memory for dirty pages than that; values go in key order, so each is appended.
    """
    target = lmdb.open(temp, map_size=source.info()["map_size"], max_dbs=MAX_DBS,
                       sync=False, metasync=False, lock=False)
    try:
        with source.begin() as read:
            plain, trees = _main_entries(source, read)
            write = target.begin(write=True)
            written = 0
            try:
                # Made in the first transaction, so the new file has no page to spare.
                made = {name: target.open_db(name, txn=write, **flags)
                        for name, (_, flags) in trees.items()}
                sources = [(target.open_db(None), iter(plain), False),
                           *((made[name], read.cursor(db).iternext(), flags["dupsort"])
                             for name, (db, flags) in trees.items())]
                for db, items, dupsort in sources:
                    batch: list[tuple[bytes, bytes]] = []
                    for key, value in items:
                        batch.append((key, value))
                        written += len(key) + len(value)
                        if written >= _BATCH_BYTES or len(batch) >= _BATCH_ROWS:
                            _put_all(write.cursor(db), batch, dupsort)
                            batch = []
                        if written >= _BATCH_BYTES:
                            write.commit()
                            write, written = target.begin(write=True), 0
                    _put_all(write.cursor(db), batch, dupsort)
                write.commit()
            except BaseException:
                write.abort()
                raise
        target.sync(True)
    finally:
        target.close()


def _put_all(cursor: lmdb.Cursor, items: list[tuple[bytes, bytes]], dupsort: bool) -> None:
    """Put ``items`` (in key order) through ``cursor`` in one call.

    Appended, or by put where the tree sorts duplicates (append cannot place a second
    value under a key).
    """
    if not items:
        return
    if dupsort:
        cursor.putmulti(items, dupdata=True)
    else:
        cursor.putmulti(items, append=True)


def _main_entries(
    env: lmdb.Environment, txn: lmdb.Transaction[bytes]
) -> tuple[list[tuple[bytes, bytes]], dict[bytes, tuple[lmdb._Database, dict[str, Any]]]]:
    """Split the main tree into plain entries and the named trees it records (with flags)."""
    plain: list[tuple[bytes, bytes]] = []
    trees: dict[bytes, tuple[lmdb._Database, dict[str, Any]]] = {}
    for key, value in txn.cursor().iternext():
        if key == UNSWEPT_TREE:
            continue  # what this compaction sweeps: the copy holds no erased byte
        try:
            db = env.open_db(key, txn=txn, create=False)
        except lmdb.IncompatibleError:  # an entry of the main tree, not a named tree
            plain.append((key, value))
            continue
        trees[key] = (db, dict(db.flags()))
    return plain, trees
