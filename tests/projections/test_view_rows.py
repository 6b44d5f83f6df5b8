"""The outcome statistics and the audit index saved as rows, like the lesson view.

Real homes, the lifecycle benchmark's story through the API, rows saved every few events
inside the commands' transactions, across reopens: every reopened view dumps as the one
folded from position 0, and a save writes the rows that changed, not the view.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands import ledger as ledger_module
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ops.bench.lifecycle import call, story
from lessonledger.projections.audit_index import AuditIndex
from lessonledger.projections.outcome_stats import OutcomeStats
from lessonledger.projections.runner import RowProjection
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import AUDIT_NAME, STATS_NAME

NAMES = (STATS_NAME, AUDIT_NAME)


def rebuilt(ledger: Ledger, name: str) -> bytes:
    position = ledger.runner[name].position
    return ledger.runner.fresh(ledger.log, position, [name])[name].dump()


def saved_rows(home: str, name: str) -> list[tuple[bytes, bytes]] | None:
    lmdb_home = acquire(home, sync=False)
    try:
        saved = ViewStore(lmdb_home).load_rows(name)
    finally:
        release(lmdb_home)
    return None if saved is None else saved[1]


@pytest.mark.parametrize("every", [4, 60])
def test_reopened_from_rows_equals_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           every: int) -> None:
    monkeypatch.setattr(ledger_module, "_ROWS_EVERY", every)
    home = str(tmp_path / "home")
    steps = story()
    for _ in range(3):
        with open_ledger(home, sync=False) as ledger:
            for step in itertools.islice(steps, 120):
                call(ledger, step)
            for name in NAMES:
                assert ledger.runner[name].dump() == rebuilt(ledger, name)
        with open_ledger(home, sync=False) as again:
            for name in NAMES:
                assert again.runner[name].dump() == rebuilt(again, name)
    for name in NAMES:
        rows = saved_rows(home, name)
        assert rows is not None, name
        assert len(rows) > 20, name


def test_a_save_writes_the_rows_that_changed_not_the_view(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 400):
            call(ledger, step)
    with open_ledger(home, sync=False) as ledger:
        views = [ledger.runner[name] for name in NAMES]
        assert isinstance(views[0], OutcomeStats)
        assert isinstance(views[1], AuditIndex)
        for step in itertools.islice(steps, 3):
            call(ledger, step)
        for view in views:
            assert isinstance(view, RowProjection)
            changed = view.changes()
            assert changed is not None
            everything = list(view.rows())
            assert 1 < len(changed) < len(everything) / 10
            assert sum(len(v or b"") for _, v in changed) < sum(
                len(v) for _, v in everything) / 10
