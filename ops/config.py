"""Where the ledger lives and how it is opened: the only place that reads the environment."""

from __future__ import annotations

import argparse
import os
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lmdb
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.lmdb_env import (
    MAX_DBS,
    LMDBHome,
    acquire,
    beside_writers,
    check_length,
    on_read_only_filesystem,
    opened_here,
    read_here,
    read_only_here,
    release,
)
from lessonledger.ledger.lmdb_env import read_only as lmdb_read_only
from lessonledger.ledger.log import LOG_NAME, EventLog, log_names
from lessonledger.sync.keys import DEFAULT_KEYS_DIR, KEYS_ENV

__all__ = [
    "HOME_ENV",
    "LOG_NAME",
    "SYNC_ENV",
    "check_home_file",
    "default_home",
    "is_home",
    "keys_dir",
    "open_log",
    "open_logs",
    "require_home",
    "sync_setting",
    "tree_names",
]

#: Environment variable naming the ledger home directory.
HOME_ENV = "LESSONLEDGER_HOME"
#: Environment variable choosing durability: ``fsync`` (default) or ``os`` (survives a
#: process crash, not a power loss).
SYNC_ENV = "LESSONLEDGER_SYNC"
_MARKER = "LESSONLEDGER"


#: LMDB's magic number, in the meta page that begins its data file (after the page header).
_LMDB_MAGIC = 0xBEEFC0DE
_MAGIC_AT = 16
#: The trees our module makes: a log's (``<name>.log``, ``.streams``, ``.ids``, and an
#: application's ``.tracking``), the saved views, and sync's state (``sync``).
_OUR_TREES = re.compile(rb"(?s:.+\.(?:log|streams|ids|tracking|packs)|views|sync|unswept)\Z")


#: The longest wait a seconds option takes (about 11 days): past it, ZeroMQ's and the
#: threads' millisecond timeouts overflow.
MAX_SECONDS = 1e6


def seconds(text: str, *, zero: bool = False) -> float:
    """An argparse type: a finite number of seconds above 0 (or from 0, with ``zero``).

    ``nan``, ``inf`` and a negative number are refused: ZeroMQ takes a negative timeout
    for "wait for ever", and neither ``nan`` nor ``inf`` converts to milliseconds.
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 <= value <= MAX_SECONDS) or (value == 0 and not zero):
        least = "0" if zero else "more than 0"
        msg = f"expected seconds, {least} to {MAX_SECONDS:g}, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def seconds_or_zero(text: str) -> float:
    """:func:`seconds`, 0 allowed."""
    return seconds(text, zero=True)


def tree_names(home: Path) -> list[bytes]:
    """The named trees in ``home``'s LMDB file, read without writing a byte (no lock)."""
    # LMDB refuses a second environment of the file in a process: read through the open one.
    here = opened_here(str(home)) or read_here(str(home)) or read_only_here(str(home))
    if here is not None:
        with here.env.begin() as txn:
            return [key for key, _ in txn.cursor()]
    try:
        env = lmdb.open(str(home), readonly=True, lock=False, max_dbs=MAX_DBS, create=False)
    except lmdb.Error as e:
        msg = f"cannot read {home / 'data.mdb'}: {e}; this is not a ledger home"
        raise LedgerConfigError(msg) from e
    # A file cut short maps pages past its end: reading them would kill us (SIGBUS).
    check_length(env, str(home))
    try:
        with env.begin() as txn:
            return [key for key, _ in txn.cursor()]
    finally:
        env.close()


def check_home_file(home: Path) -> None:
    """Refuse a ``data.mdb`` that is not a home's, before LMDB opens (or writes) anything.

    A home's ``data.mdb`` is an LMDB environment (its first page carries LMDB's magic
    number) whose named trees are all ours (:data:`_OUR_TREES`): what lessonledger, or an
    eventsourcing application on its module, writes. A missing file is left to the
    caller; an empty one, another format, or another program's LMDB is refused, and the
    directory is left exactly as it was.

    Raises:
        LedgerConfigError: saying which.
    """
    data = home / "data.mdb"
    if data.exists() and not data.is_file():
        # A pipe or device there would block the open, or feed it bytes forever.
        msg = (f"{data} is not a regular file: not a ledger home; pass the directory "
               "that holds the ledger's data.mdb")
        raise LedgerConfigError(msg)
    try:
        with data.open("rb") as f:
            head = f.read(_MAGIC_AT + 4)
    except FileNotFoundError:
        return
    except OSError as e:
        msg = f"cannot read {data}: {e.strerror}; check the path and its permissions"
        raise LedgerConfigError(msg) from e
    if not head:
        msg = (f"{data} is empty: not a ledger home (a lost log file?); restore it from a "
               "backup, or pass an empty or new directory")
        raise LedgerConfigError(msg)
    if len(head) < _MAGIC_AT + 4 or int.from_bytes(head[_MAGIC_AT:], "little") != _LMDB_MAGIC:
        msg = f"{data} is not an LMDB file: {home} is not a ledger home; pass another --home"
        raise LedgerConfigError(msg)
    foreign = [name for name in tree_names(home) if not _OUR_TREES.match(name)]
    if foreign:
        shown = ", ".join(n.decode("utf-8", "replace") for n in sorted(foreign)[:5])
        msg = (f"{home} holds another program's LMDB data (trees: {shown}), not a ledger's; "
               "pass an empty or new directory")
        raise LedgerConfigError(msg)


