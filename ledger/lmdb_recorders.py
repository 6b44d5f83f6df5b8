"""eventsourcing recorders and the one infrastructure factory, on the LMDB event log.

Select with ``PERSISTENCE_MODULE=lessonledger.ledger`` and put the home directory in
``LMDB_PATH`` (or ``{NAME}_LMDB_PATH`` for one application or view). ``LMDB_SYNC``
(default ``y``) fsyncs every commit; ``n`` still survives a process crash, since a
commit reaches the OS before it returns, but not a power loss. ``LMDB_MAP_SIZE`` bounds
the home's size in bytes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import lmdb
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    ListenNotifySubscription,
    Notification,
    ProcessRecorder,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
    WaitInterruptedError,
)
from eventsourcing.utils import Environment, EnvType, resolve_topic, strtobool
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.lmdb_env import DEFAULT_MAP_SIZE, LMDBHome, acquire, release
from lessonledger.ledger.log import EventLog, NewEvent, Record

__all__ = [
    "LMDBAggregateRecorder",
    "LMDBApplicationRecorder",
    "LMDBFactory",
    "LMDBProcessRecorder",
    "LMDBSubscription",
    "LMDBTrackingRecorder",
]

#: How often a subscription looks for commits made by other processes (seconds).
POLL_INTERVAL = 0.05


def _stored(record: Record) -> StoredEvent:
    e = record.envelope
    return StoredEvent(e.stream_id, e.version, e.type, record.payload or b"")


def _new(stored: StoredEvent) -> NewEvent:
    return NewEvent(stored.originator_id, stored.originator_version, stored.topic, stored.state)


class LMDBAggregateRecorder(AggregateRecorder):
    """Stores events by stream; used for snapshots and aggregate-only stores."""

    def __init__(self, home: LMDBHome, name: str) -> None:
        self.log = EventLog(home, name)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events atomically; a taken (stream, version) raises IntegrityError."""
        self.log.append([_new(s) for s in stored_events])
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Select a stream's events by version."""
        records = self.log.stream(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)
        return [_stored(r) for r in records]


class LMDBApplicationRecorder(LMDBAggregateRecorder, ApplicationRecorder):
    """The application sequence: every event with a gap-free notification id."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events atomically and return their notification ids."""
        return self.log.append([_new(s) for s in stored_events])

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Select notifications by position, optionally filtered by topic."""
        first = 1 if start is None else (start if inclusive_of_start else start + 1)
        return [
            Notification(
                id=r.envelope.position,
                originator_id=r.envelope.stream_id,
                originator_version=r.envelope.version,
                topic=r.envelope.type,
                state=r.payload or b"",
            )
            for r in self.log.read(first, limit=limit, stop=stop, types=topics)
        ]

    def max_notification_id(self) -> int | None:
        """Return the last position, or None when nothing is recorded."""
        return self.log.head() or None

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[ApplicationRecorder]:
        """Follow the sequence after ``gt``; wakes at once in-process, within 50 ms across."""
        return LMDBSubscription(self, gt=gt, topics=topics)


class LMDBSubscription(ListenNotifySubscription[LMDBApplicationRecorder]):
    """Pulls new notifications when woken by a local commit or a poll of the head."""

    def __init__(
        self, recorder: LMDBApplicationRecorder, gt: int | None = None, topics: Sequence[str] = ()
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._log = recorder.log
        self._log.home.listen(self._log.name, self._has_been_notified)
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        # Other processes cannot signal us, so watch the head for their commits.
        last = self._log.head()
        while not self._stopping.wait(POLL_INTERVAL):
            head = self._log.head()
            if head != last:
                last = head
                self._has_been_notified.set()

    def stop(self) -> None:
        """Stop pulling and polling.

        Returns once the poller has stopped reading the home, so whoever closes the home
        next never pulls it from under a read.
        """
        self._stopping.set()
        self._log.home.unlisten(self._log.name, self._has_been_notified)
        if self._poller is not threading.current_thread():
            self._poller.join()
        super().stop()


class LMDBTrackingRecorder(TrackingRecorder):
    """Keeps, per upstream application, the last notification id processed.

    A view subclasses this and writes its state with :meth:`_insert_tracking` in the
    same write transaction, so state and checkpoint can never disagree.
    """

    def __init__(self, home: LMDBHome, name: str) -> None:
        self.home = home
        self.tracking_name = name
        self._tracking = home.db(f"{name}.tracking")

    def insert_tracking(self, tracking: Tracking) -> None:
        """Record that ``tracking.notification_id`` was processed."""
        with self.home.env.begin(write=True) as txn:
            self._insert_tracking(txn, tracking)

    def _insert_tracking(self, txn: lmdb.Transaction, tracking: Tracking) -> None:
        key = tracking.application_name.encode()
        current = txn.get(key, db=self._tracking)
        if current is not None and int.from_bytes(current, "big") >= tracking.notification_id:
            msg = (
                f"tracking id {tracking.notification_id} for {tracking.application_name!r} is "
                f"not above the recorded {int.from_bytes(current, 'big')}"
            )
            raise IntegrityError(msg)
        txn.put(key, tracking.notification_id.to_bytes(8, "big"), db=self._tracking)

    def max_tracking_id(self, application_name: str) -> int | None:
        """Return the last notification id processed from ``application_name``."""
        with self.home.env.begin() as txn:
            raw = txn.get(application_name.encode(), db=self._tracking)
        return int.from_bytes(raw, "big") if raw is not None else None

    def wait(self, application_name: str, notification_id: int | None,
             timeout: float = 1.0, interrupt: threading.Event | None = None) -> None:
        """Block until ``notification_id`` from ``application_name`` is tracked.

        As eventsourcing's, but polling from 1 ms up to :data:`POLL_INTERVAL` rather
        than from 100 ms up to 800 ms: a read here is a few microseconds, not a query
        to a server, and a wait that polls at 0.1, 0.3 and 0.7 s loses the last 300 ms
        of its timeout on a busy machine.

        Raises:
            TimeoutError: not tracked within ``timeout`` seconds.
            WaitInterruptedError: ``interrupt`` was set first.
        """
        deadline = time.monotonic() + timeout
        pause = 0.001
        while not self.has_tracking_id(application_name, notification_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                msg = (f"Timed out waiting for notification {notification_id} from "
                       f"application '{application_name}' to be processed")
                raise TimeoutError(msg)
            pause = min(pause, remaining)
            if interrupt is not None:
                if interrupt.wait(pause):
                    raise WaitInterruptedError
            else:
                time.sleep(pause)
            pause = min(pause * 2, POLL_INTERVAL)


class LMDBProcessRecorder(LMDBTrackingRecorder, LMDBApplicationRecorder, ProcessRecorder):
    """An application recorder whose inserts may carry a tracking row, in one transaction."""

    def __init__(self, home: LMDBHome, name: str) -> None:
        LMDBTrackingRecorder.__init__(self, home, name)
        LMDBApplicationRecorder.__init__(self, home, name)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events and, when given ``tracking=``, the tracking row atomically."""
        tracking: Tracking | None = kwargs.get("tracking")

        def also(txn: lmdb.Transaction) -> None:
            if tracking is not None:
                self._insert_tracking(txn, tracking)

        return self.log.append([_new(s) for s in stored_events], also=also)


