"""Append and replay benchmark: our ledger against raw LMDB, eventsourcing's SQLite and POPO.

Every contender stores the same pre-encoded catalogue event bytes, in the same process,
each repetition in a fresh store of its own. Rates are events per second, the median of
:data:`_REPEATS` runs. Appends are durable (an fsync per commit) wherever the store can
be; the ratios set our recorder against the physical ceiling (raw LMDB puts of the same
bytes) and against eventsourcing's own SQLite module, which runs WAL with
``synchronous=FULL``.

Run it with ``python -c "from lessonledger.ops.bench.append import run; print(run())"``.
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

import lmdb
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
from lessonledger.ledger.events import (
    AnyEvent,
    LessonProposed,
    Operation,
    OutcomeObserved,
    decode_event,
)
from lessonledger.ledger.ids import new_event_id
from lessonledger.ledger.lmdb_env import DEFAULT_MAP_SIZE, acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ledger.submission import new_event
from lessonledger.ops.bench.layout import Entries, layout, layout_entries

__all__ = ["run"]

#: Five, not three: on these shared machines one slow spell moves a median of three.
_REPEATS = 5
_BATCH = 100
#: Single-event durable appends wait on an fsync each, so a modest count is enough.
_SINGLE_EVENTS = 2_000
_APP_EVENTS = 10_000
_REPLAY_BATCH = 1_000
#: Events per stream: aggregates in a real ledger hold a handful of events each.
_STREAM_LEN = 10
_SEED = 20_240_601
_LOG_NAME = "ledger"

_WORDS = (
    "pytest", "run", "failed", "import", "module", "fixture", "retry", "cache", "lockfile",
    "migration", "schema", "config", "timeout", "flaky", "network", "mock", "patch", "deploy",
    "rollback", "branch", "rebase", "merge", "conflict", "lint", "format", "type", "check",
    "build", "wheel", "install", "venv", "path", "symlink", "permission", "docker", "compose",
    "port", "socket", "encoding", "unicode", "json", "yaml", "toml", "parser", "token", "refresh",
    "secret", "header", "query", "index", "vacuum", "transaction", "deadlock", "commit", "stale",
    "snapshot", "replay", "projection", "cursor",
)

Rates = dict[str, float | int | str]


@dataclass(frozen=True)
class _Corpus:
    """The events every contender stores: one encoding, shared by all.

    Attributes:
        payloads: the encoded catalogue event bodies.
        events: the same bodies with their envelope fields, as our log appends them.
        texts: ~250-character strings for the application benchmark's aggregates.
    """

    payloads: list[bytes]
    events: list[NewEvent]
    texts: list[str]


def _uuid(rng: random.Random) -> UUID:
    """Return a random-looking but seeded version-4 UUID."""
    return UUID(int=rng.getrandbits(128), version=4)


def _words(rng: random.Random, count: int) -> str:
    """Return ``count`` vocabulary words: text shaped like what agents record."""
    return " ".join(rng.choices(_WORDS, k=count))


def _lesson(rng: random.Random) -> LessonProposed:
    """Return a lesson as the extractor proposes them, with one piece of evidence."""
    return LessonProposed(
        lesson_id=_uuid(rng),
        text=_words(rng, rng.randint(4, 8)),
        kind=rng.choice(("prefer", "avoid", "do")),
        avoid_op=f"{rng.choice(_WORDS)}:{rng.choice(_WORDS)}",
        target=f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py",
        scope=f"{rng.getrandbits(64):016x}",
        source=rng.choice(("loop", "extractor", "model", "user")),
        evidence=[_uuid(rng)],
        confidence=round(rng.random(), 3),
    )


def _outcome(rng: random.Random) -> OutcomeObserved:
    """Return a task outcome with one or two operations."""
    operations = [
        Operation(
            op=f"{rng.choice(_WORDS)}:{rng.choice(_WORDS)}",
            target=f"{rng.getrandbits(64):016x}",
            ok=ok,
            error="" if ok else _words(rng, 3),
            order=order,
        )
        for order, ok in enumerate(rng.random() < 0.7 for _ in range(rng.randint(1, 2)))
    ]
    return OutcomeObserved(
        outcome_id=_uuid(rng),
        project=f"{rng.getrandbits(64):016x}",
        task=_words(rng, rng.randint(4, 8)),
        passed=rng.random() < 0.6,
        signal=rng.choice(("verification", "user_correction", "undo", "accepted", "tool")),
        operations=operations,
    )


def _corpus(count: int, texts: int) -> _Corpus:
    """Generate ``count`` catalogue events, reproducibly, and encode each once."""
    rng = random.Random(_SEED)
    # Stream and event ids are minted as the ledger mints its own: time-ordered (ids.py).
    streams = [new_event_id() for _ in range(count // _STREAM_LEN + 1)]
    events: list[NewEvent] = []
    for i in range(count):
        catalogue: AnyEvent = _lesson(rng) if rng.random() < 0.5 else _outcome(rng)
        events.append(new_event(
            catalogue, stream=streams[i // _STREAM_LEN], version=i % _STREAM_LEN,
            event_id=new_event_id(), actor="bench",
        ))
    return _Corpus(
        payloads=[e.payload for e in events],
        events=events,
        texts=[_words(rng, 40)[:250] for _ in range(texts)],
    )


def _batches(items: Sequence[NewEvent], size: int) -> list[Sequence[NewEvent]]:
    """Split ``items`` into consecutive slices of ``size``, prepared before timing."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def _timed(work: Callable[[], int]) -> float:
    """Return events per second of ``work``, which returns how many events it handled."""
    started = time.perf_counter()
    count = work()
    return count / (time.perf_counter() - started)


