"""The sync protocol without sockets: a hub's service and a replica in one process.

Clone equals source byte for byte; a pull moves only what is new; an interrupted pull
continues; a damaged object is refused with its hash named and nothing of it written;
a diverged replica is refused; the outbox is pushed and decided at the hub; an erasure
reaches the replica, which compacts and acknowledges it; a partial replica gets only
the bodies its key may read, and verifies with the others withheld.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from lessonledger.commands import Ledger, open_ledger
from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.events import ERASED, SNAPSHOT_TAKEN
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog, NewEvent
from lessonledger.ledger.verify import verify
from lessonledger.projections.views import object_view
from lessonledger.sync.errors import DivergedError, TamperedObjectError, UnreachableError
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.protocol import Chunk, decode_reply, encode
from lessonledger.sync.replica import prepare_clone, pull, push, queue_commands
from lessonledger.sync.service import SyncService
from lessonledger.sync.snapshots import erasures, take_snapshot
from lessonledger.sync.state import SyncState, excused
from residue import windows, windows_left
from sync_workload import PROJECTS, fill


def raw(home: str) -> list[tuple[int, bytes, bytes | None, bytes | None]]:
    lmdb_home = acquire(home, sync=False)
    try:
        return list(EventLog(lmdb_home, LOG_NAME).raw())
    finally:
        release(lmdb_home)


def lessons(home: str) -> bytes:
    with open_ledger(home, sync=False) as ledger:
        return msgspec.json.encode(ledger.catalogue(everything=True))


def replica_lessons(home: str) -> bytes:
    from lessonledger.commands.read_side import Reader

    with Reader(home, record=False) as reader:
        return msgspec.json.encode(reader.catalogue(everything=True))


TEXTS: dict[str, list[str]] = {}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The hub's home, written once; each test gets a copy of its own to change."""
    path = tmp_path_factory.mktemp("template") / "hub"
    with open_ledger(path, sync=False) as ledger:
        texts = fill(ledger, 700)
    return path, texts


@pytest.fixture
def hub(template: tuple[Path, list[str]], tmp_path: Path) -> str:
    path = str(tmp_path / "hub")
    shutil.copytree(template[0], path)
    TEXTS[path] = template[1]
    return path


def clone(ledger: Ledger, into: Path, name: str = "r1", **kw: object) -> Path:
    prepare_clone("local", into, name)
    pull(into, LocalExchange(SyncService(ledger, **kw), name), sync=False)  # type: ignore[arg-type]
    return into


class Failing(LocalExchange):
    """Dies after ``replies`` replies, as a killed pull would."""

    def __init__(self, service: SyncService, replies: int) -> None:
        super().__init__(service, "r1")
        self.left = replies

    def call(self, frame: bytes) -> bytes:
        if self.left == 0:
            msg = "cut"
            raise UnreachableError(msg)
        self.left -= 1
        return super().call(frame)


class Flipping(LocalExchange):
    """Flips one byte inside the ``which``-th chunk's data, as a bad path would."""

    def __init__(self, service: SyncService, flip: Callable[[Chunk], Chunk]) -> None:
        super().__init__(service, "r1")
        self.flip = flip
        self.done = False

    def call(self, frame: bytes) -> bytes:
        reply = super().call(frame)
        decoded = decode_reply(reply)
        if isinstance(decoded, Chunk) and not self.done:
            self.done = True
            return encode(self.flip(decoded))
        return reply


def test_a_clone_holds_the_source_byte_for_byte_and_folds_the_same_views(
        hub: str, tmp_path: Path) -> None:
    with open_ledger(hub, sync=False) as ledger:
        snap = take_snapshot(ledger, "main", "test")
        replica = clone(ledger, tmp_path / "r1")
        hub_objects = object_view(ledger.runner).dump()
    assert raw(str(replica)) == raw(hub)
    assert replica_lessons(str(replica)) == lessons(hub)
    with open_ledger(hub, sync=False) as ledger:
        from lessonledger.commands.read_side import Reader

        with Reader(str(replica), record=False) as reader:
            assert object_view(reader.runner).dump() == hub_objects
            assert object_view(reader.runner).refs == {"main": snap.id}
            for project in PROJECTS:
                mine = reader.recall(project, "op-1 target-2", record=False)
                theirs = ledger.recall(project, "op-1 target-2", record=False)
                # Recency moves with the clock between the two calls: compare the rest.
                assert [(r.lesson_id, r.line, r.bm25_rank, r.vector_rank)
                        for r in mine.lessons] == [(r.lesson_id, r.line, r.bm25_rank,
                                                    r.vector_rank) for r in theirs.lessons]
                assert mine.lessons
    assert verify(EventLog(acquire(str(replica), sync=False), LOG_NAME)).ok


