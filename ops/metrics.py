"""Prometheus metrics of a home, for ``lessonledger metrics`` and any server to mount.

Two kinds, kept apart because they come from different places:

- **From the log** (:class:`LedgerCollector`, a custom collector): events appended by
  type, erasures and the bodies they took, the head, the home's bytes on disk, active
  lessons by status and scope, and the last verification. Read at each scrape from the
  log itself, so they equal what ``lessonledger stats`` counts, whichever process wrote:
  events are counted once, incrementally, from the last position read to the head, and
  every count in one scrape is as of the ``lessonledger_log_head`` it reports.
- **In-process** (:class:`Instruments`): commands and refusals by kind, commit latency
  and batch size, recall latency. Only the process that serves requests sees them
  (``lessonledger mcp --metrics``, a hub): a refusal writes nothing to the log, and a
  latency is not in it. :class:`MeteredLedger` records them around any ledger.

A hub mounts both on its own registry: ``registry.register(LedgerCollector(log,
reader))`` and ``Instruments(registry)``, then :func:`serve` or its own HTTP server.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from lessonledger.commands.audit import Why
from lessonledger.commands.messages import AnyCommand
from lessonledger.commands.recall import Check
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.events import (
    ERASED,
    ERASURE_ACKNOWLEDGED,
    Erased,
    ErasureAcknowledged,
    decode_event,
)
from lessonledger.ledger.log import Record
from lessonledger.ledger.verify import VerifyReport, verify
from lessonledger.ops.ledger_api import LedgerApi
from lessonledger.projections.lessons import LessonRow
from lessonledger.projections.recall import Recall
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server

__all__ = ["Instruments", "LedgerCollector", "LessonSource", "LogSource", "MeteredLedger",
           "Verifier", "serve"]

#: Records read per step when catching up with the log.
_CHUNK = 4096


class LogSource(Protocol):
    """What the collector reads of a log (an :class:`~lessonledger.ledger.log.EventLog`)."""

    def head(self) -> int:
        """The last position."""

    def read(self, start: int = 1, limit: int | None = None,
             stop: int | None = None) -> list[Record]:
        """Records from ``start`` on."""


class LessonSource(Protocol):
    """What the collector reads of the lessons (a read side: a Reader or a Ledger)."""

    def catalogue(self, project: str | None = None, *, everything: bool = False
                  ) -> list[LessonRow]:
        """Lessons for a person to browse."""


@dataclass
class _Counts:
    """The log as counted so far: up to ``head``, by type, and its erasures."""

    head: int = 0
    by_type: collections.Counter[str] = field(default_factory=collections.Counter)
    erasures: collections.Counter[str] = field(default_factory=collections.Counter)
    erased: set[int] = field(default_factory=set)
    #: Erasure position → the replicas that acknowledged applying it.
    acked: dict[int, set[str]] = field(default_factory=dict)
    #: The last Erased record read (position, time, what, subject). An erasure too big
    #: for one record is split into several, appended in one call: consecutive, with one
    #: ``recorded_at``, which no two transactions share; so the next part is told exactly.
    last_erasure: tuple[int, int, str, str] | None = None

    def add(self, record: Record) -> None:
        envelope = record.envelope
        self.head = envelope.position
        self.by_type[envelope.type] += 1
        if envelope.type == ERASURE_ACKNOWLEDGED and record.payload is not None:
            ack = decode_event(record.payload)
            assert isinstance(ack, ErasureAcknowledged), "an ack record's body is an ack"
            self.acked.setdefault(ack.erasure, set()).add(ack.replica)
            return
        if envelope.type != ERASED or record.payload is None:
            return
        event = decode_event(record.payload)
        assert isinstance(event, Erased), "an Erased record's body is an erasure"
        key = (envelope.recorded_at, event.what, event.subject)
        last = self.last_erasure
        if last is None or last[0] != envelope.position - 1 or last[1:] != key:
            self.erasures[event.what] += 1  # not the next part of the one before
        self.last_erasure = (envelope.position, *key)
        self.erased.update(event.positions)
        self.acked.setdefault(envelope.position, set())


class Verifier:
    """Verifies the log now and then, in a thread; the last report is a metric.

    Verification reads the whole log (every hash recomputed), so it runs every
    ``every`` seconds rather than at each scrape; 0 verifies once, at the start.
    """

    def __init__(self, log: Any, every: float) -> None:
        self._log, self._every = log, every
        self.report: VerifyReport | None = None
        self.finished_at = 0.0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lessonledger-verify",
                                        daemon=True)

    def start(self) -> Verifier:
        """Start verifying in the background."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the verification under way, if any."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            report = verify(self._log)
            self.seconds = time.monotonic() - began
            self.report, self.finished_at = report, time.time()
            if self._every <= 0 or self._stop.wait(self._every):
                return


