"""The log's own guarantees: positions, idempotency, stream conflicts, atomic batches."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from eventsourcing.persistence import IntegrityError
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from lessonledger.ledger import (
    MAX_BODY_BYTES,
    BodyTooLargeError,
    EventLog,
    IdempotencyConflictError,
    InvalidEventError,
    LedgerConfigError,
    LedgerCorruptError,
    LMDBApplicationRecorder,
    NewEvent,
    StreamConflictError,
)
from lessonledger.ledger.envelope import decode_envelope, encode_envelope
from lessonledger.ledger.events import Erased
from lessonledger.ledger.lmdb_env import LMDBHome, acquire, release
from lessonledger.ledger.submission import new_event
from lessonledger.ledger.verify import verify
from residue import erase


@pytest.fixture
def lmdb_home(home: str) -> Iterator[LMDBHome]:
    h = acquire(home, sync=False)
    yield h
    release(h)


@pytest.fixture
def log(lmdb_home: LMDBHome) -> EventLog:
    return EventLog(lmdb_home, "ledger")


def ev(stream: UUID | str, version: int = 0, *, eid: bytes = b"", payload: bytes = b"p",
       type: str = "t") -> NewEvent:
    return NewEvent(stream, version, type, payload, event_id=eid)


def test_positions_are_consecutive_across_batches(log: EventLog) -> None:
    assert log.append([ev(uuid4()), ev(uuid4())]) == [1, 2]
    assert log.append([ev(uuid4())]) == [3]
    assert [r.envelope.position for r in log.read()] == [1, 2, 3]
    assert log.head() == 3


def test_repeated_event_id_returns_original_position(log: EventLog) -> None:
    eid, stream = uuid4().bytes, uuid4()
    assert log.append([ev(stream, 0, eid=eid)]) == [1]
    assert log.append([ev(uuid4())]) == [2]
    assert log.append([ev(stream, 0, eid=eid)]) == [1]
    assert log.append([ev(stream, 0, eid=eid), ev(stream, 1)]) == [1, 3]
    assert log.head() == 3
    assert log.position_of(eid) == 1


def test_repeated_id_within_one_batch_is_written_once(log: EventLog) -> None:
    eid, stream = uuid4().bytes, uuid4()
    assert log.append([ev(stream, 0, eid=eid), ev(stream, 0, eid=eid)]) == [1, 1]
    assert log.head() == 1


def test_a_batch_mixing_new_events_and_repeats_indexes_each_new_event_once(
    log: EventLog,
) -> None:
    # The new event before the repeat is indexed, taken back, and indexed again one by one.
    old, a, b, stream, other = uuid4().bytes, uuid4().bytes, uuid4().bytes, uuid4(), uuid4()
    log.append([ev(other, 0, eid=old)])
    assert log.append([ev(stream, 0, eid=a), ev(other, 0, eid=old), ev(stream, 1, eid=b)]) == [
        2, 1, 3]
    assert (log.position_of(a), log.position_of(b)) == (2, 3)
    assert [r.envelope.position for r in log.stream(stream)] == [2, 3]
    assert [r.envelope.position for r in log.stream(other)] == [1]
    assert verify(log).ok


def test_reused_id_for_another_event_is_refused_and_writes_nothing(log: EventLog) -> None:
    eid = uuid4().bytes
    log.append([ev(uuid4(), 0, eid=eid)])
    with pytest.raises(IdempotencyConflictError) as caught:
        log.append([ev(uuid4()), ev(uuid4(), 0, eid=eid)])
    assert caught.value.position == 1
    assert log.head() == 1


def test_stale_stream_version_conflicts_and_the_batch_is_atomic(log: EventLog) -> None:
    stream = uuid4()
    log.append([ev(stream, 0), ev(stream, 1)])
    with pytest.raises(StreamConflictError) as caught:
        log.append([ev(uuid4()), ev(stream, 2), ev(stream, 1)])
    assert isinstance(caught.value, IntegrityError)
    assert (caught.value.stream, caught.value.version) == (stream, 1)
    assert log.head() == 2
    assert log.append([ev(stream, 2)]) == [3]


def test_refused_events_write_nothing(log: EventLog) -> None:
    with pytest.raises(BodyTooLargeError) as too_big:
        log.append([ev(uuid4()), ev(uuid4(), payload=b"x" * (MAX_BODY_BYTES + 1))])
    assert too_big.value.field == "$[1].payload"
    with pytest.raises(InvalidEventError, match="16 bytes"):
        log.append([ev(uuid4(), eid=b"short")])
    with pytest.raises(InvalidEventError, match="stream id"):
        log.append([ev("s" * 1000)])
    assert log.head() == 0


def test_a_writing_block_reads_its_own_appends_and_commits_all_or_nothing(
        log: EventLog) -> None:
    log.append([ev(uuid4())])
    with log.writing() as writing:
        assert writing.append([ev(uuid4()), ev(uuid4())]) == [2, 3]
        assert [r.envelope.position for r in writing.scan(2)] == [2, 3]
        assert writing.read(3, limit=1)[0].envelope.position == 3
        eid = uuid4().bytes
        writing.append([ev(uuid4(), eid=eid)])
        assert writing.position_of(eid) == 4
        assert log.position_of(eid) is None, "visible before the block commits"
        assert writing.appended == 3
    assert log.head() == 4

    def conflicting() -> None:
        with log.writing() as writing:
            stream = uuid4()
            writing.append([ev(stream, 0)])
            writing.append([ev(stream, 0)])

    def interrupted() -> None:
        with log.writing() as writing:
            writing.append([ev(uuid4())])
            raise KeyboardInterrupt

    with pytest.raises(StreamConflictError):
        conflicting()
    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert log.head() == 4, "a block that raised left nothing behind"
    assert verify(log).ok


def test_read_filters_limits_and_stops(log: EventLog) -> None:
    log.append([ev(uuid4(), type="a" if i % 2 else "b") for i in range(10)])
    assert [r.envelope.position for r in log.read(3, limit=3)] == [3, 4, 5]
    assert [r.envelope.position for r in log.read(2, stop=4)] == [2, 3, 4]
    assert [r.envelope.position for r in log.read(1, limit=2, types=["a"])] == [2, 4]
    assert log.read(11) == []


def test_scan_crosses_chunk_boundaries(log: EventLog) -> None:
    log.append([ev(uuid4(), payload=i.to_bytes(4, "big")) for i in range(10_000)])
    payloads = [r.payload for r in log.scan(2)]
    assert payloads == [i.to_bytes(4, "big") for i in range(1, 10_000)]


@pytest.mark.parametrize("stream", [uuid4(), "a-string-stream", ""])
def test_stream_selection_by_version(log: EventLog, stream: UUID | str) -> None:
    log.append([ev(stream, v) for v in range(5)] + [ev(uuid4()), ev("a-string-stream-2", 0)])

    def versions(**kw: int | bool) -> list[int]:
        return [r.envelope.version for r in log.stream(stream, **kw)]  # type: ignore[arg-type]

    assert versions() == [0, 1, 2, 3, 4]
    assert versions(gt=1, lte=3) == [2, 3]
    assert versions(desc=True, limit=2) == [4, 3]
    assert versions(desc=True, lte=2, gt=0) == [2, 1]
    assert all(r.envelope.stream_id == stream for r in log.stream(stream))


def test_erased_bodies_read_as_none_and_still_verify(log: EventLog) -> None:
    log.append([ev(uuid4(), payload=b"secret %d" % i) for i in range(5)])
    assert erase(log, [2, 4]) == 2
    assert [r.payload for r in log.read(stop=5)] == [b"secret 0", None, b"secret 2", None,
                                                     b"secret 4"]
    report = verify(log)
    assert report.ok
    assert report.erased == [2, 4]


@pytest.mark.parametrize(("start", "stop"), [(1, 6), (2, 5), (5, 5), (6, 9), (4, 3), (9, 12)])
def test_stored_reads_a_range_as_raw_does_erased_bodies_as_none(
        log: EventLog, start: int, stop: int) -> None:
    log.append([ev(uuid4(), payload=b"secret %d" % i) for i in range(5)])
    erase(log, [2, 5])  # the last body too: a range may end on an envelope without one
    envelopes, bodies = log.stored(start, stop)
    expected = [(envelope, body) for p, envelope, body, _ in log.raw() if start <= p <= stop]
    assert list(zip(envelopes, bodies, strict=True)) == expected
    assert len(expected) == max(0, min(stop, 6) - start + 1)  # the erasure is position 6


def test_a_body_deleted_without_an_erasure_is_damage(log: EventLog) -> None:
    log.append([ev(uuid4(), payload=b"secret %d" % i) for i in range(5)])
    erase(log, [2])
    assert log.erase_bodies([4]) == 1  # no Erased record names 4
    report = verify(log)
    assert not report.ok
    assert report.erased == [2]
    assert [(f.position, f.kind) for f in report.problems] == [(4, "body")]
    assert "no erasure names it" in report.problems[0].detail


@pytest.mark.parametrize("named", [[7], [8], [10**12], [2, 8, 10**12]])
def test_an_erasure_record_naming_its_own_or_a_later_position_is_damage(
    log: EventLog, named: list[int],
) -> None:
    """A forged record (appended by the raw path) naming what comes after it explains nothing.

    An erasure takes bodies already in the log, so every position its record names is below
    the record's own; one naming a position at or after it (or one that does not exist) is
    reported at the record, and those positions' missing bodies are damage too.
    """
    log.append([ev(uuid4(), payload=b"secret %d" % i) for i in range(5)])
    erase(log, [1])  # a real erasure: the record is position 6
    assert log.erase_bodies([1]) == 0
    forged = [p for p in named if p != 2]
    eid = uuid4()
    record = new_event(Erased(what="session", subject="x", by="x", reason="x",
                              positions=named), stream=eid, version=0, event_id=eid,
                       actor="forger")
    assert log.append([record]) == [7]
    log.append([ev(uuid4(), payload=b"later")])  # position 8
    log.erase_bodies([p for p in named if p <= 8 and p != 7])
    report = verify(log)
    kinds = [(f.position, f.kind) for f in report.problems]
    assert (7, "body") in kinds
    detail = next(f.detail for f in report.problems if f.position == 7)
    assert "at or after its own" in detail
    assert str(min(forged)) in detail
    for p in forged:
        if p <= 8 and p != 7:
            assert (p, "body") in kinds  # its body is gone and no real erasure names it
    assert report.erased == [1] + ([2] if 2 in named else [])


def test_an_erasure_record_without_its_body_is_damage_and_explains_nothing(
    log: EventLog,
) -> None:
    log.append([ev(uuid4(), payload=b"secret %d" % i) for i in range(3)])
    erase(log, [1, 2])  # the Erased record is position 4
    assert log.erase_bodies([4]) == 1
    report = verify(log)
    assert [(f.position, f.kind) for f in report.problems] == [
        (1, "body"), (2, "body"), (4, "body")]
    assert "erasure record" in report.problems[2].detail
    assert report.erased == []


def test_a_body_missing_from_an_application_log_is_damage(lmdb_home: LMDBHome) -> None:
    recorder = LMDBApplicationRecorder(lmdb_home, "app")
    recorder.log.append([ev(uuid4()) for _ in range(3)])
    assert recorder.log.erase_bodies([2]) == 1
    report = verify(recorder.log)
    assert [(f.position, f.kind) for f in report.problems] == [(2, "body")]


def test_one_durability_setting_per_home_and_process(home: str) -> None:
    first = acquire(home, sync=True)
    try:
        with pytest.raises(LedgerConfigError, match="sync=True"):
            acquire(home, sync=False)
    finally:
        release(first)


_WRITER = textwrap.dedent("""
    import sys, time, uuid
    from lessonledger.ledger.lmdb_env import acquire
    from lessonledger.ledger.log import EventLog, NewEvent
    log = EventLog(acquire(sys.argv[1], sync=False), "app")
    for _ in range(5):
        time.sleep(0.3)
        log.append([NewEvent(uuid.uuid4(), 0, "t", str(time.time()).encode())])
