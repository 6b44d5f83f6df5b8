"""Attacks on snapshots, refs and checkout (wave 3, attack3).

A snapshot is a ``SnapshotTaken`` event, which only the ledger writes; but a log can
come from elsewhere (an import, a restored backup), so every field of one must be
checked against the log before a ref names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lessonledger.commands import open_ledger
from lessonledger.ledger.events import AnyEvent, SnapshotTaken
from lessonledger.projections.runner import Runner
from lessonledger.projections.views import object_view
from lessonledger.sync.snapshots import take_snapshot
from sync_workload import fill


def test_a_snapshot_whose_parent_lies_is_not_named_by_its_ref(tmp_path: Path) -> None:
    """Its root, link and erasures are the log's; its parent is not what the ref named."""
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        fill(ledger, 20)
        first = take_snapshot(ledger, "main", "test")
        fill(ledger, 20, seed=2, tag="b")

        def lying(runner: Runner) -> Sequence[AnyEvent]:
            here = object_view(runner).snapshot_here(parent=b"\x07" * 32, created_at=1,
                                                     origin="")
            return [SnapshotTaken(name="main", previous=first.id, parent=b"\x07" * 32,
                                  last=here.last, root=here.root, link=here.link,
                                  erasures=here.erasures, created_at=1)]

        ledger.record(lying)
        view = object_view(ledger.runner)
        assert view.refs == {"main": first.id}
        assert [s.id for s in view.snapshots] == [first.id]
        second = take_snapshot(ledger, "main", "test")
        assert second.snapshot.parent == first.id