class LedgerCollector:
    """What the log says, counted at each scrape (see the module docstring)."""

    def __init__(self, log: LogSource, lessons: LessonSource, *, home: Path | None = None,
                 verifier: Verifier | None = None) -> None:
        self._log, self._lessons, self._home, self._verifier = log, lessons, home, verifier
        self._counts = _Counts()
        self._lock = threading.Lock()

    def describe(self) -> list[Metric]:
        """Nothing: registering must not read the log (prometheus calls describe then)."""
        return []

    def catch_up(self) -> int:
        """Count the log up to its head now; the head.

        Each scrape does this for what was appended since the last; a server calls it
        once before listening, so that its first scrape does not read a long log whole.
        """
        with self._lock:
            return self._catch_up().head

    def _catch_up(self) -> _Counts:
        counts = self._counts
        head = self._log.head()
        while counts.head < head:
            records = self._log.read(counts.head + 1, limit=_CHUNK, stop=head)
            if not records:
                break
            for record in records:
                counts.add(record)
        return counts

    def collect(self) -> Iterator[Metric]:
        """The metric families, every count as of one head."""
        with self._lock:
            yield from _log_families(self._catch_up())
        yield from _lesson_families(self._lessons.catalogue(everything=True))
        if self._home is not None:
            size = sum(p.stat().st_size for p in self._home.rglob("*") if p.is_file())
            yield GaugeMetricFamily("lessonledger_home_bytes", (
                "bytes on disk of every file of the home (LMDB files, vector index)"),
                value=size)
        if self._verifier is not None and self._verifier.report is not None:
            yield from _verify_families(self._verifier)


def _log_families(counts: _Counts) -> Iterator[Metric]:
    yield GaugeMetricFamily("lessonledger_log_head", (
        "the last position of the log: every log count in this scrape is up to it"),
        value=counts.head)
    events = CounterMetricFamily("lessonledger_events_appended", (
        "events in the log by type, whichever process appended them"), labels=["type"])
    for kind, count in sorted(counts.by_type.items()):
        events.add_metric([kind], count)
    yield events
    erasures = CounterMetricFamily("lessonledger_erasures", (
        "erasures recorded, by what they erased (principal, session, lesson, outcome)"),
        labels=["what"])
    for what, count in sorted(counts.erasures.items()):
        erasures.add_metric([what], count)
    yield erasures
    # A label per erasure: they are few (each is a person's request), and an operator
    # wants to see which one a replica has not applied yet.
    acks = GaugeMetricFamily("lessonledger_erasure_acknowledgements", (
        "replicas that acknowledged applying the erasure at this position of the log "
        "(bodies deleted, views refolded, compacted)"), labels=["erasure"])
    for position, replicas in sorted(counts.acked.items()):
        acks.add_metric([str(position)], len(replicas))
    yield acks
    yield GaugeMetricFamily("lessonledger_erased_bodies", (
        "event bodies the log's erasures took (their envelopes stay)"),
        value=len(counts.erased))


def _lesson_families(rows: list[LessonRow]) -> Iterator[Metric]:
    # By scope kind, not digest: a label per project would grow without bound.
    tally = collections.Counter((row.status, "global" if row.scope == "global" else "project")
                                for row in rows)
    lessons = GaugeMetricFamily("lessonledger_lessons", (
        "lessons by status (trial and trusted are active) and scope (project or global)"),
        labels=["status", "scope"])
    for (status, scope), count in sorted(tally.items()):
        lessons.add_metric([status, scope], count)
    yield lessons


