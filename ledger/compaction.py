"""Rewrite a home's data file without free pages, so the bytes of erased bodies are gone.

An LMDB delete does not wipe anything: the page that held a value goes to the free list
untouched, and the live copy of a page keeps old bytes in its unused gap (measured: a
deleted 64-byte value was still in the file twice, a 20 kB one as its whole overflow
run). A plain ``env.copy`` carries that residue along; only a compacting copy, which
writes each live page into a zeroed buffer and skips free pages, leaves none. So
erasure is: delete the bodies
(:meth:`~lessonledger.ledger.log.EventLog.erase_bodies`), then :func:`compact`.

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

import lmdb
import msgspec
from lessonledger.ledger.durable_files import fsync_path
from lessonledger.ledger.errors import HomeBusyError, LedgerConfigError
from lessonledger.ledger.lmdb_env import open_environment, open_lock_file

__all__ = ["Compacted", "check_unused", "compact"]

_DATA_FILE = "data.mdb"
#: Temporary directories of compactions; one left behind was cut short by a crash.
_TEMP_PREFIX = ".compact-"


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
    """Copy the live pages to a new file and swap it in for ``data.mdb``."""
    temp = tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=real)
    try:
        env = open_environment(real, sync=True)
        try:
            env.copy(temp, compact=True)
        except lmdb.Error as e:
            msg = f"cannot compact ledger home {real!r}: {e}; the home is unchanged"
            raise LedgerConfigError(msg) from e
        finally:
            env.close()
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
