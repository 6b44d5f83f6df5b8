"""Recall records that wait for a commit instead of paying one of their own.

A recall (or a check, or a listing) is a query with one write: the ``LessonRecalled``
event that moves the usage clock and puts the lessons *in play* for the session. A
durable LMDB commit is two fsyncs, about a millisecond here, and plan-time recall is
latency-bound, so the record does not wait for its own commit. It is queued, and
committed by whichever comes first:

- the next command of this ledger, in that command's own write transaction, *before*
  the command is folded or decided: a lesson recalled in a session is in play for that
  session's outcome exactly as if the record had been committed on its own;
- a background flush at most ``delay`` seconds after it was queued, so a recall with no
  later command still lands (every record queued in that window shares one commit);
- :meth:`DeferredRecords.drain`: every query that reads usage (a lesson and its clocks,
  the listing of lessons, a history, why a lesson was recalled) asks the background
  flush to commit now and waits a moment for it, never longer: a query never waits on
  another process's write lock; ``Ledger.close`` flushes.

The trade-off, stated plainly: a crash (kill -9, power loss) or an exit without
``close()`` within that window can lose recall records, never a command; records are
never written twice (each carries its own event id, and the log ignores a repeat).
Another process sees a recall only once it is committed, so an outcome another process
reports for the same session within the window may not count it as in play; one session
lives in one process in the usual setup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lessonledger.ledger.events import ERASED
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog, NewEvent, Writing

__all__ = ["DEFAULT_DELAY", "DeferredRecords", "HeldRecords", "commit_held"]

#: Seconds a queued record waits at most for a command to carry it.
DEFAULT_DELAY = 0.05
#: Seconds a process that has answered waits at most to commit its held records.
HELD_WAIT = 5.0


class DeferredRecords:
    """Events queued for the next commit of a log, flushed by a thread within ``delay``.

    Args:
        log: the log they go to.
        delay: seconds after queueing by which a background flush commits them.
    """

    def __init__(self, log: EventLog, delay: float = DEFAULT_DELAY) -> None:
        self._log = log
        self._delay = delay
        self._events: list[NewEvent] = []
        self._queue = threading.Lock()  # guards _events only: held for microseconds
        # The right to move queued events into the log: held from taking them to their
        # commit, so a command never misses events a flush has taken but not yet written.
        self._slot = threading.Lock()
        self._wake = threading.Event()
        #: Set by :meth:`drain`: the next background flush goes without waiting.
        self._urgent = threading.Event()
        #: Notified after every background flush.
        self._flushed = threading.Condition()
        #: Events taken from the queue and not yet committed.
        self._in_flight = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The last background flush's failure; the events stay queued for a retry.
        self.error: BaseException | None = None

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: NewEvent) -> None:
        """Queue an event; it is committed within ``delay`` seconds or sooner."""
        with self._queue:
            self._events.append(event)
        if self._thread is None:
            self._start()
        self._wake.set()

    def flush(self) -> None:
        """Commit every queued event now, in one transaction.

        Raises:
            LedgerError: the append failed; the events stay queued.
        """
        with self._slot:
            events = self._take()
            if not events:
                return
            self._in_flight = len(events)
            try:
                self._log.append_decided(events)
            except BaseException:
                self._restore(events)
                raise
            finally:
                self._in_flight = 0

    def drain(self, timeout: float) -> bool:
        """Have the background flush commit what is queued now; wait at most ``timeout``.

        Returns True when nothing was left uncommitted in time. A query calls this
        rather than :meth:`flush`, so it never waits long on a write lock another
        process holds.
        """
        deadline = time.monotonic() + timeout
        with self._flushed:
            if not self._events and not self._in_flight:
                return True
            self._urgent.set()
            self._wake.set()
            if self._thread is None:
                self._start()
            while self._events or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0 or not self._flushed.wait(left):
                    return not self._events and not self._in_flight
            return True

    @contextmanager
    def writing(self) -> Iterator[Writing]:
        """The log's write transaction, with the queued events appended first.

        If the block raises, nothing commits and the events go back to the queue.
        """
        with self._slot:
            events = self._take()
            try:
                with self._log.writing() as writing:
                    if events:
                        writing.append(events)
                    yield writing
            except BaseException:
                self._restore(events)
                raise

    def close(self) -> None:
        """Stop the background flush and commit what is queued."""
        self._stop.set()
        self._urgent.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _take(self) -> list[NewEvent]:
        with self._queue:
            events, self._events = self._events, []
        return events

    def _restore(self, events: list[NewEvent]) -> None:
        if events:
            with self._queue:
                self._events[:0] = events

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lessonledger-records",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Wait for work, let a window's worth gather, commit it; until stopped."""
        while not self._stop.is_set():
            self._wake.wait()
            self._urgent.wait(self._delay)  # drain() and close() cut the window short
            # Cleared before taking: whatever is queued after this wakes the next round.
            self._wake.clear()
            self._urgent.clear()
            try:
                self.flush()
                self.error = None
            except Exception as e:  # kept for close(); retried when the next one is queued
                self.error = e
            with self._flushed:
                self._flushed.notify_all()


