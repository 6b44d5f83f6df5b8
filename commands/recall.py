"""Recall and check: what an agent is shown, recorded as ``LessonRecalled``.

Both are queries with one write: what was put in front of the agent is recorded as a
``LessonRecalled`` event (:func:`recalled`), which moves the usage clock (never the
evidence clock) and makes those lessons *in play* for the session's outcome. The ledger
queues that record for the next commit rather than waiting for one of its own (see
:mod:`lessonledger.commands.deferred`). The ranking itself is pure and lives in
:mod:`lessonledger.projections.recall`.

The vector index is kept here as a projection of the lesson view: it holds exactly the
active lessons, is saved with the position it reflects, reopened memory-mapped, and
rebuilt from the log when missing, stale or built by another embedder. Processes that
share a home take a lock file in the index directory: exclusive to save, shared to
reopen, so two closing processes never write one generation's files at once.

An embedder that fails (a plug-in model's server down, say) never fails a command or a
query (issue 12, rule 8). Measured before: ``observe_outcome`` raised the embedder's
``ConnectionError`` after its events were committed, so the caller could not tell
whether it was written, and ``recall`` raised too. Now a command returns its receipt;
the lessons the index could not take stay pending and are embedded again at the next
sync; recall ranks by BM25 alone while the query cannot be embedded (seed 004's
fallback); and an index behind the view is never saved as if it were current.
"""

from __future__ import annotations

import collections
import fcntl
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID

import msgspec
import numpy as np
from lessonledger.ledger.events import LessonProposed, LessonRecalled, decode_event
from lessonledger.ledger.ids import new_event_id
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ledger.submission import new_event
from lessonledger.projections.embedder import Embedder, default_embedder
from lessonledger.projections.lessons import LessonRow, LessonView, failure_key
from lessonledger.projections.recall import (
    Candidates,
    Recall,
    one_line,
    overruled,
    rank,
    render,
)
from lessonledger.projections.vector_index import Item, VectorIndex, build, vectors_for

__all__ = ["Check", "Recaller", "recalled"]

#: Projects whose candidates are kept between queries (a few tens of kB each).
_MAX_CACHED = 1024


class Check(msgspec.Struct, frozen=True):
    """What is on file for one operation on one target, and the line to show."""

    project: str
    operation: str
    target: str
    supporting: list[UUID]
    opposing: list[UUID]
    failures: int
    last_error: str
    line: str
    #: The lessons the line names (at most two each way): what is recorded as shown.
    shown: list[UUID] = []
    #: Global lessons on this operation that the project's own lessons contradict: named,
    #: but not counted for or against (see :func:`overruled`).
    overruled: list[UUID] = []