def _verify_families(verifier: Verifier) -> Iterator[Metric]:
    report = verifier.report
    assert report is not None
    yield GaugeMetricFamily("lessonledger_verify_ok", (
        "1 when the last verification found the chain and every body intact, else 0"),
        value=int(report.ok))
    yield GaugeMetricFamily("lessonledger_verify_problems", (
        "damaged positions the last verification found"), value=len(report.problems))
    yield GaugeMetricFamily("lessonledger_verify_checked_events", (
        "events the last verification checked"), value=report.checked)
    yield GaugeMetricFamily("lessonledger_verify_timestamp_seconds", (
        "when the last verification finished (Unix time)"), value=verifier.finished_at)
    yield GaugeMetricFamily("lessonledger_verify_duration_seconds", (
        "how long the last verification took"), value=verifier.seconds)


#: Seconds: a commit is milliseconds with fsync, a recall tens of microseconds to ms.
_LATENCY = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            0.5, 1.0, 2.5)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Instruments:
    """The in-process metrics, registered on ``registry`` (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.commands = Counter("lessonledger_commands", (
            "requests served, by kind (commands and queries), refused or not"), ["kind"],
            registry=registry)
        self.refusals = Counter("lessonledger_refusals", (
            "requests refused, by kind and error (nothing of them was written)"),
            ["kind", "error"], registry=registry)
        self.commit_seconds = Histogram("lessonledger_commit_seconds", (
            "a command from its checks to its commit: the secret scan, decide, append, the "
            "policies, fsync"),
            buckets=_LATENCY, registry=registry)
        self.batch_size = Histogram("lessonledger_commit_batch_size", (
            "commands written in one write transaction"), buckets=_BATCH,
            registry=registry)
        self.recall_seconds = Histogram("lessonledger_recall_seconds", (
            "a plan-time recall, from the query to the section"), buckets=_LATENCY,
            registry=registry)

    def refused(self, kind: str, error: BaseException) -> None:
        """Count a refusal of a ``kind`` request."""
        self.refusals.labels(kind, type(error).__name__).inc()


class MeteredLedger:
    """A ledger whose every request is counted and timed in :class:`Instruments`.

    It has the ledger's methods (:class:`~lessonledger.ops.ledger_api.LedgerApi`), so
    it stands wherever the ledger does: the MCP server serves one.
    """

    def __init__(self, ledger: LedgerApi, instruments: Instruments) -> None:
        self._ledger, self._metrics = ledger, instruments

    def _call(self, kind: str, run: Any, *args: Any, **kwargs: Any) -> Any:
        self._metrics.commands.labels(kind).inc()
        try:
            return run(*args, **kwargs)
        except Exception as e:
            self._metrics.refused(kind, e)
            raise

    def recall(self, project: str, query: str, **stamp: Any) -> Recall:
        """As the ledger's, timed."""
        with self._metrics.recall_seconds.time():
            result: Recall = self._call("recall", self._ledger.recall, project, query, **stamp)
        return result

    def check(self, project: str, operation: str, target: str, **stamp: Any) -> Check:
        """As the ledger's."""
        result: Check = self._call("check", self._ledger.check, project, operation, target,
                                   **stamp)
        return result

    def lessons(self, project: str, **stamp: Any) -> list[LessonRow]:
        """As the ledger's."""
        rows: list[LessonRow] = self._call("lessons", self._ledger.lessons, project, **stamp)
        return rows

    def find_lesson(self, text: str) -> UUID:
        """As the ledger's (counted with ``why``, which asks it first)."""
        found: UUID = self._call("why", self._ledger.find_lesson, text)
        return found

    def why(self, lesson_id: UUID, **options: Any) -> Why:
        """As the ledger's (counted when :meth:`find_lesson` was)."""
        try:
            return self._ledger.why(lesson_id, **options)
        except Exception as e:
            self._metrics.refused("why", e)
            raise

    def execute(self, command: AnyCommand) -> Receipt:
        """As the ledger's: one command, one write transaction, timed."""
        kind = command.__struct_config__.tag
        began = time.perf_counter()
        receipt: Receipt = self._call(str(kind), self._ledger.execute, command)
        self._metrics.commit_seconds.observe(time.perf_counter() - began)
        self._metrics.batch_size.observe(1)
        return receipt


def serve(registry: CollectorRegistry, port: int, bind: str = "127.0.0.1") -> Any:
    """Serve ``registry`` at ``http://bind:port/metrics`` in a thread; the server.

    Port 0 takes a free port (read it from the server's ``server_port``).
    """
    server, _ = start_http_server(port, addr=bind, registry=registry)
    return server