""")


def test_subscription_sees_another_process_commit_promptly(lmdb_home: LMDBHome) -> None:
    recorder = LMDBApplicationRecorder(lmdb_home, "app")
    latencies: list[float] = []
    with recorder.subscribe() as subscription:
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, lmdb_home.path])
        for notification in subscription:
            latencies.append(time.time() - float(notification.state))
            if len(latencies) == 5:
                break
        writer.wait(timeout=30)
    # The poll runs every 50 ms; allow the machine some noise but not a second.
    assert min(latencies) <= 0.1, latencies
    assert max(latencies) < 1.0, latencies


def test_subscription_wakes_at_once_in_process(lmdb_home: LMDBHome) -> None:
    recorder = LMDBApplicationRecorder(lmdb_home, "app")
    with recorder.subscribe() as subscription:
        time.sleep(0.2)  # let the subscription's first pull find nothing
        sent = time.monotonic()
        recorder.log.append([ev(uuid4())])
        assert next(subscription).id == 1
        assert time.monotonic() - sent < 0.5


class LogMachine(RuleBasedStateMachine):
    """Random appends, repeats and stale writes against a plain model of the log."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = __import__("tempfile").mkdtemp(prefix="ll-machine-")
        self.home = acquire(self.dir, sync=False)
        self.log = EventLog(self.home, "ledger")
        self.model: list[tuple[bytes, str, int]] = []
        self.versions: dict[str, int] = {}

    def teardown(self) -> None:
        release(self.home)
        __import__("shutil").rmtree(self.dir, ignore_errors=True)

    @rule(streams=st.lists(st.sampled_from("abcde"), min_size=1, max_size=5))
    def append_fresh(self, streams: list[str]) -> None:
        batch, versions = [], dict(self.versions)
        for s in streams:
            versions[s] = versions.get(s, -1) + 1
            batch.append(ev(s, versions[s], eid=uuid4().bytes))
        positions = self.log.append(batch)
        assert positions == list(range(len(self.model) + 1, len(self.model) + len(batch) + 1))
        self.model += [(e.event_id, str(e.stream), e.version) for e in batch]
        self.versions = versions

    @rule(data=st.data())
    def repeat_one(self, data: st.DataObject) -> None:
        if self.model:
            i = data.draw(st.integers(0, len(self.model) - 1))
            eid, stream, version = self.model[i]
            assert self.log.append([ev(stream, version, eid=eid)]) == [i + 1]

    @rule(stream=st.sampled_from("abcde"))
    def stale_write_conflicts(self, stream: str) -> None:
        if stream in self.versions:
            with pytest.raises(StreamConflictError):
                self.log.append([ev(uuid4()), ev(stream, self.versions[stream])])

    @invariant()
    def log_equals_model(self) -> None:
        stored = [(r.envelope.event_id, str(r.envelope.stream_id), r.envelope.version)
                  for r in self.log.read()]
        assert stored == self.model
        assert self.log.head() == len(self.model)


