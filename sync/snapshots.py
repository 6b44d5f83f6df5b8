"""Snapshots: take one at the hub, list them, and check one out into a home of its own.

A snapshot is a ``SnapshotTaken`` event (so it travels with the log to every replica,
and its id is the same everywhere); the object view checks it against the log and moves
its ref by compare-and-swap. :func:`checkout` materialises the log as it stood at a
snapshot, with its views and index, into a new home: for disaster recovery or
inspection. The home it came from keeps its later history, so nothing is lost.

Erasure wins over every snapshot: a checkout copies only bodies the source still holds
and no erasure names, so each erasure made after the snapshot is applied again before
the new home serves anything. The positions such later erasures took are recorded in
the new home (``erased_later``), and ``verify`` reports them as erased, not as damage.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from hashlib import sha256
from pathlib import Path

import msgspec
from lessonledger.commands.ledger import Ledger
from lessonledger.ledger.durable_files import fsync_path
from lessonledger.ledger.envelope import GENESIS, decode_envelope
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.events import ERASED, AnyEvent, SnapshotTaken
from lessonledger.ledger.lmdb_env import (
    LMDBHome,
    acquire,
    beside_writers,
    on_read_only_filesystem,
    outside_home,
    release,
)
from lessonledger.ledger.lmdb_env import read_only as read_only_home
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.objects import SEGMENT_SIZE, SegmentHasher, merkle_root, snapshot_id
from lessonledger.projections.objects import ErasureRow, NamedSnapshot, ObjectView
from lessonledger.projections.runner import Runner
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import OBJECTS, object_view, registry
from lessonledger.sync.errors import SyncError, TamperedObjectError, UnknownSnapshotError
from lessonledger.sync.replica import fold_views
from lessonledger.sync.state import (
    SyncState,
    read_marker,
    stored_later_erasures,
    stored_positions,
)

__all__ = [
    "CheckedOut",
    "checkout",
    "erasures",
    "is_replica",
    "objects_of",
    "snapshots",
    "take_snapshot",
]

_IMPORT_BATCH = 2048


class CheckedOut(msgspec.Struct):
    """What a checkout made.

    Attributes:
        snapshot: the snapshot's id (hex).
        into: the new home.
        last: the last position it holds.
        bodies: bodies copied.
        erased_later: bodies left out because an erasure after the snapshot took them.
    """

    snapshot: str
    into: str
    last: int
    bodies: int
    erased_later: int


#: The characters of a snapshot id (hex), in either case.
_HEX = frozenset("0123456789abcdefABCDEF")


def take_snapshot(ledger: Ledger, name: str = "main", origin: str = "") -> NamedSnapshot:
    """Record a snapshot of the log as it stands now, on the ref ``name``.

    Raises:
        SyncError: ``name`` is empty, too long, or all hex digits (it would read as a
            snapshot's id or a prefix of one), or the ref moved meanwhile.
    """
    if not 0 < len(name) <= 200 or not name.isprintable():
        msg = f"snapshot name {name!r} must be 1 to 200 printable characters"
        raise SyncError(msg)
    if all(c in _HEX for c in name):
        msg = (f"snapshot name {name!r} is all hex digits, so `checkout` would take it "
               "for a snapshot's id; give a name with a letter past f or a '-', e.g. "
               f"'snap-{name[:12]}'")
        raise SyncError(msg)

    def decide(runner: Runner) -> Sequence[AnyEvent]:
        view = object_view(runner)
        previous = view.refs.get(name, b"")
        here = view.snapshot_here(parent=previous, created_at=time.time_ns(), origin=origin)
        return [SnapshotTaken(name=name, previous=previous, parent=here.parent, first=1,
                              last=here.last, root=here.root, link=here.link,
                              erasures=here.erasures, created_at=here.created_at,
                              origin=origin)]

    position = ledger.record(decide)[0]
    taken = [s for s in object_view(ledger.runner).snapshots if s.position == position]
    if not taken:
        msg = f"the snapshot at position {position} did not match the log; take it again"
        raise SyncError(msg)
    return taken[0]


@contextmanager
def objects_of(home: str | os.PathLike[str], *, read_only: bool = False) -> Iterator[
        tuple[LMDBHome, EventLog, ObjectView]]:
    """The home's log and its object view folded to the head (saving nothing)."""
    if read_only:
        with read_only_home(os.fspath(home)) as lmdb_home:
            yield _objects(lmdb_home)
        return
    with beside_writers(os.fspath(home)) as lmdb_home:
        yield _objects(lmdb_home)


def _objects(home: LMDBHome) -> tuple[LMDBHome, EventLog, ObjectView]:
    log = EventLog(home, LOG_NAME)
    runner = Runner([r for r in registry() if r.name == OBJECTS], ViewStore(home))
    runner.fold(log)
    return home, log, object_view(runner)


def snapshots(home: str | os.PathLike[str], *, read_only: bool = False) -> list[NamedSnapshot]:
    """Every snapshot a ref has named, oldest first."""
    with objects_of(home, read_only=read_only) as (_, _, view):
        return view.snapshots


def erasures(home: str | os.PathLike[str], *, read_only: bool = False) -> list[ErasureRow]:
    """Every erasure in the log, with the replicas that acknowledged applying it."""
    with objects_of(home, read_only=read_only) as (_, _, view):
        return view.erasures


def _verified(log: EventLog, snap: NamedSnapshot) -> None:
    """Recompute a snapshot from the log's envelopes; raise if it does not match."""
    ids: list[bytes] = []
    hasher = SegmentHasher()
    link, erased = bytes(GENESIS), 0
    for position, stored, _, _ in log.raw():
        if position > snap.snapshot.last:
            break
        hasher.add(stored)
        link = sha256(link + stored).digest()
        erased += decode_envelope(stored).type == ERASED
        if position % SEGMENT_SIZE == 0:
            ids.append(hasher.digest())
            hasher = SegmentHasher()
    if hasher.count:
        ids.append(hasher.digest())
    s = snap.snapshot
    if (merkle_root(ids), link, erased) != (s.root, s.link, s.erasures) \
            or snapshot_id(s) != snap.id:
        raise TamperedObjectError(kind="snapshot", address=snap.id,
                                  detail="the log no longer hashes to it")


def checkout(home: str | os.PathLike[str], which: str, into: str | os.PathLike[str], *,
             read_only: bool | None = None) -> CheckedOut:
    """Materialise ``home`` as it stood at snapshot ``which`` into the new home ``into``.

    Not a byte of ``home`` is written. With ``read_only`` (by itself on a read-only
    filesystem) it is opened without even a lock: for a backup no process writes to.

    Raises:
        UnknownSnapshotError: no snapshot is called or starts with ``which``.
        TamperedObjectError: the log no longer hashes to the snapshot.
        LedgerConfigError: ``into`` is a file, a directory that is not empty, or inside
            ``home``.
    """
    target = Path(into)
    if target.exists() and not target.is_dir():
        msg = f"{target} is not a directory; check out into a new or empty directory"
        raise LedgerConfigError(msg)
    # A checkout killed after its rename, before it removed its marker: whole, but not
    # known to be; it is made again (all of it comes from the source).
    unfinished = target.is_dir() and (target / _PARTIAL_MARKER).is_file()
    if target.exists() and any(target.iterdir()) and not unfinished:
        msg = f"{target} is not empty; check out into a new or empty directory"
        raise LedgerConfigError(msg)
    outside_home(target, home, "check out into a directory outside the home")
    if unfinished:
        shutil.rmtree(target)
    if read_only is None:
        read_only = on_read_only_filesystem(os.fspath(home))
    with objects_of(home, read_only=read_only) as (source_home, log, view):
        snap = view.find(which)
        if snap is None:
            raise UnknownSnapshotError(which)
        _verified(log, snap)
        last = snap.snapshot.last
        tombstones = view.tombstones
        withheld = {p for p in stored_positions(source_home, "withheld") if p <= last}
        # The source may itself be a checkout, or a replica of one: what it lacks
        # because an erasure later than its log took it stays excused here too.
        inherited = {p for p in stored_positions(source_home, "erased_later") if p <= last}
        # And what those erasures named: a hub restored from the checkout refuses that
        # content pushed back by a replica that made it before the erasure.
        named_later = [(row.what, row.subject, row.position) for row in view.erasures
                       if row.position > last] + stored_later_erasures(source_home)
        # Built beside the target and renamed into place once whole: a checkout killed
        # midway leaves no home that looks like the snapshot's (a prefix of the log
        # verifies), and the next checkout clears what it left.
        whole = target.resolve()
        partial = _partial(whole)
        try:
            copied, later_erased = _build(partial, home, target, log, last, tombstones,
                                          withheld, inherited, named_later)
            os.replace(partial, whole)  # over an empty directory too
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        fsync_path(whole.parent)
        (whole / _PARTIAL_MARKER).unlink()
    return CheckedOut(snap.id.hex(), str(target), last, copied, later_erased)


def _build(partial: Path, home: str | os.PathLike[str], target: Path, log: EventLog,
           last: int, tombstones: frozenset[int], withheld: set[int],
           inherited: set[int], named_later: list[tuple[str, str, int]]
           ) -> tuple[int, int]:
    """Write the checked-out home into ``partial``: (bodies copied, bodies erased later)."""
    partial.mkdir(parents=True)
    (partial / _PARTIAL_MARKER).write_text(f"a checkout of {home} into {target}\n")
    (partial / "LESSONLEDGER").write_text("lessonledger home: LMDB files, do not edit by hand\n")
    new = acquire(str(partial))
    try:
        copied, later = _copy(log, EventLog(new, LOG_NAME), last, tombstones)
        erased_within = _erased_within(new)
        new_state = SyncState(new)
        with new.env.begin(write=True) as txn:
            new_state.add_positions(txn, "erased_later", (later | inherited) - erased_within)
            new_state.add_positions(txn, "withheld", withheld - later)
            new_state.add_later_erasures(txn, named_later)
        fold_views(new)
    finally:
        release(new)
    fsync_path(partial)
    return copied, len(later - erased_within)


#: The file that marks a checkout under way in its partial directory.
_PARTIAL_MARKER = "CHECKOUT-UNDER-WAY"


def _partial(target: Path) -> Path:
    """Where a checkout into ``target`` (resolved) is built: cleared if a killed one left it."""
    partial = target.with_name(f".{target.name}.checkout-under-way")
    if partial.exists():
        if not (partial / _PARTIAL_MARKER).is_file():
            msg = (f"{partial} is in the way of a checkout into {target}; move it "
                   "elsewhere and retry")
            raise LedgerConfigError(msg)
        shutil.rmtree(partial)
    return partial


def _copy(source: EventLog, target: EventLog, last: int,
          tombstones: frozenset[int]) -> tuple[int, set[int]]:
    """Import records 1..``last``, leaving out every body an erasure named."""
    rows: list[tuple[bytes, bytes | None]] = []
    copied = 0
    gone: set[int] = set()
    for position, stored, body, _ in source.raw():
        if position > last:
            break
        if position in tombstones or body is None:
            if position in tombstones:
                gone.add(position)
            body = None
        else:
            copied += 1
        rows.append((stored, body))
        if len(rows) == _IMPORT_BATCH:
            with target.writing() as writing:
                writing.import_records(rows)
            rows = []
    with target.writing() as writing:
        writing.import_records(rows)
    return copied, gone


def _erased_within(home: LMDBHome) -> set[int]:
    """Positions the checked-out log's own erasures name (verify knows those)."""
    view = _objects(home)[2]
    return set(view.tombstones)


def is_replica(home: str | os.PathLike[str]) -> bool:
    """True when ``home`` was cloned from a hub."""
    return read_marker(home) is not None