def test_a_pull_after_new_events_moves_only_them(hub: str, tmp_path: Path) -> None:
    with open_ledger(hub, sync=False) as ledger:
        replica = clone(ledger, tmp_path / "r1")
        before = ledger.head()
        fill(ledger, 100, seed=7, tag="more")
        new = [row for row in raw(hub) if row[0] > before]
        exchange = LocalExchange(SyncService(ledger), "r1")
        result = pull(replica, exchange, sync=False)
        again = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
    assert again.fetched == 0
    assert result.fetched == len(new) > 100
    size = sum(len(envelope) + len(body or b"") for _, envelope, body, _ in new)
    # Every byte moved is one of the new records, or framing around them.
    assert size <= exchange.received <= size * 1.2 + 2000
    assert raw(str(replica)) == raw(hub)


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 7])
def test_an_interrupted_clone_continues_to_the_same_result(
        hub: str, tmp_path: Path, cut: int) -> None:
    with open_ledger(hub, sync=False) as ledger:
        service = SyncService(ledger)
        replica = tmp_path / "r1"
        prepare_clone("local", replica, "r1")
        with pytest.raises(UnreachableError):
            pull(replica, Failing(service, cut), sync=False)
        partial = raw(str(replica))
        assert len(partial) < ledger.head()
        assert partial == raw(hub)[:len(partial)]
        pull(replica, LocalExchange(service, "r1"), sync=False)
    assert raw(str(replica)) == raw(hub)
    assert replica_lessons(str(replica)) == lessons(hub)


def _flip_envelope(chunk: Chunk) -> Chunk:
    envelopes = list(chunk.envelopes)
    i = random.Random(1).randrange(len(envelopes))
    damaged = bytearray(envelopes[i])
    damaged[-5] ^= 0x01
    envelopes[i] = bytes(damaged)
    return Chunk(chunk.start, envelopes, chunk.bodies, chunk.withheld)


def _flip_body(chunk: Chunk) -> Chunk:
    bodies = list(chunk.bodies)
    damaged = bytearray(bodies[3])
    damaged[len(damaged) // 2] ^= 0x40
    bodies[3] = bytes(damaged)
    return Chunk(chunk.start, chunk.envelopes, bodies, chunk.withheld)


@pytest.mark.parametrize("fold", [True, False])  # without a fold, chunks are packed
@pytest.mark.parametrize("flip", [_flip_envelope, _flip_body])
def test_a_damaged_object_is_refused_with_its_hash_named(
        hub: str, tmp_path: Path, flip: Callable[[Chunk], Chunk], fold: bool) -> None:
    with open_ledger(hub, sync=False) as ledger:
        service = SyncService(ledger)
        ids = object_view(ledger.runner).segment_ids()
        replica = tmp_path / "r1"
        prepare_clone("local", replica, "r1")
        with pytest.raises(TamperedObjectError) as caught:
            pull(replica, Flipping(service, flip), sync=False, fold=fold)
        assert raw(str(replica)) == []  # nothing of the damaged chunk was written
        error = caught.value
        assert error.address.hex() in str(error)
        if flip is _flip_envelope:
            assert error.kind == "segment"
            assert error.address == ids[0]
        else:
            commitment = msgspec.msgpack.decode(raw(hub)[3][1], type=Envelope).commitment
            assert error.kind == "body"
            assert error.address == commitment
        pull(replica, LocalExchange(service, "r1"), sync=False, fold=fold)
    assert raw(str(replica)) == raw(hub)


def test_a_replica_that_wrote_its_own_record_is_refused_as_diverged(
        hub: str, tmp_path: Path) -> None:
    with open_ledger(hub, sync=False) as ledger:
        replica = clone(ledger, tmp_path / "r1")
        home = acquire(str(replica), sync=False)
        EventLog(home, LOG_NAME).append([NewEvent("stray", 0, "stray", b"local")])
        release(home)
        fill(ledger, 5, seed=3, tag="later")
        with pytest.raises(DivergedError):
            pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)


def _outcome_line(key: str, principal: str) -> bytes:
    return msgspec.json.encode({
        "command": "observe_outcome", "key": key, "principal": principal,
        "session": f"{principal}-s", "project": PROJECTS[0], "passed": True,
        "task": f"made offline by {principal}",
        "operations": [{"op": "op-9", "target": "t", "ok": True, "order": 0}]})


