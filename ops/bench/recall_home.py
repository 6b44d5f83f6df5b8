"""The real plan-time recall for ``bench recall``: a ledger home holding the corpus.

The benchmark's lessons are written into a fresh home as the log holds lessons (one
evidence outcome per project, one ``LessonProposed`` per lesson, global ones in the
global scope), the benchmark's own index is saved as the home's vector index at the
head, and the ledger is opened on it as an agent would: durable, recall recording what
it shows. So ``p50_ms``/``p99_ms`` time ``Ledger.recall`` end to end — BM25, vector
similarity, ranking, caps, and recording the ``LessonRecalled`` event: queued, then
committed durably by the ledger's background flush within 50 ms, whose commits run
beside the timed calls (:mod:`lessonledger.commands.deferred`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from uuid import UUID

from lessonledger.commands.ledger import Ledger
from lessonledger.ledger.events import AnyEvent, LessonProposed, OutcomeObserved
from lessonledger.ledger.ids import derived_id, new_event_id
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.submission import new_event
from lessonledger.ops.bench.recall import Corpus, PlanRecall

__all__ = ["ledger_recall"]

_NS = UUID("5d9c2f1e-7b3a-4c8d-9e0f-1a2b3c4d5e6f")
_BATCH = 2000


def _events(corpus: Corpus) -> list[AnyEvent]:
    # Each lesson gets an operation and target of its own: lessons that said the same
    # thing in two projects would (rightly) be promoted into one global lesson.
    outcomes = {p: derived_id(_NS, p) for p in dict.fromkeys(corpus.projects)}
    events: list[AnyEvent] = [
        OutcomeObserved(outcome_id=o, project=p, passed=True, signal="verification")
        for p, o in outcomes.items()]
    global_ids = set(corpus.global_ids)
    events += [
        LessonProposed(
            lesson_id=lesson_id, text=text[:2000], kind="do", prefer_op=f"op:{i}",
            target=f"target:{i}", scope="global" if lesson_id in global_ids else project,
            source="extractor", evidence=[outcomes[project]], confidence=0.4 + (i % 5) / 10)
        for i, (lesson_id, text, project) in enumerate(
            zip(corpus.lesson_ids, corpus.texts, corpus.projects, strict=True))]
    return events


def _fill(home: str, corpus: Corpus) -> None:
    lmdb = acquire(home, sync=False)
    try:
        log = EventLog(lmdb, LOG_NAME)
        events = _events(corpus)
        for start in range(0, len(events), _BATCH):
            log.append_decided([new_event(e, stream=(eid := new_event_id()), version=0,
                                          event_id=eid, actor="bench")
                                for e in events[start:start + _BATCH]])
        corpus.index.save(Path(home) / "vectors", log.head())
    finally:
        release(lmdb)


def ledger_recall(stack: ExitStack, workdir: str | None = None) -> PlanRecall:
    """A plan-recall hook timing ``Ledger.recall`` on a home built from each corpus.

    The ledgers it opens are closed when ``stack`` closes.
    """
    def plan(corpus: Corpus) -> Callable[[str, str], object]:
        home = stack.enter_context(tempfile.TemporaryDirectory(dir=workdir))
        _fill(home, corpus)
        ledger = Ledger(home)
        stack.callback(ledger.close)

        def recall(project: str, query: str) -> object:
            return ledger.recall(project, query, session="bench")

        return recall

    return plan
