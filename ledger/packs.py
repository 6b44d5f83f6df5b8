"""Packs: chunks a replica verified, stored whole until the log lays them out as rows.

A pull that does not fold (``clone --fold background``) stores the chunks it checked
(each a whole segment's envelopes, the run its id hashes, every body matched to its
commitment) whole, a commit's worth to a file: the run, the bodies and, for the pull's
last pack, the hub's chain link after it. The chain is computed once, here, as the rows
are laid out. Writing a few files instead of four LMDB rows an event (and the pages a
commit copies) is what makes such a clone about as fast as moving the bytes: measured,
storing the packs as LMDB values was a third of a 100k-event clone's time.

The files are ``<home>/<log>.packs/<first position>``, each written to a ``.partial``
name and renamed into place (fsynced first, and the directory after, on a durable
home), so a file there is whole; its writer holds a shared flock of the directory,
and the ``.partial`` files of killed writers go at the next writable open. The log's
rows (envelope and link, body, the id and stream index entries) are laid out from them,
in order, by :func:`unpack`, which every writable open of the home runs first
(:func:`~lessonledger.ledger.lmdb_env.acquire`): no reader ever sees a log with packs
pending, and the first process to open a fresh clone (the background fold it starts)
lays them out. Each transaction lays out one file, which is removed after it commits;
an unpacking killed midway continues where it stopped (the packs of a file the log
already holds are skipped). A read-only open of a home with packs pending is refused
(:func:`refuse_pending`).

A pack never holds an erasure's record or a body gap: a pull packs only chunks with
every body and no ``Erased`` record, so what an erasure takes is always in rows; and a
file's bytes leave with it (an unlinked file is no file of the home).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

import msgspec
from lessonledger.ledger.durable_files import PARTIAL, fsync_path
from lessonledger.ledger.errors import LedgerConfigError, LedgerCorruptError, ReplayMismatchError
from lessonledger.ledger.lmdb_env import LMDBHome
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.objects import split_envelopes

__all__ = ["Pack", "pending", "put_packs", "refuse_pending", "unpack"]

#: A pack file's name: its first position, zero-padded.
_DIGITS = 20


class Pack(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A checked chunk: where it starts, its envelopes as one run, its bodies, a link.

    ``link`` is the hub's head link when the pack is its pull's last, else empty.
    """

    start: int
    run: bytes
    bodies: list[bytes]
    link: bytes


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(list[Pack]).decode


def _directory(home: LMDBHome, name: str) -> str:
    return os.path.join(home.path, f"{name}.packs")


def put_packs(home: LMDBHome, packs: list[Pack], name: str = LOG_NAME) -> None:
    """Store ``packs`` (consecutive, the first just past what is stored) as one file."""
    directory = _directory(home, name)
    made = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"{packs[0].start:0{_DIGITS}d}")
    partial = f"{final}.{os.getpid()}{PARTIAL}"
    with _writers(directory, fcntl.LOCK_SH):
        with open(partial, "wb") as out:
            out.write(_encode(packs))
            if home.sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(partial, final)
    if home.sync:
        fsync_path(directory)
        if made:
            fsync_path(home.path)


@contextlib.contextmanager
def _writers(directory: str, how: int) -> Iterator[bool]:
    """Hold the directory's flock (``LOCK_SH`` a writer, ``LOCK_EX`` a sweep).

    A writer holds it shared from before its ``.partial`` file exists until it is
    renamed, so a sweep that takes it exclusively knows every ``.partial`` there is a
    killed writer's. Yields whether it was had (never, with ``LOCK_NB``, while taken).
    """
    fd = os.open(directory, os.O_RDONLY)  # the directory itself: no file of its own
    try:
        try:
            fcntl.flock(fd, how)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _files(home: LMDBHome, name: str) -> list[str]:
    """The whole pack files, in order: their names are zero-padded positions.

    Whatever else is there (``.partial`` files, anything put there by hand) is no pack.
    """
    try:
        with os.scandir(_directory(home, name)) as entries:
            return sorted(e.name for e in entries if len(e.name) == _DIGITS
                          and e.name.isdigit() and e.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return []


def pending(home: LMDBHome, name: str = LOG_NAME) -> bool:
    """True when the home holds packs not laid out yet."""
    return bool(_files(home, name))


def unpack(home: LMDBHome, name: str = LOG_NAME) -> int:
    """Lay out every pack as the log's rows, in order; return how many records.

    Each record is checked again as any import is (its position, its body against its
    commitment), its link computed, and the link after a pull's last pack checked
    against the hub's head link it was stored with. Then the ``.partial`` files of
    writers killed mid-write go (never renamed: never acknowledged).

    Raises:
        LedgerCorruptError: a pack does not follow the log (a damaged file).
    """
    directory = _directory(home, name)
    if not os.path.isdir(directory):
        return 0
    log = EventLog(home, name)
    done = 0
    while _files(home, name):
        # Under the log's write lock: two processes opening a fresh clone (its fold, a
        # pull run again) both unpack, one file after the other, never the same twice.
        with log.writing() as writing:
            files = _files(home, name)
            if not files:
                break
            path = os.path.join(directory, files[0])
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue  # the other one laid it out and removed it
            try:
                packs = _decode(data)
            except msgspec.DecodeError as e:
                raise LedgerCorruptError(int(files[0])) from e
            head = writing.head
            for pack in packs:
                if pack.start <= head:
                    continue  # laid out by an unpacking stopped before it removed the file
                rows = list(zip(split_envelopes(pack.run),
                                [body or None for body in pack.bodies], strict=True))
                try:
                    writing.import_records(rows, envelopes_checked=True)
                except ReplayMismatchError as e:  # checked on arrival: the file is damaged
                    raise LedgerCorruptError(e.position) from e
                if pack.link and writing.link != pack.link:
                    raise LedgerCorruptError(pack.start)
                done += len(rows)
        if not home.sync:
            # The packs may have been written durably (by a clone that fsyncs): the rows
            # they became are on disk before the file goes, whatever this open's setting.
            home.env.sync(True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    _remove_abandoned(directory)
    return done


def _remove_abandoned(directory: str) -> None:
    """Remove the ``.partial`` files of writers killed mid-write, unless one is writing.

    Never acknowledged, they may hold bodies an erasure later takes: none may stay.
    """
    with _writers(directory, fcntl.LOCK_EX | fcntl.LOCK_NB) as alone:
        if not alone:
            return  # a writer is at it; the next open sweeps
        for file in os.listdir(directory):
            if file.endswith(PARTIAL):
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    os.unlink(os.path.join(directory, file))


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
