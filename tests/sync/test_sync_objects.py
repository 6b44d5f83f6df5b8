"""The object model: content addresses, the Merkle root, snapshots and their refs."""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import sha256
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.commands import open_ledger
from lessonledger.ledger.events import AnyEvent, SnapshotTaken
from lessonledger.ledger.objects import (
    SEGMENT_SIZE,
    SegmentHasher,
    Snapshot,
    decode_snapshot,
    encode_snapshot,
    join_envelopes,
    merkle_root,
    segment_id,
    snapshot_id,
    split_envelopes,
)
from lessonledger.projections.runner import Runner
from lessonledger.projections.views import object_view
from lessonledger.sync.errors import SyncError, UnknownSnapshotError
from lessonledger.sync.snapshots import checkout, take_snapshot
from sync_workload import fill


def _rfc6962(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962's definition, written as the RFC writes it (split at a power of two)."""
    if not leaves:
        return sha256(b"").digest()
    if len(leaves) == 1:
        return sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return sha256(b"\x01" + _rfc6962(leaves[:k]) + _rfc6962(leaves[k:])).digest()


@given(st.lists(st.binary(min_size=32, max_size=32), max_size=40))
def test_the_merkle_root_is_rfc_6962s(leaves: list[bytes]) -> None:
    assert merkle_root(leaves) == _rfc6962(leaves)


def test_hashes_are_typed_so_kinds_never_share_an_id() -> None:
    snapshot = Snapshot(b"", 1, 0, merkle_root([]), bytes(32), 0, 0, "")
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot
    assert snapshot_id(snapshot) != segment_id([encode_snapshot(snapshot)])
    assert segment_id([b"ab", b"c"]) != segment_id([b"a", b"bc"])


def test_the_view_recomputes_the_chain_and_the_segments_of_the_log(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        fill(ledger, 300)
        view = object_view(ledger.runner)
        head = ledger.head()
        assert view.position == head
        assert view.link == ledger.log.link_at(head)
        stored = [envelope for _, envelope, _, _ in ledger.log.raw()]
        ids = [segment_id(stored[i:i + SEGMENT_SIZE]) for i in range(0, head, SEGMENT_SIZE)]
        assert view.segment_ids() == ids


def test_a_ref_moves_only_by_compare_and_swap(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        fill(ledger, 20)
        first = take_snapshot(ledger, "main", "test")
        fill(ledger, 20, seed=2, tag="b")
        second = take_snapshot(ledger, "main", "test")
        assert second.snapshot.parent == first.id
        assert object_view(ledger.runner).refs == {"main": second.id}

        def stale(runner: Runner) -> Sequence[AnyEvent]:
            here = object_view(runner).snapshot_here(parent=first.id, created_at=1, origin="")
            return [SnapshotTaken(name="main", previous=first.id, parent=first.id,
                                  last=here.last, root=here.root, link=here.link,
                                  erasures=here.erasures, created_at=1)]

        def forged(runner: Runner) -> Sequence[AnyEvent]:
            here = object_view(runner).snapshot_here(parent=b"", created_at=1, origin="")
            return [SnapshotTaken(name="other", last=here.last, root=bytes(32),
                                  link=here.link, erasures=here.erasures, created_at=1)]

        ledger.record(stale)
        ledger.record(forged)
        view = object_view(ledger.runner)
        assert view.refs == {"main": second.id}
        assert [s.id for s in view.snapshots] == [first.id, second.id]
        with pytest.raises(SyncError):
            take_snapshot(ledger, "", "test")


def test_checkout_materialises_the_log_as_it_stood(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        fill(ledger, 60)
        snap = take_snapshot(ledger, "main", "test")
        fill(ledger, 60, seed=3, tag="later")
        with pytest.raises(UnknownSnapshotError):
            checkout(tmp_path / "h", "nope", tmp_path / "x")
    done = checkout(tmp_path / "h", snap.id.hex()[:10], tmp_path / "co")
    assert done.last == snap.snapshot.last
    assert done.erased_later == 0
    with open_ledger(tmp_path / "co", sync=False) as restored:
        assert restored.log.link_at(restored.log.head()) == snap.snapshot.link
        assert restored.head() >= snap.snapshot.last
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        assert ledger.head() > snap.position + 60  # the later history is still there


@given(st.lists(st.binary(max_size=300), max_size=40))
def test_a_run_splits_into_the_envelopes_it_joined_and_hashes_as_their_segment(
        envelopes: list[bytes]) -> None:
    run = join_envelopes(envelopes)
    assert split_envelopes(run) == envelopes
    assert join_envelopes(iter(envelopes)) == run
    hasher = SegmentHasher()
    hasher.add_run(run, len(envelopes))
    assert hasher.digest() == segment_id(envelopes)


@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=20), st.data())
def test_a_run_cut_anywhere_but_between_envelopes_is_refused(
        envelopes: list[bytes], data: st.DataObject) -> None:
    run = join_envelopes(envelopes)
    ends = {0}
    for envelope in envelopes:
        ends.add(max(ends) + 4 + len(envelope))
    cut = data.draw(st.integers(0, len(run) - 1).filter(lambda at: at not in ends))
    with pytest.raises(ValueError, match="cut short"):
        split_envelopes(run[:cut])
