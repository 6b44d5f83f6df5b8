"""The read side: every query, answered from the runner's views, never the write lock.

A query folds what others appended since it last looked (no policy runs: commands and
:meth:`Ledger.catch_up` react, queries only read) and answers from the views and the
vector index. What it showed an agent is recorded as a ``LessonRecalled`` event, queued
for a later write (:mod:`lessonledger.commands.deferred`); a query that reads usage
clocks first gives that write a moment (:data:`USAGE_WAIT`) to land, and answers without
it if another process holds the write lock longer. On a home nobody may write (a backup,
a read-only mount) nothing is recorded, and :attr:`ReadSide.records` says so.

:class:`Reader` is the read side alone, for a process that only asks: the CLI's queries
and a query server. :class:`~lessonledger.commands.ledger.Ledger` is the read side plus
the write side.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from uuid import UUID

import msgspec
from lessonledger.commands.audit import Why, explain
from lessonledger.commands.deferred import (
    DEFAULT_DELAY,
    DeferredRecords,
    HeldRecords,
    commit_held,
)
from lessonledger.commands.errors import (
    InvalidCommandError,
    LessonNotFoundError,
    UnknownLessonError,
)
from lessonledger.commands.messages import Label, checked_project, checked_text, refuse_blank
from lessonledger.commands.recall import Check, Recaller, recalled
from lessonledger.commands.refusals import refuse_query
from lessonledger.ledger.errors import LedgerClosedError
from lessonledger.ledger.events import Erased, Key, Text, decode_event
from lessonledger.ledger.lmdb_env import (
    LMDBHome,
    acquire,
    beside_writers,
    on_read_only_filesystem,
    read_here,
    release,
)
from lessonledger.ledger.lmdb_env import read_only as read_only_home
from lessonledger.ledger.log import LOG_NAME, EventLog, NewEvent
from lessonledger.projections.access import Grant
from lessonledger.projections.embedder import Embedder
from lessonledger.projections.lesson_rows import snapshot
from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.outcome_stats import ProjectStats
from lessonledger.projections.recall import Recall, holding_here
from lessonledger.projections.rules import Rules
from lessonledger.projections.runner import Runner
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import (
    VIEW_NAME,
    access_view,
    audit_index,
    delta_view,
    lesson_view,
    outcome_stats,
    registry,
)

__all__ = ["USAGE_WAIT", "ReadSide", "Reader", "open_reader"]

#: Seconds a query that reads usage clocks waits for this process's queued recall
#: records to commit: in the usual case they land in a millisecond and the answer counts
#: them; while another process holds the write lock, the answer goes without them.
USAGE_WAIT = 0.05


class HomeLock:
    """The lock every query and command of a ledger or reader takes; closed, it refuses.

    Without it a method called after ``close`` raised LMDB's own error on the closed
    environment. The check is made once the lock is held, so a thread that was waiting
    while another closed the ledger refuses too, rather than go on into a closed home.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        #: The home it had open, once closed (None while open).
        self.closed: str | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        if self.closed is not None:
            self._lock.release()
            raise LedgerClosedError(self.closed)

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class ReadSide:
    """Queries over a runner's views and a recaller's index; folds, never reacts.

    Subclasses set ``log``, ``runner``, ``recaller``, ``_records`` (None when nothing
    may be recorded), ``_lock`` and ``_erasures`` before the first query; ``close``
    marks ``_lock`` closed.
    """

    #: The home's directory (its real path).
    home: str
    log: EventLog
    runner: Runner
    recaller: Recaller
    _records: DeferredRecords | HeldRecords | None
    _lock: HomeLock
    _erasures: int

    @property
    def view(self) -> LessonView:
        """The lesson view, folded to where this process has read the log."""
        return lesson_view(self.runner)

    @property
    def records(self) -> bool:
        """True when queries record what they showed (False on a read-only home)."""
        return self._records is not None

    def _read(self, *, usage: bool = False) -> LessonView:
        """Fold what was appended since, without reacting; the view to answer from.

        With ``usage`` (the answer shows usage clocks), this process's queued recall
        records get :data:`USAGE_WAIT` seconds to commit first.
        """
        with self._lock:
            if usage and self._records is not None:
                self._records.drain(USAGE_WAIT)
            self.runner.fold(self.log)
            self._follow()
            return self.view

    def _follow(self) -> None:
        """Keep the index in step with the view; after an erasure, build it afresh."""
        if self.runner.erasures != self._erasures:
            self._erasures = self.runner.erasures
            # The old index may hold erased vectors: removing them would leave their
            # bytes in the graph, so it is never used or saved again.
            self.recaller = Recaller(self.recaller.directory, self.log, self.view,
                                     self.recaller.embedder, fresh=True,
                                     writable=self.recaller.keeper.writable)
            self._refolded()
        else:
            self.recaller.sync()

    def _refolded(self) -> None:
        """Called when :meth:`_follow` met an erasure; the write side saves afresh."""

    def _record(self, event: NewEvent) -> None:
        if self._records is not None:
            self._records.add(event)

    def lessons(self, project: str, *, session: str = "", record: bool = True,
                actor: str = "agent", principal: str = "") -> list[LessonRow]:
        """The active lessons of a project and the global ones, strongest first.

        With ``record`` (the default for agents) the ledger notes that they were put in
        front of the agent: the usage clock moves, and they are in play for attribution
        of this session's outcome. A person browsing passes ``record=False``. The rows
        are copies as of now (so are :meth:`lesson`'s and :meth:`history`'s): they do not
        change as the ledger moves on, and changing them does not change the ledger.
        Their usage clocks count every earlier recall, not this listing's own. The record
        carries ``principal`` and ``session``, so erasing either takes it.
        """
        project = checked_project(project)
        _checked_stamp(session, actor, principal)
        if record:
            refuse_query(session=session, actor=actor, principal=principal)
        with self._lock:
            view = self._read(usage=True)
            rows = holding_here(view.active_for(project), view.observed(project))
            if record and rows:
                self._record(recalled([r.lesson_id for r in rows][:1000], project, "",
                                           session, actor, principal))
            return snapshot(rows)

    def recall(self, project: str, query: str, *, session: str = "", record: bool = True,
               actor: str = "agent", principal: str = "", as_of: int | None = None) -> Recall:
        """The lessons to put in an agent's prompt for a project and a query.

        At most 5 lessons in at most 300 tokens, ranked as
        :mod:`lessonledger.projections.recall` documents. With ``record`` the ledger
        notes what was shown (usage clock; in play for this session). ``as_of`` (a log
        position) answers as the ledger stood then, records nothing, and scores vectors
        exactly from the texts. The record carries the query, ``principal`` and ``session``.
        """
        project = checked_project(project)
        checked_text(query, "$.query", Text)
        _checked_stamp(session, actor, principal)
        if record and as_of is None:
            refuse_query(query=query, session=session, actor=actor, principal=principal)
        with self._lock:
            self._read()
            if as_of is not None:
                return self.recaller.rank(self.view_at(as_of), project, query,
                                          now=self.time_at(as_of), exact=True)
            result = self.recaller.rank(self.view, project, query)
            if record and result.lessons:
                self._record(recalled([r.lesson_id for r in result.lessons], project,
                                      query, session, actor, principal))
            return result

    def check(self, project: str, operation: str, target: str, *, session: str = "",
              record: bool = True, actor: str = "agent", principal: str = "",
              as_of: int | None = None) -> Check:
        """What is on file for an operation on a target: one line to show before acting.

        Raises:
            InvalidCommandError: the project is no digest, the operation or the target
                is empty or over 512 characters, or a text is not Unicode.
        """
        project = checked_project(project)
        checked_text(operation, "$.operation", Key)
        checked_text(target, "$.target", Key)
        _checked_stamp(session, actor, principal)
        if record and as_of is None:
            refuse_query(operation=operation, target=target, session=session, actor=actor,
                         principal=principal)
            # The record's query joins them: that must pass the screen as each part does.
            refuse_query(query=f"check {operation} {target}")
        with self._lock:
            self._read()
            view = self.view if as_of is None else self.view_at(as_of)
            result = self.recaller.check(view, project, operation, target)
            if record and as_of is None and result.shown:
                self._record(recalled(result.shown, project,
                                           f"check {operation} {target}", session, actor,
                                           principal))
            return result

    def why(self, lesson_id: UUID, *, project: str | None = None, query: str | None = None,
            as_of: int | None = None) -> Why:
        """The events that made a lesson what it is, and why it was or was not recalled.

        The recall verdict needs a project (and a query). ``as_of`` answers as the ledger
        stood at that position. The lesson row is a copy, as :meth:`lesson`'s is.

        Raises:
            UnknownLessonError: no such lesson (at ``as_of``).
            InvalidCommandError: the project is no digest, the query no text, or
                ``as_of`` no position of the log.
        """
        if project is not None:
            project = checked_project(project)
        if query is not None:
            checked_text(query, "$.query", Text)
        with self._lock:
            self._read(usage=True)
            view = self.view if as_of is None else self.view_at(as_of)
            now = None if as_of is None else self.time_at(as_of)
            story = explain(view, self.log, self.recaller, lesson_id, project=project,
                            query=query, now=now)
            return msgspec.structs.replace(story, lesson=snapshot([story.lesson])[0])

    def catalogue(self, project: str | None = None, *, everything: bool = False
                  ) -> list[LessonRow]:
        """Lessons for a person to browse (records nothing): active first, strongest first.

        Active lessons and claims; with ``everything`` superseded and retired ones too.
        With ``project``, only that project's and the global ones.

        Raises:
            InvalidCommandError: ``project`` is neither a project digest nor ``global``.
        """
        if project is not None:
            project = checked_project(project)
        with self._lock:
            rows = sorted(self._read(usage=True).lessons.values(),
                          key=lambda r: (not r.active, -r.confidence, str(r.lesson_id)))
            return snapshot([r for r in rows if (everything or r.active or r.status == "claimed")
                             and (project is None or r.scope in (project, "global"))])

    def find_lesson(self, text: str) -> UUID:
        """A lesson's id from its full form or a unique prefix of it.

        Raises:
            LessonNotFoundError: no lesson has such an id (saying so when an erasure took
                it), or more than one does.
        """
        if not text.strip():
            # Every id starts with the empty prefix: a lone lesson would be the answer,
            # and `erase --lesson ""` would take it.
            msg = (f"{text!r} is no lesson id: give the id or a prefix of it (see "
                   "`lessonledger lessons list --all`)")
            raise LessonNotFoundError(text, msg)
        with self._lock:
            prefix = text.lower()
            matches = [i for i in self._read().lessons if str(i).startswith(prefix)]
            erasures = [e for e in audit_index(self.runner).erasures
                        if e.what == "lesson" and e.subject.startswith(prefix)]
        # Erased lessons have left the view, but a prefix one of them also starts with
        # names two lessons: a rerun of `erase` by it must not take a newer one for it.
        erased = {e.subject for e in erasures} - {str(i) for i in matches}
        if len(matches) == 1 and not erased:
            return matches[0]
        if len(matches) == 1:
            msg = (f"{text!r} matches a lesson and an erased one; give more of the id "
                   "(`lessonledger erasures` lists what was erased)")
            raise LessonNotFoundError(text, msg)
        if matches:
            msg = f"{text!r} matches {len(matches)} lessons; give more of the id"
            raise LessonNotFoundError(text, msg)
        if not erasures:
            msg = f"no lesson id starts with {text!r}; see `lessonledger lessons list --all`"
            raise LessonNotFoundError(text, msg)
        record = self.log.read(erasures[-1].position, limit=1)[0]
        erasure = decode_event(record.payload or b"")
        assert isinstance(erasure, Erased), "an erasure's records are never erased"
        msg = (f"lesson {erasure.subject} was erased at position {record.envelope.position}"
               f" by {erasure.by}" + (f" ({erasure.reason})" if erasure.reason else ""))
        # Named only when the text names one erased lesson: `erase` takes it as its
        # subject (to finish a killed run), and a prefix of two must not pick one.
        raise LessonNotFoundError(text, msg, UUID(erasure.subject) if len(erased) == 1 else None)

    def outcome_stats(self, project: str) -> ProjectStats:
        """A project's outcomes: how many, how many passed, what failed on which target."""
        project = checked_project(project)
        with self._lock:
            self._read()
            stats = outcome_stats(self.runner).project(project)
            return msgspec.msgpack.decode(msgspec.msgpack.encode(stats), type=ProjectStats)

    def fold_to_head(self) -> int:
        """Fold what was appended since into the views, reacting to nothing; the position.

        What a query does before it reads a view (the skill queries do through here):
        it never takes the write lock and never runs a policy.
        """
        with self._lock:
            self._read()
            return self.runner.position

    def grant_for(self, public_key: str) -> Grant | None:
        """A client key's current grant (Z85 public key), or None: it may not connect.

        Folds first, so a grant or a revocation committed by any process counts at once.
        """
        with self._lock:
            self._read()
            return access_view(self.runner).grant_for(public_key)

    def grants(self) -> list[Grant]:
        """Every current grant, by key name."""
        with self._lock:
            self._read()
            return access_view(self.runner).grants()

    def allowed_keys(self) -> frozenset[str]:
        """The public keys (Z85) that may connect now."""
        with self._lock:
            self._read()
            return access_view(self.runner).allowed_keys()

    def delta_scope(self, delta_id: UUID) -> str | None:
        """The scope a skill delta was proposed in, or None when no delta has that id.

        As the process has folded the log: a body that needs it is sent after its delta.
        """
        with self._lock:
            row = delta_view(self.runner).deltas.get(delta_id)
            return None if row is None else row.scope

    def head(self) -> int:
        """The last position in the log."""
        with self._lock:
            return self.log.head()

    def _position(self, position: object, field: str = "$.as_of") -> int:
        """A log position a caller gave, refused unless it is one the log has (or 0)."""
        head = self.head()
        if isinstance(position, bool) or not isinstance(position, int) \
                or not 0 <= position <= head:
            msg = (f"{field} must be a log position from 0 to the head ({head}), not "
                   f"{position!r}")
            raise InvalidCommandError(msg, field)
        return position

    def view_at(self, position: int) -> LessonView:
        """The lesson view as it stood at ``position``: a fresh fold, no policies run."""
        position = self._position(position)
        return lesson_view(self.runner.fresh(self.log, position, [VIEW_NAME]))

    def time_at(self, position: int) -> int:
        """The ledger time (ns) of the event at ``position``."""
        position = self._position(position, "$.position")
        with self._lock:
            records = self.log.read(max(position, 1), limit=1)
        return records[0].envelope.recorded_at if records else time.time_ns()

    def position_at(self, when_ns: int) -> int:
        """The last position recorded at or before a time (0 when none)."""
        if isinstance(when_ns, bool) or not isinstance(when_ns, int):
            msg = f"$.when must be a time in nanoseconds since 1970, not {when_ns!r}"
            raise InvalidCommandError(msg, "$.when")
        self.head()  # refuses on a closed ledger; the scan itself holds no lock
        last = 0
        for record in self.log.scan():
            if record.envelope.recorded_at > when_ns:
                break
            last = record.envelope.position
        return last

    def lesson(self, lesson_id: UUID) -> LessonRow:
        """One lesson, whatever its status."""
        with self._lock:
            row = self._read(usage=True).lessons.get(lesson_id)
            if row is None:
                raise UnknownLessonError(lesson_id)
            return snapshot([row])[0]

    def history(self, lesson_id: UUID) -> list[LessonRow]:
        """Every lesson linked to this one by supersedes, each before what replaced it.

        A chain of edits is a line; a promotion joins lessons (each absorbed one is
        superseded by the global lesson), so every member of what was joined tells the
        same history. Ties go oldest first.
        """
        with self._lock:
            view = self._read(usage=True)
            lessons = view.lessons
            if lesson_id not in lessons:
                raise UnknownLessonError(lesson_id)
            before: dict[UUID, set[UUID]] = {}  # a lesson -> those it replaced
            after: dict[UUID, set[UUID]] = {}  # a lesson -> those that replaced it
            for row in view.briefs():
                for later, earlier in ((row.superseded_by, row.lesson_id),
                                       (row.lesson_id, row.supersedes)):
                    if later is not None and earlier is not None:
                        before.setdefault(later, set()).add(earlier)
                        after.setdefault(earlier, set()).add(later)
            linked, todo = {lesson_id}, [lesson_id]
            while todo:
                one = todo.pop()
                for other in before.get(one, set()) | after.get(one, set()):
                    if other not in linked and other in lessons:
                        linked.add(other)
                        todo.append(other)
            rows = {i: lessons[i] for i in linked}
            # Each before what replaced it, ties oldest first (Kahn's order, by a heap).
            waiting = {i: len(before.get(i, set()) & linked) for i in linked}
            ready = [(rows[i].created_at, str(i), i) for i, n in waiting.items() if not n]
            heapq.heapify(ready)
            order: list[LessonRow] = []
            while waiting:
                if not ready:  # a cycle (no log the ledger wrote has one): oldest first
                    i = min(waiting, key=lambda i: (rows[i].created_at, str(i)))
                    ready.append((rows[i].created_at, str(i), i))
                _, _, one = heapq.heappop(ready)
                if waiting.pop(one, None) is None:
                    continue
                order.append(rows[one])
                for later in after.get(one, set()) & waiting.keys():
                    waiting[later] -= 1
                    if not waiting[later]:
                        heapq.heappush(ready, (rows[later].created_at, str(later), later))
            return snapshot(order)


