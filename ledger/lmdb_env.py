"""One LMDB environment per directory per process, shared by every recorder that uses it.

LMDB forbids opening the same environment twice in one process, while eventsourcing
builds a factory per application, view and runner; so environments are opened here
once, reference-counted, and closed when the last user lets go.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import lmdb
from lessonledger.ledger.errors import LedgerConfigError

__all__ = ["DEFAULT_MAP_SIZE", "LMDBHome", "acquire", "release"]

#: Address space reserved for the map. LMDB files are sparse, so this costs nothing
#: until used; it only bounds how large one home can grow.
DEFAULT_MAP_SIZE = 64 << 30
_MAX_DBS = 128


@dataclass
class LMDBHome:
    """An open LMDB environment and the named databases opened in it.

    Attributes:
        path: the real path of the environment's directory.
        env: the open environment.
        sync: True when every commit is fsynced before it returns.
    """

    path: str
    env: lmdb.Environment
    sync: bool
    users: int = 0
    listeners: dict[str, set[threading.Event]] = field(default_factory=dict)
    _dbs: dict[bytes, lmdb._Database] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def db(self, name: str) -> lmdb._Database:
        """Return the named database, creating it on first use.

        Call this before beginning a transaction that uses the handle: a database
        opened while a transaction is open is not visible inside that transaction.
        """
        key = name.encode()
        handle = self._dbs.get(key)
        if handle is None:
            with self._lock:
                handle = self._dbs.get(key)
                if handle is None:
                    handle = self.env.open_db(key)
                    self._dbs[key] = handle
        return handle

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


def acquire(path: str, *, sync: bool = True, map_size: int = DEFAULT_MAP_SIZE) -> LMDBHome:
    """Open (or share) the environment at ``path``.

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
    with _homes_lock:
        home = _homes.get(real)
        if home is None:
            try:
                env = lmdb.open(
                    real, map_size=map_size, max_dbs=_MAX_DBS, sync=sync, metasync=sync,
                    max_readers=512,
                )
            except lmdb.Error as e:
                msg = f"cannot open ledger home {real!r}: {e}; check the path and its permissions"
                raise LedgerConfigError(msg) from e
            home = _homes[real] = LMDBHome(real, env, sync)
        elif home.sync != sync:
            msg = (
                f"ledger home {real!r} is already open in this process with sync={home.sync}; "
                "use one durability setting per home and process"
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