class HeldRecords:
    """The records of a process that reads its home without opening it to write.

    Held in memory, and committed by :func:`commit_held` once the process has let go of
    the home (see :func:`~lessonledger.ledger.lmdb_env.reading`): its answers never wait
    for another process's write transaction; only that commit, after them, does.

    Args:
        path: the home's directory.
        position: where the answers are read from, now (the reader's view).
    """

    def __init__(self, path: str, position: Callable[[], int]) -> None:
        self._path = path
        self._position = position
        self._events: list[NewEvent] = []
        self._since: int | None = None

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: NewEvent) -> None:
        """Hold an event until :meth:`close`."""
        at = self._position()
        self._since = at if self._since is None else min(self._since, at)
        self._events.append(event)

    def drain(self, timeout: float) -> bool:
        """Nothing is committed before :meth:`close`: True only when none is held."""
        return not self._events

    def close(self) -> None:
        """Hand what is held to :func:`commit_held` (the reader is letting go)."""
        if self._events and self._since is not None:
            with _held_lock:
                _held.setdefault(self._path, []).append((self._since, self._events))
        self._events = []


#: Records of this process's readers that let go, by home: committed by the last one.
_held: dict[str, list[tuple[int, list[NewEvent]]]] = {}
_held_lock = threading.Lock()


def commit_held(path: str, timeout: float = HELD_WAIT) -> int:
    """Commit the records readers of ``path`` held, once none reads it; how many were not.

    Waits at most ``timeout`` seconds for the write lock: a process stuck inside a long
    transaction must not keep a query that has answered from exiting. Records shown
    before an erasure that committed since are not written: they may name what it took
    (and the erasure, compacted, would not take them). Either way they are lost, as a
    crash within a deferred window loses them.

    Raises:
        LedgerError: the append failed.
    """
    with _held_lock:
        waiting = _held.pop(path, [])
    events = [event for _, batch in waiting for event in batch]
    if not events:
        return 0
    since = min(at for at, _ in waiting)
    written: list[bool] = []
    failed: list[BaseException] = []

    def commit() -> None:
        try:
            home = acquire(path)
            try:
                with EventLog(home, LOG_NAME).writing() as writing:
                    if not any(r.envelope.type == ERASED for r in writing.scan(since + 1)):
                        writing.append(events)
                        written.append(True)
            finally:
                release(home)
        except BaseException as e:  # re-raised below, in the caller's thread
            failed.append(e)

    # A daemon thread: one still waiting for the lock when the process exits just ends
    # with it, before its transaction began.
    thread = threading.Thread(target=commit, name="lessonledger-held", daemon=True)
    thread.start()
    thread.join(timeout)
    if failed:
        raise failed[0]
    return 0 if written else len(events)
