"""Saved views: a view's state and the position it reflects, in one transaction.

Opening a ledger loads the saved state and folds only the events after it; dropping the
saved state and folding from position 0 rebuilds the same view.

A view is saved one of two ways, in the home's ``views`` tree:

- **whole**: under its name, the position (8 bytes) and the whole state;
- **as rows**: under its name the position alone, and its rows under ``name/`` + the
  row's key. A save writes only the rows that changed (and deletes the ones that went),
  and may run inside the transaction that appends the events the rows reflect.

Either way, a position already saved is never overwritten by an older one, so a process
behind never undoes one ahead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import cast

import lmdb
import msgspec
from lessonledger.ledger.lmdb_env import LMDBHome, let_go_of_pages
from lessonledger.projections.errors import ViewClosedError

__all__ = ["ROWS", "PinnedRows", "ViewStore"]

#: What :meth:`ViewStore.load` puts before a view saved as rows: its rows packed in one
#: value, which :meth:`ViewStore.save` unpacks again (so a saved view can be kept and put
#: back as one value, whichever way it is stored).
ROWS = b"\x00rows\x00"
_pack = msgspec.msgpack.Encoder().encode
_unpack = msgspec.msgpack.Decoder(list[tuple[bytes, bytes]]).decode


def _position(raw: bytes | memoryview | None) -> int:
    return -1 if raw is None else int.from_bytes(raw[:8], "big")


#: Rows put (or read on demand) between two drops of the pages of ``data.mdb`` mapped
#: in. A drop costs about 1.2 ms on a 2M-event home, against about 64 kB mapped per row
#: put at a random key: at 1,000 the saves at close were an agent's peak there (160 MB
#: of the file beside 230 of its own).
_LET_GO_ROWS = 250


class ViewStore:
    """Keeps named view snapshots in a home's ``views`` database."""

    def __init__(self, home: LMDBHome) -> None:
        self._home = home
        self._env = home.env
        # Made by the first save: opening the store to load from writes nothing.
        self._db: lmdb._Database | None = home.db("views", create=False)

    @property
    def home(self) -> LMDBHome:
        """The home the views are saved in."""
        return self._home

    def _tree(self, *, create: bool) -> bool:
        if self._db is None:
            self._db = self._home.db("views", create=create)
        return self._db is not None

    def prepare(self) -> None:
        """Make the store's tree now if it is missing, so a save can run in a caller's txn.

        LMDB cannot open a new tree while this thread holds the write lock.
        """
        self._tree(create=True)

    # -- whole values --------------------------------------------------------------------

    def save(self, name: str, position: int, state: bytes) -> bool:
        """Store ``state`` as of ``position`` unless a newer one is already stored.

        Returns True when stored. State and position go in one transaction, so a
        reader never sees one without the other. ``state`` as :meth:`load` gave it for a
        view saved as rows is stored as those rows again.
        """
        self._tree(create=True)
        with self._env.begin(write=True) as txn:
            if _position(txn.get(name.encode(), db=self._db)) >= position:
                return False
            self._put_whole(txn, name, position, state)
        return True

    def replace(self, name: str, position: int, state: bytes) -> None:
        """Store ``state`` as of ``position`` whatever is stored (a rebuild's result)."""
        self._tree(create=True)
        with self._env.begin(write=True) as txn:
            self._put_whole(txn, name, position, state)

    def _put_whole(self, txn: lmdb.Transaction, name: str, position: int,
                   state: bytes) -> None:
        if state.startswith(ROWS):
            self._put_rows(txn, name, position, _unpack(state[len(ROWS):]), fresh=True)
            return
        self._clear_rows(txn, name)
        txn.put(name.encode(), position.to_bytes(8, "big") + state, db=self._db)

    def load(self, name: str) -> tuple[int, bytes] | None:
        """Return (position, state) of the saved view, or None.

        For a view saved as rows, the state is :data:`ROWS` and its rows packed.
        """
        if not self._tree(create=False):
            return None
        with self._env.begin() as txn:
            raw = txn.get(name.encode(), db=self._db)
            if raw is None:
                return None
            if len(raw) > 8:
                return _position(raw), raw[8:]
            return _position(raw), ROWS + _pack(list(self._rows(txn, name)))

    def drop(self, name: str) -> None:
        """Forget the saved view; the next open folds from position 0."""
        if not self._tree(create=False):
            return
        with self._env.begin(write=True) as txn:
            txn.delete(name.encode(), db=self._db)
            self._clear_rows(txn, name)

    # -- rows ----------------------------------------------------------------------------

    def load_rows(self, name: str) -> tuple[int, list[tuple[bytes, bytes]]] | None:
        """(position, rows in key order) of a view saved as rows; None if it is not."""
        if not self._tree(create=False):
            return None
        with self._env.begin() as txn:
            raw = txn.get(name.encode(), db=self._db)
            if raw is None or len(raw) > 8:
                return None
            return _position(raw), list(self._rows(txn, name))

    def pin(self, name: str) -> PinnedRows | None:
        """A view saved as rows, to read row by row as of its saved position; None if not.

        Nothing is read but its position: a view loaded this way reads the rows it needs
        when it needs them (see :class:`PinnedRows`).
        """
        if not self._tree(create=False):
            return None
        txn = self._env.begin()
        raw = txn.get(name.encode(), db=self._db)
        if raw is None or len(raw) > 8:
            txn.abort()
            return None
        return PinnedRows(self, name, txn, _position(raw))

    def save_rows(self, name: str, position: int,
                  rows: Iterable[tuple[bytes, bytes | None]] | None, everything: Iterable[
                      tuple[bytes, bytes]] = (), *, txn: lmdb.Transaction | None = None,
                  force: bool = False) -> bool:
        """Store a view's changed ``rows`` (None deletes one) as of ``position``.

        ``rows`` None: the view's rows are ``everything``, replacing whatever was saved.
        Nothing is stored when a newer position is (unless ``force``: a rebuild).
        ``txn`` is a write transaction to save in (the one appending the events the rows
        reflect), else the store's own. Returns True when stored.
        """
        if txn is not None:
            if not self._tree(create=False):
                return False  # not prepared: saved by the next save of its own
            return self._save_rows(txn, name, position, rows, everything, force)
        self._tree(create=True)
        with self._env.begin(write=True) as own:
            return self._save_rows(own, name, position, rows, everything, force)

    def _save_rows(self, txn: lmdb.Transaction, name: str, position: int,
                   rows: Iterable[tuple[bytes, bytes | None]] | None,
                   everything: Iterable[tuple[bytes, bytes]], force: bool) -> bool:
        current = txn.get(name.encode(), db=self._db)  # bytes: the env has no buffers
        if not force and _position(current) >= position:
            return False
        if rows is None or current is None or len(current) > 8:
            # Changes alone stand only on the rows they change: over a view saved whole,
            # or none, the view's first save as rows is all of it.
            self._put_rows(txn, name, position, everything, fresh=True)
        else:
            self._put_rows(txn, name, position, rows, fresh=False)
        return True

    def _put_rows(self, txn: lmdb.Transaction, name: str, position: int,
                  rows: Iterable[tuple[bytes, bytes | None]], *, fresh: bool) -> None:
        prefix = name.encode() + b"/"
        if fresh:
            self._clear_rows(txn, name)
        for n, (key, value) in enumerate(rows, 1):
            if n % _LET_GO_ROWS == 0:
                # Each put reads its leaf and the branch pages above it (at random keys:
                # usage clocks, failures, histories), and the kernel maps 16 pages around
                # each page read: a save of a day's rows mapped 200 MB of data.mdb for a
                # moment, most of an agent's peak RSS on a 200,000-event home.
                let_go_of_pages(self._home.path)
            if value is None:
                txn.delete(prefix + key, db=self._db)
            else:
                txn.put(prefix + key, value, db=self._db)
        txn.put(name.encode(), position.to_bytes(8, "big"), db=self._db)

    def _rows(self, txn: lmdb.Transaction, name: str) -> Iterator[tuple[bytes, bytes]]:
        prefix = name.encode() + b"/"
        cursor = txn.cursor(db=self._db)
        if not cursor.set_range(prefix):
            return
        for key, value in cast(Iterator[tuple[bytes, bytes]], cursor.iternext()):
            if not key.startswith(prefix):
                return
            yield key[len(prefix):], value

    def _clear_rows(self, txn: lmdb.Transaction, name: str) -> None:
        prefix = name.encode() + b"/"
        cursor = txn.cursor(db=self._db)
        if not cursor.set_range(prefix):
            return
        while bytes(cursor.key()).startswith(prefix):
            if not cursor.delete():
                return


