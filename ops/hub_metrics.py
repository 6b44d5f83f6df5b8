"""A hub's Prometheus metrics: ``lessonledger serve --metrics HOST:PORT``.

The log's counts (:class:`~lessonledger.ops.metrics.LedgerCollector`: events by type,
erasures and their replica acknowledgements, lessons, size) come from the home the hub
writes; the in-process ones (:class:`~lessonledger.ops.metrics.Instruments`: requests
and refusals by kind, commit latency and batch size, recall latency) from the hub's
stats hook (:class:`~lessonledger.sync.stats.HubStats`), which tells
:class:`HubInstruments` of each thing as it happens. The hub knows nothing of Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from lessonledger.ops.config import open_log
from lessonledger.ops.lesson_commands import open_queries
from lessonledger.ops.metrics import Instruments, LedgerCollector, Verifier
from lessonledger.ops.metrics_commands import serving
from lessonledger.sync.stats import HubStats
from prometheus_client import CollectorRegistry

__all__ = ["HubInstruments", "hub_metrics"]

#: Seconds between two verifications of the log for ``lessonledger_verify_ok``.
VERIFY_EVERY = 600.0


class HubInstruments:
    """A :class:`~lessonledger.sync.stats.HubObserver` that feeds :class:`Instruments`.

    It runs on the hub's threads: each call is one counter or histogram update.
    """

    def __init__(self, instruments: Instruments) -> None:
        self._metrics = instruments

    def request(self, kind: str) -> None:
        """Count a request by kind (``command``, ``batch``, ``query:recall``, ``sync``…)."""
        self._metrics.commands.labels(kind).inc()

    def batch(self, requests: int, events: int, seconds: float) -> None:
        """A group commit: its latency and how many requests it carried."""
        self._metrics.commit_seconds.observe(seconds)
        self._metrics.batch_size.observe(requests)

    def refused(self, kind: str) -> None:
        """A refusal; the hub tells its error class (or wire problem), not its request."""
        self._metrics.refusals.labels("hub", kind).inc()

    def busy(self) -> None:
        """A busy reply, counted as a refusal of kind ``busy``."""
        self._metrics.refusals.labels("hub", "busy").inc()

    def query(self, name: str, seconds: float) -> None:
        """A query answered: recalls are timed."""
        if name == "recall":
            self._metrics.recall_seconds.observe(seconds)

    def dropped_reply(self) -> None:
        """A reply the client never took: counted as a refusal of kind ``dropped``."""
        self._metrics.refusals.labels("hub", "dropped").inc()


@contextmanager
def hub_metrics(stats: HubStats, home: Path, bind: str, port: int) -> Iterator[None]:
    """Serve a hub's metrics at ``http://bind:port/metrics`` for the length of the block.

    The port is listened on first, so one in use is refused before the home is
    created (the collector reads the home's log, so it is made next, as ``serve``
    would have made it).
    """
    with ExitStack() as stack:
        registry = CollectorRegistry()
        stack.enter_context(serving(registry, bind, port))
        log = stack.enter_context(open_log(home, create=True))
        reader = stack.enter_context(open_queries(home))
        verifier = Verifier(log, VERIFY_EVERY).start()
        stack.callback(verifier.stop)
        collector = LedgerCollector(log, reader, home=home, verifier=verifier)
        collector.catch_up()
        registry.register(collector)
        stats.observe(HubInstruments(Instruments(registry)))
        yield