class Recaller:
    """Ranks candidates, and keeps them and the vector index in step with the lesson view."""

    def __init__(self, directory: Path, log: EventLog, view: LessonView,
                 embedder: Embedder | None = None, *, fresh: bool = False) -> None:
        self.embedder = embedder or default_embedder()
        self.directory, self._log, self._view = directory, log, view
        #: Set when the view this index follows was replaced (an erasure was folded):
        #: it may hold erased vectors, so it is never saved again.
        self.retired = False
        #: The embedder's last error while lessons wait to be indexed ('' when none).
        self.degraded = ""
        # By project: the view generations they were gathered at, and the candidates.
        self._candidates: collections.OrderedDict[
            str, tuple[tuple[int, int], Candidates]] = collections.OrderedDict()
        opened = None
        if not fresh:
            with _locked(directory, exclusive=False):
                opened = VectorIndex.open(directory, self.embedder)
        # An index saved before the last erasure the view folded may hold erased vectors:
        # removing them would leave their bytes in the graph, so it is built afresh.
        if opened is None or not view.erased_at <= opened[1] <= view.position:
            self.index = self.rebuild()
        else:
            self.index = opened[0]
            # Whatever the view folded after the index was saved must be re-checked.
            view.changed.update(view.lessons)
        self.sync()

    # -- the index as a projection ------------------------------------------------------

    def rebuild(self) -> VectorIndex:
        """Build the index of the active lessons from the log alone."""
        self._view.changed.clear()
        active = [r for r in self._view.lessons.values() if r.active]
        try:
            index = build(self._items(active), self.embedder)
        except Exception as error:  # a plug-in embedder may raise anything
            self._embedding_failed(error, [r.lesson_id for r in active])
            return VectorIndex(self.embedder.name, self.embedder.dim)
        self.degraded = ""
        return index

    def _embedding_failed(self, error: Exception, pending: Iterable[UUID]) -> None:
        """Keep what could not be indexed pending, to be embedded at the next sync."""
        self._view.changed.update(pending)
        self.degraded = f"{type(error).__name__}: {error}"[:200]

    def _items(self, rows: Iterable[LessonRow]) -> list[Item]:
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

    def sync(self) -> None:
        """Bring the index in line with the lessons that changed in the view."""
        changed, self._view.changed = self._view.changed, set()
        lessons = self._view.lessons
        wanted = [lessons[i] for i in changed if lessons[i].active and i not in self.index]
        for lesson_id in changed:
            if not lessons[lesson_id].active and lesson_id in self.index:
                self.index.remove(lesson_id)
        if wanted:
            items = self._items(wanted)
            try:
                self.index.upsert_many([i[0] for i in items], self._vectors(items))
            except Exception as error:  # a plug-in embedder may raise anything
                self._embedding_failed(error, [i[0] for i in items])
                return
        self.degraded = ""

    def _vectors(self, items: list[Item]) -> np.ndarray:
        """Each lesson's vector, decided exactly as a rebuild decides it."""
        return vectors_for(items, self.embedder)

    def save(self) -> None:
        """Save the index with the view position it reflects, unless a newer one is saved.

        A process behind the log never replaces what one ahead of it saved (which may be
        the index rebuilt after an erasure this process has not folded yet).
        """
        if self.retired:
            return
        self.sync()
        if self.degraded:
            return  # behind the view: saved with its position, it would pass for current
        with _locked(self.directory, exclusive=True):
            saved = VectorIndex.saved_position(self.directory)
            if saved is None or saved <= self._view.position:
                self.index.save(self.directory, self._view.position)

    # -- queries ------------------------------------------------------------------------

    def rank(self, view: LessonView, project: str, query: str, now: int | None = None, *,
             exact: bool = False) -> Recall:
        """Rank a project's candidates for a query in ``view``; writes nothing.

        With ``exact`` the candidates' vectors are made from the log on the spot instead
        of read from the index, which holds only today's active lessons. They are stored
        at the index's precision and scored by the same code, so an answer as of the
        head equals the live one, figure for figure.
        """
        candidates = (self.candidates(project) if view is self._view
                      else Candidates(view.active_for(project)))
        similarities = None
        if len(candidates) and query.strip():
            try:
                similarities = self._similarities(candidates, query, exact=exact)
            except Exception as error:  # a plug-in embedder may raise anything
                # BM25 alone ranks while the embedder is down.
                self.degraded = self.degraded or f"{type(error).__name__}: {error}"[:200]
        order, ranked = rank(candidates, query, similarities, now or time.time_ns())
        return render(candidates, order, ranked, project, query)

    def _similarities(self, candidates: Candidates, query: str, *,
                      exact: bool) -> np.ndarray | None:
        vector = self.embedder.embed([query])[0]
        index = self.index
        if exact:
            index = VectorIndex(self.embedder.name, self.embedder.dim, dtype=self.index.dtype)
            index.upsert_many(candidates.ids, self._vectors(self._items(candidates.rows)))
        return candidates.similarities(index, vector)

    def candidates(self, project: str) -> Candidates:
        """The project's candidates in the live view, gathered again only once changed."""
        view = self._view
        stamp = (view.generation(project), view.generation("global"))
        cached = self._candidates.get(project)
        if cached is not None and cached[0] == stamp:
            self._candidates.move_to_end(project)
            return cached[1]
        candidates = Candidates(view.active_for(project))
        self._candidates[project] = (stamp, candidates)
        self._candidates.move_to_end(project)
        if len(self._candidates) > _MAX_CACHED:
            self._candidates.popitem(last=False)
        return candidates

    def check(self, view: LessonView, project: str, operation: str, target: str) -> Check:
        """What is on file for an operation on a target, as one line an agent can show."""
        rows = [r for r in view.active_for(project) if r.target == target]
        over = overruled(rows)
        beaten = [r for r in rows if r.lesson_id in over
                  and operation in (r.prefer_op, r.avoid_op)]
        rows = [r for r in rows if r.lesson_id not in over]
        supporting = [r for r in rows if operation in (r.prefer_op,) and r.kind != "avoid"]
        opposing = [r for r in rows if operation == r.avoid_op]
        failure = view.failures.get(failure_key(project, operation, target))
        parts = [f"{operation} on {target}:"]
        parts += [f"avoid ({_brief(r)})" for r in opposing[:2]]
        parts += [f"prefer ({_brief(r)})" for r in supporting[:2]]
        parts += [f"overruled here by this project's own lessons ({_brief(r)})"
                  for r in beaten[:1]]
        if failure is not None:
            last = one_line(failure.error)[:120] or "?"
            parts.append(f"failed {failure.count}x here before, last: {last}")
        if len(parts) == 1:
            parts.append("nothing on file")
        return Check(project, operation, target, [r.lesson_id for r in supporting],
                     [r.lesson_id for r in opposing], failure.count if failure else 0,
                     failure.error if failure else "", " ".join(parts),
                     [r.lesson_id for r in opposing[:2] + supporting[:2] + beaten[:1]],
                     [r.lesson_id for r in beaten])


def recalled(lesson_ids: list[UUID], project: str, query: str, session: str,
             actor: str, principal: str = "") -> NewEvent:
    """The record that these lessons were put in front of an agent, stamped now.

    ``occurred_at`` is the moment they were shown, whenever the record is committed: it
    is what the usage clock moves to.
    """
    eid = new_event_id()
    return new_event(
        LessonRecalled(lesson_ids=lesson_ids, project=project, query=query[:8192]),
        stream=eid, version=0, event_id=eid, actor=actor, principal=principal,
        session=session, occurred_at=time.time_ns())


def _brief(row: LessonRow) -> str:
    label = "trial, " if row.status == "trial" else ""
    return f"{label}{row.confidence:.2f}: {one_line(row.text)[:120]}"


@contextmanager
def _locked(directory: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold the index directory's lock file: shared to read it, exclusive to write it."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