TestLogMachine = LogMachine.TestCase


def test_one_altered_chain_link_is_one_finding(log: EventLog) -> None:
    log.append([ev("s", i, payload=b"p%d" % i) for i in range(6)])
    with log.home.env.begin(write=True) as txn:
        tree = log.home.env.open_db(b"ledger.log", txn=txn)
        key = (3).to_bytes(8, "big") + b"\x00"
        stored = txn.get(key, db=tree)
        assert stored is not None
        txn.put(key, stored[:-1] + bytes([stored[-1] ^ 1]), db=tree)  # the link's last byte
    assert [(f.position, f.kind) for f in verify(log).problems] == [(3, "envelope")]


def test_append_refuses_a_damaged_tail(log: EventLog) -> None:
    log.append([ev("s", i, payload=b"p%d" % i) for i in range(6)])
    with log.home.env.begin(write=True) as txn:  # the last envelope is gone, its body not
        tree = log.home.env.open_db(b"ledger.log", txn=txn)
        txn.delete((6).to_bytes(8, "big") + b"\x00", db=tree)
    with pytest.raises(LedgerCorruptError) as caught:
        log.append([ev("other", 0, eid=b"n" * 16, payload=b"new")])
    assert caught.value.position == 6
    assert log.position_of(b"n" * 16) is None