class LMDBFactory(InfrastructureFactory[LMDBTrackingRecorder]):
    """Builds LMDB recorders for one application or view."""

    LMDB_PATH = "LMDB_PATH"
    LMDB_SYNC = "LMDB_SYNC"
    LMDB_MAP_SIZE = "LMDB_MAP_SIZE"

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        path = self.env.get(self.LMDB_PATH)
        if not path:
            keys = ", ".join(self.env.create_keys(self.LMDB_PATH))
            msg = f"no LMDB home is set; set one of {keys} to a directory"
            raise LedgerConfigError(msg)
        map_size = self.env.get(self.LMDB_MAP_SIZE) or str(DEFAULT_MAP_SIZE)
        if not map_size.isdigit():
            msg = f"{self.LMDB_MAP_SIZE} must be a number of bytes, got {map_size!r}"
            raise LedgerConfigError(msg)
        sync = strtobool(self.env.get(self.LMDB_SYNC) or "y")
        self.home = acquire(path, sync=sync, map_size=int(map_size))
        self.name = (self.env.name or "ledger").lower()
        self._closed = False

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        """Return a recorder for snapshots (or another aggregate-only purpose)."""
        return LMDBAggregateRecorder(self.home, f"{self.name}.{purpose}")

    def application_recorder(self) -> ApplicationRecorder:
        """Return the application's positioned recorder."""
        topic = self.env.get(self.APPLICATION_RECORDER_TOPIC)
        cls = resolve_topic(topic) if topic else LMDBApplicationRecorder
        return cls(self.home, self.name)

    def tracking_recorder(
        self, tracking_recorder_class: type[LMDBTrackingRecorder] | None = None
    ) -> LMDBTrackingRecorder:
        """Return a tracking recorder, or an instance of the given view class."""
        if tracking_recorder_class is None:
            topic = self.env.get(self.TRACKING_RECORDER_TOPIC)
            tracking_recorder_class = resolve_topic(topic) if topic else LMDBTrackingRecorder
        if not (isinstance(tracking_recorder_class, type)
                and issubclass(tracking_recorder_class, LMDBTrackingRecorder)):
            msg = f"{tracking_recorder_class!r} is not an LMDBTrackingRecorder subclass"
            raise LedgerConfigError(msg)
        return tracking_recorder_class(self.home, self.name)

    def process_recorder(self) -> ProcessRecorder:
        """Return a recorder that writes events and tracking atomically."""
        topic = self.env.get(self.PROCESS_RECORDER_TOPIC)
        cls = resolve_topic(topic) if topic else LMDBProcessRecorder
        return cls(self.home, self.name)

    def close(self) -> None:
        """Release the home; it closes when no factory in this process uses it."""
        if not self._closed:
            self._closed = True
            release(self.home)
