"""What a hub counts: batches, refusals, queries; the place metrics hang on.

:class:`HubStats` keeps the figures ``lessonledger status`` shows, and calls every
:class:`HubObserver` added with :meth:`HubStats.observe` on each event as it happens, so
a metrics exporter (Prometheus counters and histograms) subscribes here and the hub
itself knows nothing of it. Observers run on the hub's threads: they must be quick and
must not raise (one that raises is logged and dropped).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Protocol

from lessonledger.sync.wire import Queried

__all__ = ["HubObserver", "HubStats"]

log = logging.getLogger("lessonledger.hub")


class HubObserver(Protocol):
    """Told of each thing a hub does (a metrics exporter implements this)."""

    def request(self, kind: str) -> None:
        """A request of ``kind`` was taken: a frame kind, or ``query:NAME``."""

    def batch(self, requests: int, events: int, seconds: float) -> None:
        """A group commit of ``requests`` wrote ``events`` events in ``seconds``."""

    def refused(self, kind: str) -> None:
        """A request was refused: an error class name, or a wire problem."""

    def busy(self) -> None:
        """A request was answered ``busy`` (the queue was full, or the hub stopping)."""

    def query(self, name: str, seconds: float) -> None:
        """A query ``name`` was answered in ``seconds``."""

    def dropped_reply(self) -> None:
        """A reply could not be delivered (a client not reading, or gone)."""


class HubStats:
    """A hub's running figures, safe to update from its threads.

    Args:
        queue_bound: the command queue's bound, reported beside its depth.
        mode: how principals are decided (``loopback`` or ``curve``).
    """

    def __init__(self, queue_bound: int, mode: str) -> None:
        self._lock = threading.Lock()
        self._observers: list[HubObserver] = []
        self.queue_bound = queue_bound
        self.mode = mode
        self.started_at = time.time_ns()
        self.batches = 0
        self.commands = 0
        self.events = 0
        self.refusals = 0
        self.busy_replies = 0
        self.dropped = 0
        self.last_sizes: deque[int] = deque(maxlen=32)

    def observe(self, observer: HubObserver) -> None:
        """Call ``observer`` on every batch, refusal, busy reply, query and dropped reply."""
        with self._lock:
            self._observers.append(observer)

    def _tell(self, method: str, *args: object) -> None:
        for observer in list(self._observers):
            try:
                getattr(observer, method)(*args)
            except Exception:
                log.exception("a hub observer failed; it is dropped")
                with self._lock:
                    self._observers.remove(observer)

    def batch(self, requests: int, events: int, seconds: float) -> None:
        """Count a group commit."""
        with self._lock:
            self.batches += 1
            self.commands += requests
            self.events += events
            self.last_sizes.append(requests)
        self._tell("batch", requests, events, seconds)

    def request(self, kind: str) -> None:
        """Tell the observers of a request taken (the figures count batches, not these)."""
        self._tell("request", kind)

    def refused(self, kind: str) -> None:
        """Count a refusal."""
        with self._lock:
            self.refusals += 1
        self._tell("refused", kind)

    def busy(self) -> None:
        """Count a busy reply."""
        with self._lock:
            self.busy_replies += 1
        self._tell("busy")

    def query(self, name: str, seconds: float) -> None:
        """Count an answered query."""
        self._tell("query", name, seconds)

    def dropped_reply(self) -> None:
        """Count a reply that could not be delivered."""
        with self._lock:
            self.dropped += 1
        self._tell("dropped_reply")

    def snapshot(self, *, head: int, clients: int, queue_depth: int) -> Queried:
        """The figures as the status reply carries them."""
        with self._lock:
            return Queried(
                head=head, clients=clients, queue_depth=queue_depth,
                queue_bound=self.queue_bound, batches=self.batches, commands=self.commands,
                events=self.events, last_batch_sizes=list(self.last_sizes),
                mean_batch_size=self.commands / self.batches if self.batches else 0.0,
                events_per_commit=self.events / self.batches if self.batches else 0.0,
                refusals=self.refusals, busy=self.busy_replies, started_at=self.started_at,
                principal_mode=self.mode)