# -- appends -----------------------------------------------------------------------------


def _ours(path: str, events: Sequence[NewEvent], batch: int) -> float:
    """Durable appends through our event log, ``batch`` events per call."""
    home = acquire(path, sync=True)
    try:
        log = EventLog(home, _LOG_NAME)
        chunks = _batches(events, batch)

        def work() -> int:
            for chunk in chunks:
                log.append_decided(chunk)
            return len(events)

        return _timed(work)
    finally:
        release(home)


def _raw_env(path: str, *, sync: bool) -> lmdb.Environment:
    """Open a plain LMDB environment for the raw contender."""
    # The same environment settings as our homes, so only the layer above differs.
    return lmdb.open(path, map_size=DEFAULT_MAP_SIZE, max_dbs=1, sync=sync, metasync=sync)


def _raw(path: str, payloads: Sequence[bytes], batch: int) -> float:
    """Durable raw LMDB puts of the same bytes, ``batch`` per transaction: the ceiling."""
    env = _raw_env(path, sync=True)
    try:
        db = env.open_db(b"events")

        def work() -> int:
            for start in range(0, len(payloads), batch):
                with env.begin(write=True, db=db) as txn:
                    for key in range(start, min(start + batch, len(payloads))):
                        txn.put(key.to_bytes(8, "big"), payloads[key], append=True)
            return len(payloads)

        return _timed(work)
    finally:
        env.close()


def _stored(events: Sequence[NewEvent]) -> list[StoredEvent]:
    """Return the events as eventsourcing stores them: same stream, version, type, bytes."""
    return [StoredEvent(e.stream, e.version, e.type, e.payload) for e in events]


def _sqlite(path: str, events: Sequence[NewEvent], batch: int) -> float:
    """Appends through eventsourcing's SQLite application recorder, in its default mode."""
    datastore = SQLiteDatastore(os.path.join(path, "events.sqlite"))
    try:
        recorder = SQLiteApplicationRecorder(datastore)
        recorder.create_table()
        chunks = [_stored(chunk) for chunk in _batches(events, batch)]

        def work() -> int:
            for chunk in chunks:
                recorder.insert_events(chunk)
            return len(events)

        return _timed(work)
    finally:
        datastore.close()


def _sqlite_synchronous(workdir: str) -> str:
    """Return the ``synchronous`` setting eventsourcing's SQLite connections run with."""
    datastore = SQLiteDatastore(os.path.join(workdir, "pragma.sqlite"))
    try:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA synchronous")
            level = int(cursor.fetchone()[0])
            cursor.execute("PRAGMA journal_mode")
            journal = str(cursor.fetchone()[0])
    finally:
        datastore.close()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"{names.get(level, str(level))} ({journal}, sqlite {sqlite3.sqlite_version})"


# -- applications ------------------------------------------------------------------------


class _Notebook(Aggregate):
    """An aggregate whose events each carry a note of about 250 characters."""

    def __init__(self, text: str) -> None:
        self.notes = [text]

    @event("Noted")
    def note(self, text: str) -> None:
        """Add a note."""
        self.notes.append(text)


def _app(env: dict[str, str], texts: Sequence[str]) -> float:
    """Save ``len(texts)`` events, :data:`_BATCH` per save, through an Application."""
    app: Application[UUID] = Application(env=env)
    try:

        def work() -> int:
            for start in range(0, len(texts), _BATCH):
                notebook = _Notebook(texts[start])
                for text in texts[start + 1 : start + _BATCH]:
                    notebook.note(text)
                app.save(notebook)
            return len(texts)

        return _timed(work)
    finally:
        app.close()


def _app_ours(path: str, texts: Sequence[str]) -> float:
    """Application saves persisted by our module, durably."""
    # LMDB_SYNC is given so that a value in the process environment cannot weaken it.
    return _app({"PERSISTENCE_MODULE": "lessonledger.ledger", "LMDB_PATH": path,
                 "LMDB_SYNC": "y"}, texts)


