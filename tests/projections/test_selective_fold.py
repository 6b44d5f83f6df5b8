"""The runner's fold, which hands each view only the records it folds with each body
decoded once, ends where handing every record to every view, each decoding for itself,
ends: the same dump and the same position for every registered view, on random logs.

The reference is the fold as it was before the runner chose: every view is given every
record with no shared event (``fold(record, None)``), so each reads the payload with
its own decoder, as its ``apply`` did. The logs mix catalogue events about a few
lessons, outcomes, deltas and keys (so views interact) with any catalogue event at all,
bodies that do not decode, bodies of another type than their record's, and erasures
appended after part of the log was folded (so the runner's refold, which keeps the
views an erasure does not touch, is checked against a fold of the log as it ends).
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any
from uuid import UUID

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lessonledger.ledger.events import (
    EVENT_TYPES,
    AccessGranted,
    AnyEvent,
    DeltaApproved,
    DeltaProposed,
    Erased,
    FactLearned,
    LessonConfirmed,
    LessonContradicted,
    LessonProposed,
    LessonRecalled,
    LessonSuperseded,
    Operation,
    OutcomeObserved,
    encode_event,
    tag_of,
)
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.projections.runner import Projection, Runner, Selective
from lessonledger.projections.views import registry
from strategies import events

P1, P2 = "3f9a0c1b2d4e5f60", "0123456789abcdef"
LESSONS = [UUID(int=n) for n in range(1, 4)]
OUTCOMES = [UUID(int=n) for n in range(10, 14)]
DELTAS = [UUID(int=n) for n in range(20, 22)]
KEY = "rq:m9ZvWk$c6Kx#lm7b6&}r[-[xH+Wj{n2+NeGqx"
PRINCIPALS = ["", "alice", "bob"]
SESSIONS = ["", "s1", "s2"]

_ops = st.lists(st.builds(Operation, op=st.sampled_from(["a", "b"]),
                          target=st.sampled_from(["t", "u"]), ok=st.booleans(),
                          error=st.sampled_from(["", "boom"]),
                          order=st.integers(0, 3)), max_size=3)
_scope = st.sampled_from([P1, P2, "global"])

#: Events about a few shared ids, so that a fold's rows meet each other.
_related: st.SearchStrategy[Any] = st.one_of(
    st.builds(OutcomeObserved, outcome_id=st.sampled_from(OUTCOMES),
              project=st.sampled_from([P1, P2]), passed=st.booleans(),
              signal=st.just("tool"), operations=_ops,
              in_play=st.lists(st.sampled_from(LESSONS), max_size=2),
              fingerprint=st.dictionaries(st.sampled_from(["py", "os"]),
                                          st.sampled_from(["1", "2"]), max_size=2)),
    st.builds(LessonProposed, lesson_id=st.sampled_from(LESSONS), text=st.just("use b"),
              kind=st.just("prefer"), prefer_op=st.just("b"), avoid_op=st.just("a"),
              target=st.just("t"), scope=_scope, source=st.just("loop"),
              evidence=st.lists(st.sampled_from(OUTCOMES), max_size=2)),
    st.builds(LessonConfirmed, lesson_id=st.sampled_from(LESSONS),
              outcome_id=st.sampled_from(OUTCOMES), project=st.sampled_from([P1, P2])),
    st.builds(LessonContradicted, lesson_id=st.sampled_from(LESSONS),
              outcome_id=st.sampled_from(OUTCOMES), project=st.sampled_from([P1, P2]),
              failed=st.booleans()),
    st.builds(LessonSuperseded, lesson_id=st.sampled_from(LESSONS),
              reason=st.sampled_from(["replaced", "decayed", "retired:user"])),
    st.builds(LessonRecalled, lesson_ids=st.lists(st.sampled_from(LESSONS), max_size=3),
              project=st.sampled_from([P1, P2])),
    st.builds(DeltaProposed, delta_id=st.sampled_from(DELTAS), skill=st.just("triage"),
              root=st.just("r"), anchor=st.just("a"), tier=st.just(3), kind=st.just("k"),
              payload=st.just("say hi"), provenance=st.just("outcome"), scope=_scope),
    st.builds(DeltaApproved, delta_id=st.sampled_from(DELTAS), by=st.just("alice")),
    st.builds(FactLearned, fact_id=st.sampled_from(DELTAS), key=st.just("k"),
              value=st.sampled_from(["1", "2"]), scope=_scope),
    st.builds(AccessGranted, key_name=st.just("k1"), public_key=st.just(KEY),
              principal=st.sampled_from(["alice", "bob"])),
)


#: Built once: a strategy made inside ``_record`` was built and validated anew for every
#: record drawn, which was nine tenths of this module's time.
_event: st.SearchStrategy[Any] = st.one_of(_related, _related, events())


@st.composite
def _record(draw: st.DrawFn) -> tuple[str, bytes]:
    """A record's type and payload: mostly a catalogue event, sometimes a bad body."""
    event: AnyEvent = draw(_event)
    kind, payload = tag_of(type(event)), encode_event(event)
    twist = draw(st.integers(0, 19))
    if twist == 0:  # a body that is no catalogue event, under a catalogue type
        payload = draw(st.sampled_from([b"\xc1", msgspec.msgpack.encode({"type": kind})]))
    elif twist == 1:  # a catalogue body under another catalogue type
        kind = draw(st.sampled_from(sorted(EVENT_TYPES)))
    return kind, payload