def _checked_stamp(session: str, actor: str, principal: str) -> None:
    """Refuse a query's envelope fields as a command's would be: the record carries them."""
    for text, field in ((session, "$.session"), (actor, "$.actor"),
                        (principal, "$.principal")):
        checked_text(text, field, Label)
        refuse_blank(text, field, "query")  # its record could not be erased by the name


class Reader(ReadSide):
    """The read side of a home, alone: answers queries, decides nothing, saves nothing.

    On a writable home it holds the home open as any process does (a shared
    ``home.lock``) and queues its recall records for a background write. With
    ``read_only`` (automatic on a filesystem mounted read-only) not a byte is written:
    no lock file, no reader table, no records; only safe while nobody writes the home.

    With ``one_shot`` (a process that answers and exits: the CLI) a writable home is
    opened to read only, with LMDB's reader table (:func:`~lessonledger.ledger.lmdb_env.
    reading`), so no answer waits for another process's write transaction, and the
    recall records are committed as it closes.

    Args:
        home: the home directory; it must exist.
        read_only: open without writing a byte; None decides by the filesystem.
        one_shot: open to read only, records held until :meth:`close` (see above).
        rules: the lesson rules' figures, as the writers use them.
        embedder: the embedder the index was built with (the default when omitted).
        record_delay: seconds within which a queued recall record is committed.
        record: False to record nothing though the home is writable (a replica's log
            grows only by what it pulls).
    """

    def __init__(self, home: str | os.PathLike[str], *, read_only: bool | None = None,
                 rules: Rules | None = None, embedder: Embedder | None = None,
                 record_delay: float = DEFAULT_DELAY, record: bool = True,
                 one_shot: bool = False) -> None:
        path = os.path.expanduser(os.fspath(home))
        self.read_only = on_read_only_filesystem(path) if read_only is None else read_only
        self._stack = contextlib.ExitStack()
        self._home: LMDBHome
        if self.read_only:
            self._home = self._stack.enter_context(read_only_home(path))
        elif one_shot:
            self._home = self._stack.enter_context(beside_writers(path))
        else:
            self._home = acquire(path)
            self._stack.callback(release, self._home)
        self.home = self._home.path
        held = one_shot and not self.read_only and bool(self._home.env.flags()["readonly"])
        self._held = held
        #: Records held (``one_shot``) that :meth:`close` did not commit (see
        #: :func:`~lessonledger.commands.deferred.commit_held`).
        self.unrecorded = 0
        try:
            self.log = EventLog(self._home, LOG_NAME)
            self._records = (None if self.read_only or not record
                             else HeldRecords(self.home, lambda: self.runner.position)
                             if held
                             else DeferredRecords(self.log, record_delay))
            self.runner = Runner(registry(rules), ViewStore(self._home))
            self._erasures = self.runner.erasures
            self._lock = HomeLock()
            self.runner.fold(self.log)
            self._erasures = self.runner.erasures
            self.recaller = Recaller(Path(self._home.path) / "vectors", self.log, self.view,
                                     embedder, writable=False)
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        """Commit queued recall records and let go of the home; again, nothing."""
        if self._lock.closed is not None:
            return
        with self._lock:
            try:
                if isinstance(self._records, DeferredRecords):
                    self._records.close()
            finally:
                self._stack.close()
                self._lock.closed = self.home
            if isinstance(self._records, HeldRecords):
                self._records.close()
            if self._held and read_here(self.home) is None:
                # The last reader here let go: the home may be opened to write.
                self.unrecorded = commit_held(self.home)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


@contextlib.contextmanager
def open_reader(home: str | os.PathLike[str], **options: Any) -> Iterator[Reader]:
    """Open a home's read side for the length of a ``with`` block."""
    reader = Reader(home, **options)
    try:
        yield reader
    finally:
        reader.close()