def _app_sqlite(path: str, texts: Sequence[str]) -> float:
    """Application saves persisted by eventsourcing's SQLite module on a file, as shipped."""
    return _app({"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                 "SQLITE_DBNAME": os.path.join(path, "app.sqlite")}, texts)


def _app_popo(path: str, texts: Sequence[str]) -> float:
    """Application saves kept in memory by eventsourcing's POPO module."""
    del path  # POPO keeps everything in memory.
    return _app({"PERSISTENCE_MODULE": "eventsourcing.popo"}, texts)


# -- replay ------------------------------------------------------------------------------


def _replay_events(corpus: _Corpus, count: int) -> list[NewEvent]:
    """Return ``count`` events with fresh streams and ids, cycling the corpus bodies."""
    streams = [new_event_id() for _ in range(count // _STREAM_LEN + 1)]
    return [
        NewEvent(
            streams[i // _STREAM_LEN], i % _STREAM_LEN, corpus.events[i % len(corpus.events)].type,
            corpus.payloads[i % len(corpus.payloads)], event_id=new_event_id().bytes,
            actor="bench",
        )
        for i in range(count)
    ]


def _fill(ours: str, raw: str, events: Sequence[NewEvent]) -> None:
    """Write the replay events once into our log and once into a raw LMDB database."""
    home = acquire(ours, sync=False)
    try:
        log = EventLog(home, _LOG_NAME)
        for chunk in _batches(events, _REPLAY_BATCH):
            log.append_decided(chunk)
    finally:
        release(home)
    env = _raw_env(raw, sync=False)
    try:
        db = env.open_db(b"events")
        with env.begin(write=True, db=db) as txn:
            for key, e in enumerate(events):
                txn.put(key.to_bytes(8, "big"), e.payload, append=True)
    finally:
        env.close()


def _replay_ours(path: str) -> float:
    """Select every record through our log and decode each body into its typed event."""
    home = acquire(path, sync=False)
    try:
        log = EventLog(home, _LOG_NAME)

        def work() -> int:
            count = 0
            for record in log.scan():
                decode_event(record.payload or b"")
                count += 1
            return count

        return _timed(work)
    finally:
        release(home)


def _replay_raw(path: str) -> float:
    """Walk the raw database's values with a cursor and decode each the same way."""
    env = _raw_env(path, sync=False)
    try:
        db = env.open_db(b"events")

        def work() -> int:
            count = 0
            with env.begin(db=db) as txn:
                for value in txn.cursor().iternext(keys=False, values=True):
                    decode_event(value)
                    count += 1
            return count

        return _timed(work)
    finally:
        env.close()


# -- driver ------------------------------------------------------------------------------


def _fresh(workdir: str, measure: Callable[[str], float]) -> float:
    """Run ``measure`` once in a new directory under ``workdir``, then remove it."""
    path = tempfile.mkdtemp(dir=workdir)
    try:
        return measure(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _medians(contenders: dict[str, Callable[[], float]], say: Callable[[str], None]) -> Rates:
    """Measure each contender :data:`_REPEATS` times and return the median rates by key.

    Repetitions go round the contenders in turn, so that a slow spell of this machine
    (page-cache writeback, a noisy neighbour) is shared out rather than landing on one.
    """
    samples: dict[str, list[float]] = {label: [] for label in contenders}
    for repeat in range(1, _REPEATS + 1):
        for label, measure in contenders.items():
            samples[label].append(measure())
            say(f"{label} ({repeat}/{_REPEATS}): {samples[label][-1]:,.0f} events/s")
    return {f"{label}_eps": round(statistics.median(rates), 1) for label, rates in samples.items()}


def _appends(workdir: str, corpus: _Corpus, say: Callable[[str], None]) -> Rates:
    """Measure every append contender, each repetition in a fresh store."""
    single = corpus.events[:_SINGLE_EVENTS]
    entries = layout_entries(corpus.events, workdir, _LOG_NAME)
    first = Entries(entries.log[: 2 * _SINGLE_EVENTS], entries.ids[:_SINGLE_EVENTS],
                    entries.streams[:_SINGLE_EVENTS])
    stores: dict[str, Callable[[str], float]] = {
        "ours_single": lambda p: _ours(p, single, 1),
        "ours_batched": lambda p: _ours(p, corpus.events, _BATCH),
        "layout_single": lambda p: layout(p, first, _LOG_NAME, 1),
        "layout_batched": lambda p: layout(p, entries, _LOG_NAME, _BATCH),
        "raw_single": lambda p: _raw(p, corpus.payloads[:_SINGLE_EVENTS], 1),
        "raw_batched": lambda p: _raw(p, corpus.payloads, _BATCH),
        "sqlite_single": lambda p: _sqlite(p, single, 1),
        "sqlite_batched": lambda p: _sqlite(p, corpus.events, _BATCH),
        "app_ours": lambda p: _app_ours(p, corpus.texts),
        "app_popo": lambda p: _app_popo(p, corpus.texts),
        "app_sqlite": lambda p: _app_sqlite(p, corpus.texts),
    }
    return _medians(
        {label: functools.partial(_fresh, workdir, measure) for label, measure in stores.items()},
        say,
    )


def _replays(workdir: str, corpus: _Corpus, count: int, say: Callable[[str], None]) -> Rates:
    """Fill both replay stores once, then read each back :data:`_REPEATS` times."""
    ours, raw = os.path.join(workdir, "replay-ours"), os.path.join(workdir, "replay-raw")
    _fill(ours, raw, _replay_events(corpus, count))
    say(f"replay stores filled with {count:,} events each")
    return _medians({"replay_ours": lambda: _replay_ours(ours),
                     "replay_raw": lambda: _replay_raw(raw)}, say)


def _ratios(rates: Rates) -> Rates:
    """Return each headline ratio next to the target the issue sets for it.

    ``raw_vs_*`` ratios are the physical ceilings of the matching ``ours_vs_*`` ones:
    our recorder writes the same bytes plus envelopes, chain and indexes on raw LMDB.
    ``layout_*`` splits the gap: the format's own cost on disk (``layout_vs_raw``) and
    our code's cost on top of it (``ours_vs_layout``); see :mod:`.bench_layout`.
    ``app_ours_vs_sqlite`` is what an eventsourcing application sees when it moves from
    the SQLite module to ours: the library's own per-event cost included, as in the
    anchors of reference/perf-anchors.md.
    """
    pairs = {
        "ours_vs_raw_batched": ("ours_batched", "raw_batched", 0.35),
        "ours_vs_raw_single": ("ours_single", "raw_single", None),
        "ours_vs_sqlite_batched": ("ours_batched", "sqlite_batched", 3.0),
        "ours_vs_sqlite_single": ("ours_single", "sqlite_single", 1.0),
        "raw_vs_sqlite_batched": ("raw_batched", "sqlite_batched", None),
        "raw_vs_sqlite_single": ("raw_single", "sqlite_single", None),
        "ours_vs_layout_batched": ("ours_batched", "layout_batched", None),
        "ours_vs_layout_single": ("ours_single", "layout_single", None),
        "layout_vs_raw_batched": ("layout_batched", "raw_batched", None),
        "layout_vs_raw_single": ("layout_single", "raw_single", None),
        "layout_vs_sqlite_batched": ("layout_batched", "sqlite_batched", None),
        "layout_vs_sqlite_single": ("layout_single", "sqlite_single", None),
        "app_ours_vs_popo": ("app_ours", "app_popo", 0.7),
        "app_ours_vs_sqlite": ("app_ours", "app_sqlite", None),
        "replay_ours_vs_raw": ("replay_ours", "replay_raw", 0.4),
    }
    out: Rates = {}
    for key, (top, bottom, target) in pairs.items():
        out[key] = round(float(rates[f"{top}_eps"]) / float(rates[f"{bottom}_eps"]), 3)
        if target is not None:
            out[f"target_{key}"] = target
    return out


def run(
    events: int = 20_000,
    replay_events: int = 100_000,
    workdir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, float | int | str]:
    """Measure appends and replay; return rates (events/s), ratios and targets, flat.

    Args:
        events: events per batched append run; single-event runs use at most 2,000 and
            the application runs at most 10,000.
        replay_events: events written once, then read back and decoded.
        workdir: where to make the temporary stores; the system default when None.
        progress: called with one line per finished repetition of a measurement.

    Returns:
        A JSON-able dict: ``*_eps`` rates, ``*_vs_*`` ratios, ``target_*`` values,
        the event counts, the mean payload size and SQLite's durability setting.
    """
    def say(line: str) -> None:
        if progress is not None:
            progress(line)

    events, replay_events = max(events, 1), max(replay_events, 1)
    corpus = _corpus(events, min(_APP_EVENTS, events))
    tmp = tempfile.mkdtemp(prefix="ll-bench-", dir=workdir)
    try:
        result: Rates = {
            "events": len(corpus.events),
            "single_events": min(_SINGLE_EVENTS, len(corpus.events)),
            "app_events": len(corpus.texts),
            "replay_events": replay_events,
            "mean_payload_bytes": round(statistics.fmean(map(len, corpus.payloads)), 1),
            "sqlite_synchronous": _sqlite_synchronous(tmp),
        }
        result |= _appends(tmp, corpus, say)
        result |= _replays(tmp, corpus, replay_events, say)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return result | _ratios(result)