def _new(kind: str, payload: bytes, n: int, principal: str, session: str) -> NewEvent:
    return NewEvent(stream=UUID(int=1000 + n % 5), version=n, type=kind, payload=payload,
                    occurred_at=n * 1_000_000_000, principal=principal, session=session)


_logs = st.tuples(
    st.lists(st.tuples(_record(), st.sampled_from(PRINCIPALS), st.sampled_from(SESSIONS)),
             min_size=1, max_size=40),
    # erasures after part of the log is folded: (how far the first fold goes, which
    # earlier positions lose their bodies)
    st.lists(st.tuples(st.integers(1, 40), st.sets(st.integers(1, 40), max_size=6)),
             max_size=2),
)


def _reference(log: EventLog) -> dict[str, tuple[int, bytes]] | type[Exception]:
    """Every view handed every record with no shared event: each decodes for itself."""
    views: list[tuple[str, Projection]] = [(r.name, r.fresh()) for r in registry()]
    try:
        for record in log.scan():
            for _, view in views:
                assert isinstance(view, Selective)
                view.fold(record, None)
    except msgspec.DecodeError:
        return msgspec.DecodeError
    return {name: (view.position, view.dump()) for name, view in views}


def _state(views: dict[str, Projection]) -> dict[str, tuple[int, bytes]]:
    return {name: (view.position, view.dump()) for name, view in views.items()}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(_logs)
def test_a_fold_that_skips_and_shares_equals_every_view_reading_every_record(
        logged: tuple[list[Any], list[tuple[int, set[int]]]]) -> None:
    records, erasures = logged
    path = tempfile.mkdtemp(prefix="selective-")
    home = acquire(path, sync=False)
    try:
        log = EventLog(home, "fold")
        # Generated bodies, some never a catalogue event (what a fold passes over): as
        # code appends them, unscreened.
        log.append_decided([_new(kind, payload, n, principal, session)
                            for n, ((kind, payload), principal, session) in enumerate(records)])
        runner = Runner(registry())
        outcome: Any = None
        fresh: Any = None
        try:
            for upto, positions in erasures:
                runner.fold(log, stop=upto)
                head = log.head()
                named = sorted(p for p in positions if p <= head)
                log.erase_bodies(named)
                erased = Erased(what="principal", subject="alice", by="t", reason="r",
                                positions=named)
                log.append([_new(tag_of(Erased), encode_event(erased), head + 1, "", "")])
            runner.fold(log)
            outcome = _state(runner.views)
            fresh = _state(Runner(registry()).fresh(log, None))
        except msgspec.DecodeError:
            outcome = fresh = msgspec.DecodeError
        expected = _reference(log)
        assert outcome == expected
        assert fresh == expected
    finally:
        release(home)
        shutil.rmtree(path, ignore_errors=True)


def test_every_registered_view_is_selective_and_declares_catalogue_types() -> None:
    for entry in registry():
        view = entry.fresh()
        assert isinstance(view, Selective), entry.name
        for declared in (view.folds or frozenset(), view.reads, view.decodes):
            assert declared <= EVENT_TYPES, entry.name
        assert view.decodes <= view.reads, entry.name
        if view.folds is not None:
            assert view.reads <= view.folds, entry.name