def test_commands_made_on_a_replica_wait_in_its_outbox_and_the_hub_decides_them(
        hub: str, tmp_path: Path) -> None:
    with open_ledger(hub, sync=False) as ledger:
        replica = clone(ledger, tmp_path / "r1")
        assert queue_commands(replica, [_outcome_line("offline-1", "dave"),
                                        _outcome_line("offline-2", "alice")], sync=False) == 2
        # Meanwhile the hub erases alice: her command made before it is not taken back.
        ledger.erase(key="erase-alice", what="principal", subject="alice", reason="asked")
        outcome = push(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        accepted, refused = outcome.results
        assert accepted.key == "offline-1"
        assert accepted.positions
        assert not accepted.refused
        assert refused.key == "offline-2"
        assert "erased after" in refused.refused
        assert outcome.pull.erasures  # the pull applied and acknowledged the erasure
    # Only the acknowledgement, written at the hub after the pull, is not here yet.
    mine = raw(str(replica))
    assert mine == raw(hub)[:-1]
    assert len(mine) == outcome.pull.head
    home = acquire(str(replica), sync=False)
    try:
        state = SyncState(home)
        with home.env.begin() as txn:
            assert state.outbox(txn) == []
    finally:
        release(home)
    # A retried push (the answer lost) writes nothing twice: the key is the same.
    with open_ledger(hub, sync=False) as ledger:
        queue_commands(replica, [_outcome_line("offline-1", "dave")], sync=False)
        head = ledger.head()
        again = push(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        assert again.results[0].positions == accepted.positions
        assert ledger.head() == head


def test_an_erasure_reaches_the_replica_which_compacts_and_acknowledges(
        hub: str, tmp_path: Path) -> None:
    with open_ledger(hub, sync=False) as ledger:
        replica = clone(ledger, tmp_path / "r1")
        ids = object_view(ledger.runner).segment_ids()
        gone = ledger.erase(key="erase-bob", what="principal", subject="bob", reason="asked")
        erased = [body for p, _, body, _ in raw(str(replica)) if p in set(gone.erased)]
        assert erased
        assert all(erased)
        bobs = windows([t.encode() for t in TEXTS[hub] if t.startswith("bob ")])
        kept = windows([t.encode() for t in TEXTS[hub] if not t.startswith("bob ")])
        assert windows_left(str(replica), bobs), "the scan finds nothing before: it is blind"
        result = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        assert result.erasures == [gone.position]
        assert result.pending == []
        assert object_view(ledger.runner).segment_ids()[:len(ids) - 1] == ids[:-1]
    rows = erasures(hub)
    assert [(r.position, r.acked_by) for r in rows] == [(gone.position, ["r1"])]
    assert raw(str(replica))[: gone.position] == raw(hub)[: gone.position]
    assert all(body is None for p, _, body, _ in raw(str(replica)) if p in set(gone.erased))
    left = windows_left(str(replica), bobs - kept)
    assert not left, left
    assert windows_left(str(replica), set(list(kept)[:500]))
    assert replica_lessons(str(replica)) == lessons(hub)


def test_a_partial_replica_gets_only_what_its_key_may_read_and_verifies(
        hub: str, tmp_path: Path) -> None:
    allowed = {PROJECTS[0], "global", ""}

    def may_read(peer: str, envelope: Envelope) -> bool:
        return envelope.scope in allowed

    with open_ledger(hub, sync=False) as ledger:
        replica = clone(ledger, tmp_path / "r1", may_read=may_read)
    rows = raw(str(replica))
    hub_rows = {p: (e, b) for p, e, b, _ in raw(hub)}
    withheld = [p for p, _, body, _ in rows if body is None]
    assert withheld
    for position, envelope, body, _ in rows:
        kind = msgspec.msgpack.decode(envelope, type=Envelope)
        assert envelope == hub_rows[position][0]  # every envelope travels
        if kind.scope in allowed or kind.type in (ERASED, SNAPSHOT_TAKEN):
            assert body == hub_rows[position][1]
        else:
            assert body is None
    home = acquire(str(replica), sync=False)
    try:
        report = verify(EventLog(home, LOG_NAME), withheld=excused(home)[0])
    finally:
        release(home)
    assert report.ok
    assert report.withheld == withheld


def test_a_copy_made_before_an_erasure_is_cleaned_when_it_pulls(
        hub: str, tmp_path: Path) -> None:
    import shutil

    with open_ledger(hub, sync=False) as ledger:
        replica = clone(ledger, tmp_path / "r1")
        backup = tmp_path / "backup"
        shutil.copytree(replica, backup)  # a backup of the replica, before the erasure
        ledger.erase(key="erase-carol", what="principal", subject="carol", reason="asked")
        carols = windows([t.encode() for t in TEXTS[hub] if t.startswith("carol ")])
        carols -= windows([t.encode() for t in TEXTS[hub] if not t.startswith("carol ")])
        assert windows_left(str(backup), carols)
        restored = pull(backup, LocalExchange(SyncService(ledger), "backup"), sync=False)
        assert restored.erasures
        assert not restored.pending
    assert not windows_left(str(backup), carols)
    assert replica_lessons(str(backup)) == lessons(hub)


def saved_positions(home: str) -> dict[str, int]:
    """Where each view of ``home`` was saved (what a reader starts its fold from)."""
    from lessonledger.commands.read_side import Reader

    with Reader(home, record=False) as reader:
        return dict(reader.runner.saved_at)


def test_a_clone_that_defers_its_fold_answers_as_a_folded_one_and_folds_later(
        hub: str, tmp_path: Path) -> None:
    from lessonledger.commands.read_side import Reader
    from lessonledger.sync.replica import refold

    with open_ledger(hub, sync=False) as ledger:
        take_snapshot(ledger, "main", "test")
        prepare_clone("local", tmp_path / "r1", "r1")
        result = pull(tmp_path / "r1", LocalExchange(SyncService(ledger), "r1"), sync=False,
                      fold=False)
        head = ledger.head()
        hub_objects = object_view(ledger.runner).dump()
        theirs = {p: ledger.recall(p, "op-1 target-2", record=False) for p in PROJECTS}
    replica = str(tmp_path / "r1")
    assert result.head == result.fetched == head
    assert result.fold_seconds == 0.0
    assert raw(replica) == raw(hub)
    # Nothing folded is saved yet: a reader folds the whole log itself, and answers the
    # same as after a folding clone.
    assert set(saved_positions(replica).values()) == {0}
    assert replica_lessons(replica) == lessons(hub)

    def answers() -> None:
        with Reader(replica, record=False) as reader:
            assert object_view(reader.runner).dump() == hub_objects
            for project in PROJECTS:
                mine = reader.recall(project, "op-1 target-2", record=False)
                assert mine.lessons
                assert [(r.lesson_id, r.line, r.bm25_rank, r.vector_rank)
                        for r in mine.lessons] == [
                    (r.lesson_id, r.line, r.bm25_rank, r.vector_rank)
                    for r in theirs[project].lessons]

    answers()
    assert refold(replica) == head
    assert set(saved_positions(replica).values()) == {head}
    answers()
    assert replica_lessons(replica) == lessons(hub)
    assert verify(EventLog(acquire(replica, sync=False), LOG_NAME)).ok


@pytest.mark.parametrize("cut", [3, 5])
def test_an_interrupted_clone_that_defers_its_fold_continues_to_the_same_result(
        hub: str, tmp_path: Path, cut: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from lessonledger.sync import replica as replica_module

    monkeypatch.setattr(replica_module, "BATCH_BYTES", 1)  # each chunk commits alone
    with open_ledger(hub, sync=False) as ledger:
        service = SyncService(ledger)
        replica = tmp_path / "r1"
        prepare_clone("local", replica, "r1")
        with pytest.raises(UnreachableError):
            pull(replica, Failing(service, cut), sync=False, fold=False)
        partial = raw(str(replica))
        assert 0 < len(partial) < ledger.head()
        again = pull(replica, LocalExchange(service, "r1"), sync=False, fold=False)
        assert again.fetched == ledger.head() - len(partial)
    assert raw(str(replica)) == raw(hub)
    assert replica_lessons(str(replica)) == lessons(hub)


@pytest.mark.parametrize("folded", [True, False])
def test_a_pull_that_defers_its_fold_still_folds_an_erasure_before_acknowledging_it(
        hub: str, tmp_path: Path, folded: bool) -> None:
    with open_ledger(hub, sync=False) as ledger:
        prepare_clone("local", tmp_path / "r1", "r1")
        pull(tmp_path / "r1", LocalExchange(SyncService(ledger), "r1"), sync=False,
             fold=folded)
        gone = ledger.erase(key="erase-bob", what="principal", subject="bob", reason="asked")
        bobs = windows([t.encode() for t in TEXTS[hub] if t.startswith("bob ")])
        bobs -= windows([t.encode() for t in TEXTS[hub] if not t.startswith("bob ")])
        replica = str(tmp_path / "r1")
        assert windows_left(replica, bobs), "the scan finds nothing before: it is blind"
        result = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False,
                      fold=False)
        assert result.erasures == [gone.position]
        assert result.pending == []
        assert result.fold_seconds > 0
    assert [(r.position, r.acked_by) for r in erasures(hub)] == [(gone.position, ["r1"])]
    left = windows_left(replica, bobs)
    assert not left, left
    assert set(saved_positions(replica).values()) == {gone.position}
    assert replica_lessons(replica) == lessons(hub)


@pytest.mark.parametrize("budget", [8 << 20, 30_000])
def test_a_clone_by_multi_segment_fetches_holds_the_source_byte_for_byte(
        hub: str, tmp_path: Path, budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from lessonledger.sync import service as service_module

    # A small budget cuts chunks short: the replica asks for the rest of each segment.
    monkeypatch.setattr(service_module, "BODY_BUDGET", budget)
    with open_ledger(hub, sync=False) as ledger:
        exchange = LocalExchange(SyncService(ledger), "r1")
        exchange.fetch_segments = 4
        prepare_clone("local", tmp_path / "r1", "r1")
        result = pull(tmp_path / "r1", exchange, sync=False)
        assert result.fetched == ledger.head()
    assert raw(str(tmp_path / "r1")) == raw(hub)
    assert replica_lessons(str(tmp_path / "r1")) == lessons(hub)


def test_a_clone_that_defers_its_fold_is_laid_out_by_the_first_open_and_not_read_only(
        hub: str, tmp_path: Path) -> None:
    """Its chunks are stored whole (packs); no reader sees the log without them."""
    from lessonledger.ledger.errors import LedgerConfigError
    from lessonledger.ledger.lmdb_env import read_only
    from lessonledger.ledger.packs import pending

    replica = tmp_path / "r1"
    with open_ledger(hub, sync=False) as ledger:
        prepare_clone("local", replica, "r1")
        result = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False,
                      fold=False)
        assert result.head == result.fetched == ledger.head()
    with pytest.raises(LedgerConfigError, match="not laid out yet"), \
            read_only(str(replica)):
        pass
    home = acquire(str(replica), sync=False)
    try:
        assert not pending(home)
        assert list(EventLog(home, LOG_NAME).raw()) == raw(hub)
        assert verify(EventLog(home, LOG_NAME)).ok
    finally:
        release(home)
    with read_only(str(replica)) as home:
        assert EventLog(home, LOG_NAME).head() == result.head


_OPEN_AT_ONCE = """
import sys, time
from lessonledger.ledger.lmdb_env import acquire, release
while time.time() < float(sys.argv[2]):
    pass
release(acquire(sys.argv[1], sync=False))
"""


def test_two_processes_opening_a_packed_clone_at_once_lay_it_out_once(
        hub: str, tmp_path: Path) -> None:
    """Its fold and a pull run again both unpack: one file after the other, none twice."""
    import subprocess
    import sys
    import time

    replica = tmp_path / "r1"
    with open_ledger(hub, sync=False) as ledger:
        prepare_clone("local", replica, "r1")
        pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False, fold=False)
    start = str(time.time() + 1.0)
    openers = [subprocess.Popen([sys.executable, "-c", _OPEN_AT_ONCE, str(replica), start],
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for opener in openers:
        _, err = opener.communicate(timeout=120)
        assert opener.returncode == 0, err
    home = acquire(str(replica), sync=False)
    try:
        assert list(EventLog(home, LOG_NAME).raw()) == raw(hub)
    finally:
        release(home)
    assert not [p for p in (replica / "ledger.packs").iterdir()]


def test_a_clone_that_defers_its_fold_of_a_hub_with_an_erasure_applies_it(
        hub: str, tmp_path: Path) -> None:
    """The chunk with the ``Erased`` record, and all after it, go in rows, as a folding
    clone writes them: the erasure is applied, compacted and acknowledged."""
    replica = tmp_path / "r1"
    with open_ledger(hub, sync=False) as ledger:
        gone = ledger.erase(key="erase-bob", what="principal", subject="bob", reason="asked")
        prepare_clone("local", replica, "r1")
        result = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False,
                      fold=False)
        assert result.erasures == [gone.position]
    bobs = windows([t.encode() for t in TEXTS[hub] if t.startswith("bob ")])
    bobs -= windows([t.encode() for t in TEXTS[hub] if not t.startswith("bob ")])
    left = windows_left(str(replica), bobs)
    assert not left, left
    # The hub has one more record since: the replica's acknowledgement.
    assert raw(str(replica)) == raw(hub)[:result.head]
    assert len(raw(hub)) == result.head + 1