def is_home(home: Path) -> bool:
    """True when ``home`` holds a ledger: ``init`` marked it, or it has an LMDB file.

    A home opened from Python (``Ledger``, ``open_ledger``, ``acquire``, an eventsourcing
    application) has ``data.mdb`` but no marker; it is a home all the same.
    """
    return (home / _MARKER).exists() or (home / "data.mdb").exists()


def require_home(home: Path) -> None:
    """Refuse a directory that holds no ledger, rather than quietly making one there.

    Raises:
        LedgerConfigError: ``home`` was never initialised.
    """
    check_home_file(home)
    if not is_home(home):
        msg = (f"no ledger at {home}; run `lessonledger init --home {shlex.quote(str(home))}` "
               "or pass --home")
        raise LedgerConfigError(msg)
    data = home / "data.mdb"
    if not data.exists() or data.stat().st_size == 0:
        # Opening would make a new, empty log here and report it as sound.
        msg = (f"ledger home {home} has lost its log file (data.mdb is missing or empty); "
               "restore it from a backup")
        raise LedgerConfigError(msg)


def default_home(*, demo: bool = False) -> Path:
    """Return the home from ``$LESSONLEDGER_HOME``, else ``~/.lessonledger``.

    With ``demo``, the fallback is ``~/.lessonledger-demo``: the demo keeps its made-up
    projects out of the home agents use unless a home is named.
    """
    named = os.environ.get(HOME_ENV)
    if named:
        return Path(named)
    return Path.home() / (".lessonledger-demo" if demo else ".lessonledger")


def keys_dir() -> Path:
    """The CURVE key directory: ``$LESSONLEDGER_KEYS``, else ``~/.lessonledger-keys``."""
    named = os.environ.get(KEYS_ENV)
    return Path(named or DEFAULT_KEYS_DIR).expanduser()


def sync_setting() -> bool:
    """True when every commit is fsynced (``$LESSONLEDGER_SYNC``, default ``fsync``)."""
    value = os.environ.get(SYNC_ENV, "fsync")
    if value not in ("fsync", "os"):
        msg = f"{SYNC_ENV} must be 'fsync' or 'os', got {value!r}"
        raise LedgerConfigError(msg)
    return value == "fsync"


@contextmanager
def open_logs(home: Path, *, read_only: bool = False,
              name: str | None = None) -> Iterator[list[EventLog]]:
    """Open every log in an existing home (the lesson log first), or only the one named.

    A home may hold other logs than the lesson log: an eventsourcing application's, named
    after it, and its snapshots'. With ``read_only``, or on a filesystem mounted
    read-only, nothing is written to the home, not even a lock: for a backup or a
    snapshot that no process writes to.

    Raises:
        LedgerConfigError: there is no ledger at ``home``, no log called ``name`` in it,
            or (read-only) no log at all yet.
    """
    require_home(home)
    read_only = read_only or on_read_only_filesystem(str(home))
    with _lmdb_home(home, read_only=read_only) as lmdb_home:
        names = log_names(lmdb_home)
        if name is not None and name not in names:
            msg = f"no log {name!r} in {home}; {_listing(names)}"
            raise LedgerConfigError(msg)
        if name is None and len(names) > 1 and LOG_NAME in names and \
                EventLog(lmdb_home, LOG_NAME).head() == 0:
            # An empty lesson log beside others (made by a query of an older version) is
            # no log to choose: it was never written.
            names.remove(LOG_NAME)
        if not names and read_only:
            msg = f"{home} holds no log yet: nothing to read"
            raise LedgerConfigError(msg)
        # A writable home without a log gets an empty lesson log, as it always did.
        yield [EventLog(lmdb_home, n) for n in ([name] if name else names or [LOG_NAME])]


def _listing(names: list[str]) -> str:
    return (f"it holds {len(names)} log{'s' if len(names) != 1 else ''}: "
            f"{', '.join(names)}" if names else "it holds no log")


@contextmanager
def _lmdb_home(home: Path, *, read_only: bool) -> Iterator[LMDBHome]:
    if read_only:
        with lmdb_read_only(str(home)) as lmdb_home:
            yield lmdb_home
        return
    with beside_writers(str(home), sync=sync_setting()) as lmdb_home:
        yield lmdb_home


@contextmanager
def open_log(home: Path, *, create: bool = False, read_only: bool = False,
             name: str | None = None) -> Iterator[EventLog]:
    """Open one log in ``home``; with ``create``, make the home first (the lesson log).

    Without ``name``, the home's only log; a home holding several is refused, naming
    them (pass ``name``, on the command line ``--log NAME``). ``read_only`` is as for
    :func:`open_logs`.

    Raises:
        LedgerConfigError: there is no ledger at ``home`` and ``create`` is False; or
            ``create`` is True and ``home`` is a non-empty directory holding no ledger;
            or the log to read is not one (see above).
    """
    if not create:
        with open_logs(home, read_only=read_only, name=name) as logs:
            if len(logs) > 1:
                msg = (f"{home} holds {len(logs)} logs: {', '.join(log.name for log in logs)}; "
                       "choose one with --log NAME")
                raise LedgerConfigError(msg)
            yield logs[0]
        return
    marker = home / _MARKER
    check_home_file(home)
    if not is_home(home) and home.is_dir() and any(home.iterdir()):
        msg = (f"{home} is not empty and holds no ledger; pass an empty or new directory "
               "(a home holds only the ledger's files)")
        raise LedgerConfigError(msg)
    lmdb_home = acquire(str(home), sync=sync_setting())
    try:
        if not marker.exists():
            marker.write_text("lessonledger home: LMDB files, do not edit by hand\n")
        yield EventLog(lmdb_home, name or LOG_NAME)
    finally:
        release(lmdb_home)
