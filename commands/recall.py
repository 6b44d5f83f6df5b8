"""Recall and check: what an agent is shown, recorded as ``LessonRecalled``.

Both are queries with one write: what was put in front of the agent is recorded as a
``LessonRecalled`` event (:func:`recalled`), which moves the usage clock (never the
evidence clock) and makes those lessons *in play* for the session's outcome. The ledger
queues that record for the next commit rather than waiting for one of its own (see
:mod:`lessonledger.commands.deferred`). The ranking itself is pure and lives in
:mod:`lessonledger.projections.recall`; the vector index is a projection kept by
:mod:`lessonledger.projections.index_keeper`.

An embedder that fails (a plug-in model's server down, say) never fails a command or a
query (issue 12, rule 8): recall ranks by BM25 alone while the query cannot be embedded
(seed 004's fallback), and the keeper keeps the lessons it could not index pending.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path
from uuid import UUID

import msgspec
import numpy as np
from lessonledger.ledger.events import LessonRecalled
from lessonledger.ledger.ids import new_event_id
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ledger.submission import new_event
from lessonledger.projections.embedder import Embedder
from lessonledger.projections.index_keeper import IndexKeeper
from lessonledger.projections.lessons import LessonRow, LessonView, failure_key
from lessonledger.projections.recall import (
    Candidates,
    Recall,
    holding_here,
    one_line,
    overruled,
    rank,
    render,
)
from lessonledger.projections.vector_index import VectorIndex

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
    #: Lessons on this operation in doubt here: what they prefer failed here for a lasting
    #: reason since they were last confirmed here. Named, not counted for or against.
    doubted: list[UUID] = []


class Recaller:
    """Ranks a view's candidates for a query, over the vector index a keeper keeps.

    The index itself is a projection of the lesson view
    (:class:`~lessonledger.projections.index_keeper.IndexKeeper`); the recaller adds
    the per-project candidates it keeps between queries, and the ranking.
    """

    def __init__(self, directory: Path, log: EventLog, view: LessonView,
                 embedder: Embedder | None = None, *, fresh: bool = False,
                 writable: bool = True) -> None:
        self.keeper = IndexKeeper(directory, log, view, embedder, fresh=fresh,
                                  writable=writable)
        self.embedder, self.directory = self.keeper.embedder, directory
        # By project: the view generations they were gathered at, and the candidates.
        self._candidates: collections.OrderedDict[
            str, tuple[tuple[int, int], Candidates]] = collections.OrderedDict()

    @property
    def index(self) -> VectorIndex:
        """The vector index of the view's active lessons."""
        return self.keeper.index

    @property
    def retired(self) -> bool:
        """True once the view it follows was replaced: the index is never saved again."""
        return self.keeper.retired

    @retired.setter
    def retired(self, value: bool) -> None:
        self.keeper.retired = value

    @property
    def degraded(self) -> str:
        """The embedder's last error while lessons wait to be indexed ('' when none)."""
        return self.keeper.degraded

    @property
    def _view(self) -> LessonView:
        return self.keeper.view

    def sync(self) -> None:
        """Bring the index in line with the lessons that changed in the view."""
        self.keeper.sync()

    def save(self) -> None:
        """Save the index (see :meth:`IndexKeeper.save`)."""
        self.keeper.save()

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
                      else Candidates(_here(view, project), project))
        similarities = None
        if len(candidates) and query.strip():
            try:
                similarities = self._similarities(candidates, query, exact=exact)
            except Exception as error:  # a plug-in embedder may raise anything
                # BM25 alone ranks while the embedder is down.
                self.keeper.degraded = (self.keeper.degraded
                                        or f"{type(error).__name__}: {error}"[:200])
        order, ranked = rank(candidates, query, similarities, now or time.time_ns())
        return render(candidates, order, ranked, project, query)

    def _similarities(self, candidates: Candidates, query: str, *,
                      exact: bool) -> np.ndarray | None:
        vector = self.embedder.embed([query])[0]
        index = self.index
        if exact:
            index = VectorIndex(self.embedder.name, self.embedder.dim, dtype=self.index.dtype)
            index.upsert_many(candidates.ids,
                              self.keeper.vectors(self.keeper.items(candidates.rows)))
        return candidates.similarities(index, vector)

    def candidates(self, project: str) -> Candidates:
        """The project's candidates in the live view, gathered again only once changed."""
        view = self._view
        stamp = (view.generation(project), view.generation("global"))
        cached = self._candidates.get(project)
        if cached is not None and cached[0] == stamp:
            self._candidates.move_to_end(project)
            return cached[1]
        candidates = Candidates(_here(view, project), project)
        self._candidates[project] = (stamp, candidates)
        self._candidates.move_to_end(project)
        if len(self._candidates) > _MAX_CACHED:
            self._candidates.popitem(last=False)
        return candidates

    def check(self, view: LessonView, project: str, operation: str, target: str) -> Check:
        """What is on file for an operation on a target, as one line an agent can show."""
        rows = [r for r in view.active_for(project, history=False) if r.target == target]
        rows = holding_here(rows, view.observed(project))
        over = overruled(rows)
        beaten = [r for r in rows if r.lesson_id in over
                  and operation in (r.prefer_op, r.avoid_op)]
        doubted = [r for r in rows if project in r.doubted and r.lesson_id not in over
                   and operation in (r.prefer_op, r.avoid_op)]
        rows = [r for r in rows if r.lesson_id not in over and project not in r.doubted]
        supporting = [r for r in rows if operation in (r.prefer_op,) and r.kind != "avoid"]
        opposing = [r for r in rows if operation == r.avoid_op]
        failure = view.failures.get(failure_key(project, operation, target))
        parts = [f"{operation} on {target}:"]
        parts += [f"avoid ({_brief(r)})" for r in opposing[:2]]
        parts += [f"prefer ({_brief(r)})" for r in supporting[:2]]
        parts += [f"overruled here by this project's own lessons ({_brief(r)})"
                  for r in beaten[:1]]
        parts += [f"in doubt here, `{r.prefer_op}` failed since ({_brief(r)})"
                  for r in doubted[:1]]
        if failure is not None:
            last = one_line(failure.error)[:120] or "?"
            parts.append(f"failed {failure.count}x here before, last: {last}")
        if len(parts) == 1:
            parts.append("nothing on file")
        return Check(project, operation, target, [r.lesson_id for r in supporting],
                     [r.lesson_id for r in opposing], failure.count if failure else 0,
                     failure.error if failure else "", " ".join(parts),
                     [r.lesson_id for r in
                      opposing[:2] + supporting[:2] + beaten[:1] + doubted[:1]],
                     [r.lesson_id for r in beaten], [r.lesson_id for r in doubted])


def _here(view: LessonView, project: str) -> list[LessonRow]:
    """The project's candidates: its active lessons and the global ones that hold there."""
    return holding_here(view.active_for(project, history=False), view.observed(project))


def recalled(lesson_ids: list[UUID], project: str, query: str, session: str,
             actor: str, principal: str = "") -> NewEvent:
    """The record that these lessons were put in front of an agent, stamped now.

    ``occurred_at`` is the moment they were shown, whenever the record is committed: it
    is what the usage clock moves to.
    """
    eid = new_event_id()
    return new_event(
        LessonRecalled(lesson_ids=lesson_ids, project=project, query=query),
        stream=eid, version=0, event_id=eid, actor=actor, principal=principal,
        session=session, occurred_at=time.time_ns())


def _brief(row: LessonRow) -> str:
    label = "trial, " if row.status == "trial" else ""
    return f"{label}{row.confidence:.2f}: {one_line(row.text)[:120]}"