class PinnedRows:
    """One view's saved rows as of the position it was loaded at, read when asked.

    Opening a big home read every row of every view, most of which the first query never
    looks at. A view loaded from pinned rows reads a row only when it first needs it, from
    a read transaction held since it was loaded: what it reads is what was saved at its
    :attr:`position`, however many saves (of this process or another) came since. A row
    it has not read is one no event it folded since has touched, so the saved one is still
    right.

    A held read transaction keeps LMDB from reusing the pages later commits free, so it
    moves on (:meth:`renew`, at every fold) whenever the newest snapshot holds either
    what the view last saved or still what the held one does.

    Attributes:
        position: the position of the saved rows it reads.
    """

    def __init__(self, store: ViewStore, name: str, txn: lmdb.Transaction,
                 position: int) -> None:
        self._store, self._name = store, name
        self._prefix = name.encode() + b"/"
        self._txn: lmdb.Transaction | None = txn
        self.position = position
        #: Rows read since the pages of ``data.mdb`` were last let go.
        self._read = 0

    def _reading(self) -> lmdb.Transaction:
        if self._txn is None:
            raise ViewClosedError(self._name)
        return self._txn

    def get(self, key: bytes) -> bytes | None:
        """The row under ``key`` as saved at :attr:`position` (None: there was none)."""
        # bytes: the env has no buffers
        return cast(bytes | None, self._reading().get(self._prefix + key, db=self._store._db))

    def under(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every row whose key starts with ``prefix``, in key order (keys without it)."""
        txn, whole = self._reading(), self._prefix + prefix
        cursor = txn.cursor(db=self._store._db)
        found: list[tuple[bytes, bytes]] = []
        if not cursor.set_range(whole):
            return found
        cut = len(self._prefix)
        for key, value in cast(Iterator[tuple[bytes, bytes]], cursor.iternext()):
            if not key.startswith(whole):
                break
            found.append((key[cut:], value))
            self._read += 1
            if self._read >= _LET_GO_ROWS:
                # Histories read on demand (a first listing on a big home reads those of
                # every lesson it lists: chunks of 16 items, scattered) mapped 1 GB of
                # data.mdb at 1,000,000 events before the ledger next let go; so did one
                # long read (every lesson's row, at open: 150 MB at 400,000 events).
                # The rows are copies, and the cursor maps its page in again.
                self._read = 0
                let_go_of_pages(self._store.home.path)
        return found

    def renew(self, position: int) -> None:
        """Read from now on in the newest snapshot, if it serves as well as the one held.

        The caller passes the position its view was last saved at: rows saved then are
        what it holds, and rows it does not hold are unchanged since, so a snapshot of
        the store at that position serves it as well as the old one; so does one where
        the store still holds the rows this one reads (every save moves the position).
        Any other position (a save not committed yet, or another process's) keeps the
        old snapshot. Called at every fold, so a snapshot held keeps at most the pages
        of the commits since the last one from being reused.
        """
        if self._txn is None:
            return
        txn = self._store._env.begin()
        raw = txn.get(self._name.encode(), db=self._store._db)
        if raw is None or len(raw) > 8 or _position(raw) not in (position, self.position):
            txn.abort()
            return
        self._txn.abort()
        self._txn, self.position = txn, position

    def close(self) -> None:
        """Let the snapshot go; nothing more can be read."""
        if self._txn is not None:
            self._txn.abort()
            self._txn = None
