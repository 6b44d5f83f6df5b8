"""The vector index as a projection of the lesson view: exactly the active lessons.

The index follows the lesson view rather than the log: after each fold the keeper adds
the lessons that became active and removes those that stopped being (the view lists what
changed in ``changed``). It is saved beside the log (``<home>/vectors``) with the view
position it reflects, reopened memory-mapped, and rebuilt from the log when missing,
stale, built by another embedder, or saved before the last erasure the view folded (a
removal would leave an erased vector's bytes in the HNSW graph).

Processes that share a home take a lock file in the index directory: exclusive to save,
shared to reopen, so two closing processes never write one generation's files at once.
A keeper on a read-only home (``writable=False``) never saves and takes no lock: nobody
writes there.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID

import numpy as np
from lessonledger.ledger.events import LessonProposed, decode_event
from lessonledger.ledger.log import EventLog
from lessonledger.projections.embedder import Embedder, default_embedder
from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.vector_index import Item, VectorIndex, build, vectors_for

__all__ = ["IndexKeeper"]


class IndexKeeper:
    """Keeps a vector index equal to a lesson view's active lessons.

    Args:
        directory: where the index is saved.
        log: the log the view folds (the lessons' own vectors are read from it).
        view: the lesson view to follow.
        embedder: makes vectors from texts; the default embedder when omitted.
        fresh: build afresh instead of reopening what is saved.
        writable: False on a home nobody may write: never saves, takes no lock.
    """

    def __init__(self, directory: Path, log: EventLog, view: LessonView,
                 embedder: Embedder | None = None, *, fresh: bool = False,
                 writable: bool = True) -> None:
        self.embedder = embedder or default_embedder()
        self.directory, self._log, self.view = directory, log, view
        self.writable = writable
        #: Set when the view this index follows was replaced (an erasure was folded):
        #: it may hold erased vectors, so it is never saved again.
        self.retired = False
        #: The embedder's last error while lessons wait to be indexed ('' when none).
        self.degraded = ""
        #: The position the saved files hold this very index at (None: they do not):
        #: a save would write the same again, so none is made.
        self.saved_as: int | None = None
        opened = None
        if not fresh:
            with self._locked(exclusive=False):
                opened = VectorIndex.open(directory, self.embedder)
        # An index saved before the last erasure the view folded may hold erased vectors:
        # removing them would leave their bytes in the graph, so it is built afresh.
        if opened is None or not view.erased_at <= opened[1] <= view.position:
            self.index = self.rebuild()
        else:
            self.index = opened[0]
            self.saved_as = opened[1]
            # Whatever the view folded after the index was saved must be re-checked. Saved
            # at the view's position, it holds what the view's active lessons are there
            # (never saved while an embedding is pending), and what the view folds from
            # now on lands in ``changed``: re-checking all 50,000 lessons of a 2M-event
            # home took 0.3 s of its open.
            if opened[1] != view.position:
                view.changed.update(view.lessons)
        self.sync()

    def rebuild(self) -> VectorIndex:
        """Build the index of the view's active lessons from the log alone."""
        self.view.changed.clear()
        self.saved_as = None
        active = [r for r in self.view.briefs() if r.active]
        try:
            index = build(self.items(active), self.embedder)
        except Exception as error:  # a plug-in embedder may raise anything
            self._embedding_failed(error, [r.lesson_id for r in active])
            return VectorIndex(self.embedder.name, self.embedder.dim)
        self.degraded = ""
        return index

    def _embedding_failed(self, error: Exception, pending: Iterable[UUID]) -> None:
        """Keep what could not be indexed pending, to be embedded at the next sync.

        An embedder that fails (issue 12, rule 8) never fails a command: measured before,
        ``observe_outcome`` raised its ``ConnectionError`` after the events committed.
        """
        self.view.changed.update(pending)
        self.degraded = f"{type(error).__name__}: {error}"[:200]

    def items(self, rows: Iterable[LessonRow]) -> list[Item]:
        """Each lesson's id, text and own vector (read from its proposal), if it has one."""
        items: list[Item] = []
        for row in rows:
            vector = None
            if row.vector_at:
                record = self._log.read(row.vector_at, limit=1)[0]
                if record.payload is not None:
                    event = decode_event(record.payload)
                    if isinstance(event, LessonProposed):
                        vector = event.vector or None
            items.append((row.lesson_id, row.text, vector))
        return items

    def vectors(self, items: list[Item]) -> np.ndarray:
        """Each lesson's vector, decided exactly as a rebuild decides it."""
        return vectors_for(items, self.embedder)

    def sync(self) -> None:
        """Bring the index in line with the lessons that changed in the view."""
        changed, self.view.changed = self.view.changed, set()
        brief = self.view.brief  # the status and text: no lesson's history is read
        wanted = [brief(i) for i in changed if brief(i).active and i not in self.index]
        for lesson_id in changed:
            if not brief(lesson_id).active and lesson_id in self.index:
                self.index.remove(lesson_id)
                self.saved_as = None
        if wanted:
            self.saved_as = None
            items = self.items(wanted)
            try:
                self.index.upsert_many([i[0] for i in items], self.vectors(items))
            except Exception as error:  # a plug-in embedder may raise anything
                self._embedding_failed(error, [i[0] for i in items])
                return
        self.degraded = ""

    def save(self) -> None:
        """Save the index with the view position it reflects, unless a newer one is saved.

        A process behind the log never replaces what one ahead of it saved (which may be
        the index rebuilt after an erasure this process has not folded yet).
        """
        if self.retired or not self.writable:
            return
        self.sync()
        if self.degraded:
            return  # behind the view: saved with its position, it would pass for current
        with self._locked(exclusive=True):
            saved = VectorIndex.saved_position(self.directory)
            if saved is not None and saved == self.saved_as == self.view.position:
                return  # what is saved is this index at this position: nothing to write
            if saved is None or saved <= self.view.position:
                self.index.save(self.directory, self.view.position)
                self.saved_as = self.view.position

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the index directory's lock file: shared to read it, exclusive to write it."""
        if not self.writable:
            yield
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / "lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(f, fcntl.LOCK_UN)
