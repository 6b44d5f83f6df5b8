"""Saved views: a view's whole state and the position it reflects, in one transaction.

Opening a ledger loads the saved state and folds only the events after it; dropping the
saved state and folding from position 0 rebuilds the same view.
"""

from __future__ import annotations

import lmdb
from lessonledger.ledger.lmdb_env import LMDBHome

__all__ = ["ViewStore"]


class ViewStore:
    """Keeps named view snapshots in a home's ``views`` database."""

    def __init__(self, home: LMDBHome) -> None:
        self._home = home
        self._env = home.env
        # Made by the first save: opening the store to load from writes nothing.
        self._db: lmdb._Database | None = home.db("views", create=False)

    def _tree(self, *, create: bool) -> bool:
        if self._db is None:
            self._db = self._home.db("views", create=create)
        return self._db is not None

    def save(self, name: str, position: int, state: bytes) -> bool:
        """Store ``state`` as of ``position`` unless a newer one is already stored.

        Returns True when stored. State and position go in one transaction, so a
        reader never sees one without the other.
        """
        key = name.encode()
        self._tree(create=True)
        with self._env.begin(write=True) as txn:
            current = txn.get(key, db=self._db)
            if current is not None and int.from_bytes(current[:8], "big") >= position:
                return False
            txn.put(key, position.to_bytes(8, "big") + state, db=self._db)
        return True

    def replace(self, name: str, position: int, state: bytes) -> None:
        """Store ``state`` as of ``position`` whatever is stored (a rebuild's result)."""
        self._tree(create=True)
        with self._env.begin(write=True) as txn:
            txn.put(name.encode(), position.to_bytes(8, "big") + state, db=self._db)

    def load(self, name: str) -> tuple[int, bytes] | None:
        """Return (position, state) of the saved view, or None."""
        if not self._tree(create=False):
            return None
        with self._env.begin() as txn:
            raw = txn.get(name.encode(), db=self._db)
        return (int.from_bytes(raw[:8], "big"), raw[8:]) if raw is not None else None

    def drop(self, name: str) -> None:
        """Forget the saved view; the next open folds from position 0."""
        if not self._tree(create=False):
            return
        with self._env.begin(write=True) as txn:
            txn.delete(name.encode(), db=self._db)
