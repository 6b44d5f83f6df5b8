"""One LMDB environment per directory per process, shared by every recorder that uses it.

LMDB forbids opening the same environment twice in one process, while eventsourcing
builds a factory per application, view and runner; so environments are opened here
once, reference-counted, and closed when the last user lets go.

While a process has a home open it holds a shared ``flock`` on ``<home>/home.lock``.
LMDB cannot swap its data file under an open map, so compaction (see
:mod:`lessonledger.ledger.compaction`) must know that nobody, in any process, has the
home open: it takes the same lock exclusively, and fails fast when it cannot.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal, overload

import lmdb
from lessonledger.ledger.errors import LedgerConfigError

__all__ = [
    "DEFAULT_MAP_SIZE",
    "LOCK_FILE",
    "MAX_DBS",
    "UNSWEPT_TREE",
    "LMDBHome",
    "acquire",
    "beside_writers",
    "check_length",
    "compaction_due",
    "let_go_of_pages",
    "on_read_only_filesystem",
    "open_environment",
    "open_lock_file",
    "opened_here",
    "outside_home",
    "read_here",
    "read_only",
    "read_only_here",
    "reading",
    "release",
]

#: Address space reserved for the map. LMDB files are sparse, so this costs nothing
#: until used; it only bounds how large one home can grow.
DEFAULT_MAP_SIZE = 64 << 30
MAX_DBS = 128
#: The file whose flock says who has a home open: shared while open, exclusive to compact.
LOCK_FILE = "home.lock"
#: A tree that exists while bodies deleted since the last compaction may still sit in
#: free pages: an erasure makes it, a compaction (which copies every other tree) drops it.
UNSWEPT_TREE = b"unswept"


@dataclass
class LMDBHome:
    """An open LMDB environment and the named databases opened in it.

    Attributes:
        path: the real path of the environment's directory.
        env: the open environment.
        sync: True when every commit is fsynced before it returns.
        lock_fd: the open ``home.lock``, holding this process's shared flock.
    """

    path: str
    env: lmdb.Environment
    sync: bool
    lock_fd: int
    users: int = 0
    listeners: dict[str, set[threading.Event]] = field(default_factory=dict)
    _dbs: dict[bytes, lmdb._Database] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @overload
    def db(self, name: str) -> lmdb._Database: ...

    @overload
    def db(self, name: str, *, create: Literal[True]) -> lmdb._Database: ...

    @overload
    def db(self, name: str, *, create: bool) -> lmdb._Database | None: ...

    def db(self, name: str, *, create: bool = True) -> lmdb._Database | None:
        """Return the named database, creating it on first use; None if ``create`` is False.

        With ``create`` False, a database the home does not hold yet is not made: the
        answer is None (checked afresh, in a read transaction, on every call until it
        exists), so a reader opening a log or a view for reading writes nothing to the
        home.

        Call this before beginning a transaction that uses the handle: a database
        opened while a transaction is open is not visible inside that transaction.
        """
        key = name.encode()
        handle = self._dbs.get(key)
        if handle is not None:
            return handle
        if not create:
            with self.env.begin() as txn:
                if txn.get(key) is None:
                    return None
        # LMDB keeps a handle opened in a read transaction for that transaction only, so a
        # writable environment opens even an existing tree in a write transaction: begun
        # here, since py-lmdb begins its own without letting go of the GIL (every thread
        # would stop while another process's transaction lasts), and outside ``_lock``,
        # which a thread inside its own write transaction may need meanwhile. Two threads
        # opening one tree get the same handle.
        if self.env.flags()["readonly"]:
            opened = self.env.open_db(key, create=create)
        else:
            with self.env.begin(write=True) as txn:
                opened = self.env.open_db(key, txn=txn, create=create)
        with self._lock:
            return self._dbs.setdefault(key, opened)

    def notify(self, channel: str) -> None:
        """Wake every in-process reader listening on ``channel``."""
        for event in tuple(self.listeners.get(channel, ())):
            event.set()

    def listen(self, channel: str, event: threading.Event) -> None:
        """Set ``event`` whenever something is committed on ``channel``."""
        with self._lock:
            self.listeners.setdefault(channel, set()).add(event)

    def unlisten(self, channel: str, event: threading.Event) -> None:
        """Stop setting ``event``."""
        with self._lock:
            self.listeners.get(channel, set()).discard(event)


_homes: dict[str, LMDBHome] = {}
_homes_lock = threading.Lock()


def open_environment(
    path: str, *, sync: bool, map_size: int = DEFAULT_MAP_SIZE
) -> lmdb.Environment:
    """Open the LMDB environment in the directory ``path`` with the ledger's settings.

    Only for a caller that already holds ``home.lock`` (:func:`acquire` does; so does
    compaction): LMDB forbids opening one environment twice in a process.

    Raises:
        LedgerConfigError: LMDB cannot open it.
    """
    try:
        env = lmdb.open(path, map_size=map_size, max_dbs=MAX_DBS, sync=sync, metasync=sync,
                        max_readers=512)
    except lmdb.Error as e:
        msg = f"cannot open ledger home {path!r}: {e}; check the path and its permissions"
        raise LedgerConfigError(msg) from e
    check_length(env, path)
    return env


def _free_past(data: str, size: int, psize: int, last: int, txnid: int) -> bool:
    """True when every page from ``size`` to ``last`` is on the file's free list.

    LMDB never writes a page a transaction allocated and freed again (a "loose" page,
    left by deletions that merge pages): it goes on the free list unwritten, so a sound
    file may end before the last page its meta page counts. Read from the file, not the
    map: a page past the end of a mapped file kills the process. False when the free
    tree cannot be read as it should (a page of it past the end, say).
    """
    def page(n: int) -> bytes:
        if (n + 1) * psize > size:
            raise ValueError(n)
        return os.pread(fd, psize, n * psize)

    free: set[int] = set()
    fd = os.open(data, os.O_RDONLY)
    try:
        # The meta page of the last transaction: its free tree's root (MDB_meta: magic,
        # version, address, map size, then the free tree's MDB_db, whose root is last).
        metas = [page(0), page(1)]
        meta = next((m for m in metas
                     if int.from_bytes(m[16 + 128:16 + 136], "little") == txnid), None)
        if meta is None:
            return False
        stack = [int.from_bytes(meta[16 + 64:16 + 72], "little")]
        while stack:
            number = stack.pop()
            if number == 2**64 - 1:
                continue  # an empty free tree
            raw = page(number)
            flags, lower = (int.from_bytes(raw[i:i + 2], "little") for i in (10, 12))
            for i in range((lower - 16) // 2):
                at = int.from_bytes(raw[16 + 2 * i:18 + 2 * i], "little")
                lo, hi, node, ksize = (int.from_bytes(raw[at + j:at + j + 2], "little")
                                       for j in (0, 2, 4, 6))
                if flags & 1:  # a branch: the child's page number
                    stack.append(lo | hi << 16 | node << 32)
                    continue
                start, length = at + 8 + ksize, lo | hi << 16
                if node & 1:  # the page list on overflow pages of its own
                    first = int.from_bytes(raw[start:start + 8], "little")
                    pages = int.from_bytes(page(first)[12:16], "little")
                    body = b"".join(page(first + k) for k in range(pages))[16:16 + length]
                else:
                    body = raw[start:start + length]
                ids = [int.from_bytes(body[k:k + 8], "little") for k in range(0, length, 8)]
                free.update(ids[1:1 + ids[0]] if ids else ())
    except (ValueError, OSError):
        return False
    finally:
        os.close(fd)
    return all(n in free for n in range(size // psize, last + 1))


_MADV_DONTNEED = 4
#: The address ranges this process maps each ``data.mdb`` at, by its path, as last read
#: from ``/proc/self/maps``. Reading that (hundreds of lines with numpy and USearch
#: loaded) cost about 1 ms a drop; a load of 100,000 rows drops every 250 of them.
_RANGES: dict[str, list[tuple[int, int]]] = {}


def _still_mapped(target: str, ranges: list[tuple[int, int]]) -> bool:
    """True when each range is still one mapping of ``target`` (one ``readlink`` each).

    A range left from a map that LMDB has since replaced may now hold the process's own
    memory, which ``MADV_DONTNEED`` would zero: it is used only once the kernel names
    ``target`` as what is mapped there, exactly.
    """
    try:
        return bool(ranges) and all(
            os.readlink(f"/proc/self/map_files/{start:x}-{end:x}") == target
            for start, end in ranges)
    except OSError:
        return False


def _mapped_ranges(target: str) -> list[tuple[int, int]]:
    with open("/proc/self/maps") as maps:
        found = []
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].rstrip("\n") == target:
                start, end = (int(x, 16) for x in parts[0].split("-"))
                found.append((start, end))
    return found


def let_go_of_pages(path: str) -> None:
    """Unmap the pages of ``path``'s ``data.mdb`` this process has mapped in.

    Every page a process reads counts in its resident set, and the kernel maps up to 16
    pages around each one read ("fault-around"; ``MADV_RANDOM`` does not stop it), so a
    process that reads a big home here and there came to hold most of the file: on a
    200,000-event home an agent's peak was 600 MB of the file beside 300 of its own.
    The pages stay in the page cache and are mapped in again, unread, when next needed;
    LMDB never rewrites a page that a live reader can see, so a read in progress reads
    what it read before. Linux only; elsewhere nothing is done.
    """
    if not sys.platform.startswith("linux"):
        return
    target = os.path.join(path, "data.mdb")
    ranges = _RANGES.get(target)
    if ranges is None or not _still_mapped(target, ranges):
        ranges = _RANGES[target] = _mapped_ranges(target)
    for start, end in ranges:
        _libc().madvise(start, end - start, _MADV_DONTNEED)


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def check_length(env: lmdb.Environment, path: str) -> None:
    """Refuse (closing ``env``) a data file shorter than the pages its meta page uses.

    A file cut short maps pages past its end: reading them kills the process (SIGBUS)
    instead of raising, so the length is checked before anything is read.
    """
    info, psize = env.info(), env.stat()["psize"]
    used = (info["last_pgno"] + 1) * psize
    size = os.path.getsize(os.path.join(path, "data.mdb"))
    if size < used and not _free_past(os.path.join(path, "data.mdb"), size, psize,
                                      info["last_pgno"], info["last_txnid"]):
        env.close()
        msg = (f"ledger home {path!r} is damaged: data.mdb has {size:,} bytes but its "
               f"pages reach {used:,}; restore the home from a backup")
        raise LedgerConfigError(msg)


#: Homes this process shares among its openers (:func:`read_only`'s, :func:`reading`'s):
#: each by real path, with how many use it.
_Shared = dict[str, tuple[LMDBHome, int]]

#: Homes this process has open through :func:`read_only`.
_read_only: _Shared = {}


@contextmanager
def read_only(path: str) -> Iterator[LMDBHome]:
    """Open a home that nobody writes to (a backup, a snapshot, read-only media).

    Not a byte is written: neither ``home.lock`` nor LMDB's reader table is touched,
    which is safe only while no process writes to the home. A read-only filesystem
    guarantees that; elsewhere, the caller vouches for it. Opens of one home in a
    process share one environment, as :func:`reading`'s do: LMDB refuses a second
    environment of a file in a process ("already open in this process"), and a verb
    may read the log and the lessons through two opens (``metrics --read-only``).

    Raises:
        LedgerConfigError: LMDB cannot open it, its file is cut short, or it holds
            packs not laid out yet.
    """
    real = os.path.realpath(path)
    home = _open_read_only(real)
    try:
        yield home
    finally:
        _let_go(_read_only, real)


def _open_read_only(real: str) -> LMDBHome:
    """Open and register the environment, or count one more user of the one open here."""
    with _homes_lock:
        shared = _one_more(_read_only, real)
        if shared is not None:
            return shared
        try:
            env = lmdb.open(real, readonly=True, lock=False, max_dbs=MAX_DBS,
                            map_size=DEFAULT_MAP_SIZE, create=False)
        except lmdb.Error as e:
            msg = f"cannot open ledger home {real!r} read-only: {e}; check the path"
            raise LedgerConfigError(msg) from e
        home = LMDBHome(real, env, sync=False, lock_fd=-1)
        _read_only[real] = (home, 1)
    return _readable(_read_only, home)


def _one_more(shared: _Shared, real: str) -> LMDBHome | None:
    """The home ``shared`` has for ``real``, counted once more (call under the lock)."""
    found = shared.get(real)
    if found is None:
        return None
    shared[real] = (found[0], found[1] + 1)
    return found[0]


def _readable(shared: _Shared, home: LMDBHome) -> LMDBHome:
    """``home`` just opened to read, once it is whole and holds no packs to lay out."""
    try:
        check_length(home.env, home.path)
        from lessonledger.ledger.packs import refuse_pending  # it builds on the log

        refuse_pending(home)
    except BaseException:
        _let_go(shared, home.path)
        raise
    return home


def _let_go(shared: _Shared, real: str) -> None:
    """One user fewer; the last closes the environment (and its ``home.lock``)."""
    with _homes_lock:
        home, users = shared[real]
        if users > 1:
            shared[real] = (home, users - 1)
            return
        del shared[real]
        # Closed under the lock: a thread opening it meanwhile would make a second
        # environment of the file, which LMDB refuses.
        home.env.close()
        if home.lock_fd >= 0:
            os.close(home.lock_fd)


def compaction_due(home: LMDBHome) -> bool:
    """True when bodies were deleted since the home was last compacted."""
    with home.env.begin() as txn:
        return txn.get(UNSWEPT_TREE) is not None


#: Homes this process has open through :func:`reading`.
_reading: _Shared = {}


@contextmanager
def reading(path: str) -> Iterator[LMDBHome]:
    """Open a home to read it beside its writers, never waiting on their write lock.

    LMDB's environment opened read-only, with its reader table: a writable environment
    opens each tree in a write transaction, so a process that has just started would
    wait for any other process's transaction to end before its first answer. The home's
    ``home.lock`` is held shared, as :func:`acquire` holds it (a compaction waits).
    Nothing can be written through it; readers of one home in a process share it, and
    :func:`acquire` refuses the home meanwhile (LMDB forbids two environments of one
    file in a process).

    Raises:
        LedgerConfigError: LMDB cannot open it, it holds packs not laid out yet, or this
            process has it open to write.
    """
    real = os.path.realpath(path)
    with _homes_lock:
        home = _one_more(_reading, real)
    if home is None:
        home = _open_reading(real)
    try:
        yield home
    finally:
        _let_go(_reading, real)


@contextmanager
def beside_writers(path: str, *, sync: bool | None = None) -> Iterator[LMDBHome]:
    """Open a home to read beside its writers: :func:`reading` when it can, else as a writer.

    Shared with this process's writable open if it has one (``sync`` then follows it);
    opened to write, with ``sync`` (default True), when a read-only open cannot be had
    (packs to lay out first, a fresh clone's, which only a writable open does; or a home
    it cannot read so, which that open then says why). Whether the home is read-only is
    ``home.env.flags()["readonly"]``.
    """
    here = opened_here(path)
    with contextlib.ExitStack() as stack:
        opened: LMDBHome | None = None
        if here is None:
            with contextlib.suppress(LedgerConfigError):
                opened = stack.enter_context(reading(path))
        if opened is None:
            opened = acquire(path, sync=here.sync if here is not None
                             else sync if sync is not None else True)
            stack.callback(release, opened)
        yield opened


def _open_reading(real: str) -> LMDBHome:
    """Open and register the read-only environment (or share one another thread opened)."""
    # As acquire does: the flock (which waits out a compaction) outside _homes_lock, the
    # environment opened and registered under it, once for every thread.
    fd = _lock_shared(real)
    with _homes_lock:
        shared = _one_more(_reading, real)
        if shared is not None:
            os.close(fd)
            return shared
        if real in _homes:
            os.close(fd)
            msg = f"ledger home {real!r} is open in this process to write; read it through that"
            raise LedgerConfigError(msg)
        try:
            env = lmdb.open(real, readonly=True, lock=True, max_dbs=MAX_DBS,
                            map_size=DEFAULT_MAP_SIZE, create=False, max_readers=512)
        except lmdb.Error as e:
            os.close(fd)
            msg = f"cannot open ledger home {real!r} to read: {e}; check the path"
            raise LedgerConfigError(msg) from e
        home = LMDBHome(real, env, sync=False, lock_fd=fd)
        _reading[real] = (home, 1)
    return _readable(_reading, home)


def read_here(path: str) -> LMDBHome | None:
    """The home at ``path`` if this process has it open through :func:`reading`."""
    return _shared_here(_reading, path)


def read_only_here(path: str) -> LMDBHome | None:
    """The home at ``path`` if this process has it open through :func:`read_only`."""
    return _shared_here(_read_only, path)


def _shared_here(shared: _Shared, path: str) -> LMDBHome | None:
    with _homes_lock:
        found = shared.get(os.path.realpath(path))
    return None if found is None else found[0]


def opened_here(path: str) -> LMDBHome | None:
    """The home at ``path`` if this process has it open (LMDB forbids opening it twice)."""
    with _homes_lock:
        return _homes.get(os.path.realpath(path))


def on_read_only_filesystem(path: str) -> bool:
    """True when ``path`` is on a filesystem mounted read-only."""
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def outside_home(path: str | os.PathLike[str], home: str | os.PathLike[str],
                 advice: str) -> None:
    """Refuse to write ``path`` inside ``home``: it would become one of the home's files.

    Copied with the home, it would hold what a later erasure there takes, out of reach of
    everything erasure compacts (and over ``data.mdb`` it would replace the ledger).

    Raises:
        LedgerConfigError: ``path`` lies inside ``home``; ``advice`` says what to do.
    """
    if Path(path).resolve().is_relative_to(Path(home).resolve()):
        msg = f"{path} is inside the home {home}; {advice}"
        raise LedgerConfigError(msg)


def open_lock_file(real: str) -> int:
    """Open the home's ``home.lock`` (made if missing) and return the descriptor.

    Raises:
        LedgerConfigError: it cannot be opened.
    """
    try:
        # Not inherited across exec (Python's default); a fork()ed child does keep it,
        # and with it the home counts as open until that child exits.
        return os.open(os.path.join(real, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        msg = f"cannot open {LOCK_FILE} in ledger home {real!r}: {e.strerror}; check permissions"
        raise LedgerConfigError(msg) from e


def _lock_shared(real: str) -> int:
    """Open ``home.lock`` and take a shared flock on it, waiting out a compaction.

    Blocking rather than failing: a compaction is short (a compacting copy and a rename)
    and holds the lock exclusively only while it runs, so an agent starting meanwhile
    just starts a moment later, on the compacted file. flock, not fcntl: a flock belongs
    to the open file, so closing another descriptor of the same file (fcntl's trap) never
    drops it, and a second open in this process (compaction's own) conflicts with it.
    """
    fd = open_lock_file(real)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return fd


def acquire(path: str, *, sync: bool = True, map_size: int = DEFAULT_MAP_SIZE) -> LMDBHome:
    """Open (or share) the environment at ``path``, holding its ``home.lock`` shared.

    Opening waits while another process (or thread) compacts the home.

    Args:
        path: a directory; created if missing.
        sync: fsync every commit (durable across power loss). With False a commit
            still reaches the OS before returning, so it survives a process crash.
        map_size: the largest the environment may grow, in bytes.

    Raises:
        LedgerConfigError: the path is unusable, or already open here with another
            durability setting.
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        msg = f"cannot create ledger home {path!r}: {e.strerror}; choose a writable directory"
        raise LedgerConfigError(msg) from e
    real = os.path.realpath(path)
    if real in _reading:
        msg = (f"ledger home {real!r} is open in this process to read only; close that "
               "reader before opening it to write")
        raise LedgerConfigError(msg)
    home, opened = _open(real, sync, map_size)
    if opened:
        # A pull that packed while others here had the home open laid them out itself.
        _lay_out_packs(home)
    return home


def _open(real: str, sync: bool, map_size: int) -> tuple[LMDBHome, bool]:
    """The home, shared or opened; True when this call opened its environment."""
    with _homes_lock:
        home = _homes.get(real)
        if home is not None:
            return _share(home, sync), False
    # The lock is taken before LMDB opens the file and outside _homes_lock, so waiting
    # out a compaction of this home never holds up opening other homes.
    fd = _lock_shared(real)
    with _homes_lock:
        home = _homes.get(real)
        if home is not None:  # another thread opened it meanwhile: its lock is enough
            os.close(fd)
            return _share(home, sync), False
        try:
            env = open_environment(real, sync=sync, map_size=map_size)
        except BaseException:
            os.close(fd)
            raise
        home = _homes[real] = LMDBHome(real, env, sync, fd)
        home.users += 1
        return home, True


def _lay_out_packs(home: LMDBHome) -> None:
    """Lay out what a pull left packed (see :mod:`~lessonledger.ledger.packs`) first."""
    from lessonledger.ledger.packs import unpack  # it builds on the log

    try:
        unpack(home)  # and what a clone killed mid-write left goes (it may hold bodies)
    except BaseException:
        release(home)
        raise


def _share(home: LMDBHome, sync: bool) -> LMDBHome:
    """Count one more user of an open home, if it has the durability asked for."""
    if home.sync != sync:
        msg = (
            f"ledger home {home.path!r} is already open in this process with "
            f"sync={home.sync}; use one durability setting per home and process"
        )
        raise LedgerConfigError(msg)
    home.users += 1
    return home


def release(home: LMDBHome) -> None:
    """Let go of a home; the environment closes when its last user lets go."""
    with _homes_lock:
        home.users -= 1
        if home.users <= 0 and _homes.get(home.path) is home:
            del _homes[home.path]
            home.env.close()
            os.close(home.lock_fd)  # drops the shared flock, now that LMDB is closed