def test_stored_envelopes_are_the_canonical_envelope_encoding(log: EventLog) -> None:
    eid = uuid4().bytes
    log.append([ev("s", 0, eid=eid), ev("s", 1), ev("s", 0, eid=eid)])  # one repeat
    stored = [(position, envelope) for position, envelope, _, _ in log.raw()]
    assert [p for p, _ in stored] == [1, 2]
    for position, envelope in stored:
        decoded = decode_envelope(envelope)
        assert decoded.position == position
        assert encode_envelope(decoded) == envelope


def test_a_store_failure_under_a_write_is_the_ledgers_own_error(tmp_path: Path) -> None:
    # A map too small for the batch: LMDB's MapFullError becomes LedgerStorageError, and
    # nothing of the batch is committed.
    from lessonledger.ledger.errors import LedgerStorageError, LessonLedgerError
    from lessonledger.ledger.lmdb_env import acquire, release

    home = acquire(str(tmp_path / "small"), map_size=1 << 20)
    try:
        log = EventLog(home, "ledger")
        log.append([NewEvent("s", 0, "note", b"x")])
        with pytest.raises(LedgerStorageError) as raised:
            log.append([NewEvent("big", v, "note", os.urandom(200_000)) for v in range(8)])
        assert isinstance(raised.value, LessonLedgerError)
        assert "nothing of the failed write was committed" in str(raised.value)
        assert log.head() == 1
    finally:
        release(home)


def test_a_body_put_back_must_be_the_one_its_envelope_commits_to(log: EventLog) -> None:
    """A partial replica restores bodies it was once not sent (sync/refill.py)."""
    from lessonledger.ledger.errors import ReplayMismatchError

    log.append([ev(uuid4(), payload=b"body %d" % i) for i in range(4)])
    kept = {p: body for p, _, body, _ in log.raw() if body is not None}
    assert len(kept) == 4
    assert log.erase_bodies([2, 3]) == 2
    with pytest.raises(ReplayMismatchError, match="commitment"), log.writing() as writing:
        writing.restore_bodies({2: kept[2], 3: kept[2]})  # 3 given 2's body
    assert [p for p, _, body, _ in log.raw() if body is None] == [2, 3]  # nothing put
    with pytest.raises(ReplayMismatchError, match="already"), log.writing() as writing:
        writing.restore_bodies({1: kept[1]})
    with pytest.raises(ReplayMismatchError, match="no envelope"), log.writing() as writing:
        writing.restore_bodies({9: kept[1]})
    with log.writing() as writing:
        assert writing.restore_bodies({2: kept[2], 3: kept[3]}) == 2
    assert {p: body for p, _, body, _ in log.raw()} == kept
