"""The lesson view saved as rows: what changed is written, and reopening gives it back.

Real homes, the lifecycle benchmark's fleet story through the API. The rows are saved
as they come due (here every few events, so a short story saves many times, inside the
commands' transactions), across several processes' lifetimes of the ledger; every reopen
must equal the view rebuilt from position 0, and a save writes a few rows, not the view.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path

import pytest
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands import ledger as ledger_module
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ops.bench.lifecycle import call, story
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.store import ROWS, ViewStore
from lessonledger.projections.views import VIEW_NAME


def rows(home: str) -> list[tuple[bytes, bytes]] | None:
    lmdb_home = acquire(home, sync=False)
    try:
        saved = ViewStore(lmdb_home).load_rows(VIEW_NAME)
    finally:
        release(lmdb_home)
    return None if saved is None else saved[1]


def rebuilt_of(ledger: Ledger) -> bytes:
    """The lesson view folded afresh from position 0 to where ``ledger``'s stands."""
    position = ledger.runner[VIEW_NAME].position
    return ledger.runner.fresh(ledger.log, position, [VIEW_NAME])[VIEW_NAME].dump()


@pytest.mark.parametrize("every", [3, 50])
def test_reopened_from_rows_saved_as_they_came_due_equals_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: int) -> None:
    monkeypatch.setattr(ledger_module, "_ROWS_EVERY", every)
    home = str(tmp_path / "home")
    steps = story()
    for turn in range(4):
        with open_ledger(home, sync=False) as ledger:
            for n, step in enumerate(itertools.islice(steps, 150)):
                call(ledger, step)
                # Beside the story: passes that decay every lesson not in play, and an
                # environment change that sends a project's lessons back on trial.
                if n % 40 == 39:
                    ledger.reconcile(key=f"extra-{turn}-{n}",
                                     now=step.at + timedelta(minutes=n))
                if n == 75 and "project" in step.fields:
                    ledger.declare_environment_change(
                        key=f"env-{turn}", scope=step.fields["project"], component="node",
                        new=f"21.{turn}")
            assert ledger.runner[VIEW_NAME].dump() == rebuilt_of(ledger)
        with open_ledger(home, sync=False) as again:
            assert again.runner[VIEW_NAME].dump() == rebuilt_of(again)
    saved = rows(home)
    assert saved is not None
    assert len(saved) > 100


def test_a_save_writes_the_rows_that_changed_not_the_view(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 600):
            call(ledger, step)
    with open_ledger(home, sync=False) as ledger:
        view = ledger.runner[VIEW_NAME]
        assert isinstance(view, LessonView)
        assert view.changes() == [(b"h", view.changes()[0][1])]  # type: ignore[index]
        for step in itertools.islice(steps, 3):
            call(ledger, step)
        changed = view.changes()
        assert changed is not None
        everything = list(view.rows())
        assert 1 < len(changed) < len(everything) / 10
        assert sum(len(v or b"") for _, v in changed) < sum(len(v) for _, v in everything) / 10


def test_a_view_saved_whole_is_loaded_and_saved_as_rows_after(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 200):
            call(ledger, step)
    lmdb_home = acquire(home, sync=False)
    try:
        store = ViewStore(lmdb_home)
        saved = store.load_rows(VIEW_NAME)
        assert saved is not None
        position, whole = saved[0], LessonView.load_rows(saved[1]).dump()
        store.drop(VIEW_NAME)
        assert store.save(VIEW_NAME, position, whole)  # as a home saved before rows were
        assert store.load_rows(VIEW_NAME) is None
        assert store.load(VIEW_NAME) == (position, whole)
    finally:
        release(lmdb_home)
    with open_ledger(home, sync=False) as ledger:
        assert ledger.runner[VIEW_NAME].dump() == whole
        for step in itertools.islice(steps, 20):
            call(ledger, step)
    assert rows(home) is not None
    with open_ledger(home, sync=False) as again:
        assert again.runner[VIEW_NAME].dump() == rebuilt_of(again)


def test_a_view_kept_and_put_back_as_one_value_comes_back_as_rows(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(story(), 100):
            call(ledger, step)
        dump = ledger.runner[VIEW_NAME].dump()
    lmdb_home = acquire(home, sync=False)
    try:
        store = ViewStore(lmdb_home)
        kept = store.load(VIEW_NAME)
        assert kept is not None
        assert kept[1].startswith(ROWS)
        store.drop(VIEW_NAME)
        assert store.load(VIEW_NAME) is None
        assert store.save(VIEW_NAME, *kept)
        assert store.load(VIEW_NAME) == kept
    finally:
        release(lmdb_home)
    with open_ledger(home, sync=False) as again:
        assert again.runner[VIEW_NAME].dump() == dump


def test_rows_saved_across_drops_of_the_mapped_pages_read_back_as_put(tmp_path: Path) -> None:
    """A save lets go of the pages it mapped every thousand rows, inside its transaction.

    The rows it wrote before a drop, those after it, and those it overwrote or deleted
    read back as put, in that transaction and once committed.
    """
    lmdb_home = acquire(str(tmp_path / "home"), sync=False)
    try:
        store = ViewStore(lmdb_home)
        first = [(b"k%05d" % n, b"v%d" % n * 40) for n in range(3_500)]
        assert store.save_rows("probe", 1, None, first)
        changed: list[tuple[bytes, bytes | None]] = [
            (b"k%05d" % n, None if n % 3 == 0 else b"w%d" % n * 50) for n in range(0, 3_500, 2)]
        with lmdb_home.env.begin(write=True) as txn:
            assert store.save_rows("probe", 2, changed, txn=txn)
            inside = list(store._rows(txn, "probe"))
        expected = dict(first)
        for key, value in changed:
            if value is None:
                del expected[key]
            else:
                expected[key] = value
        assert inside == sorted(expected.items())
        saved = store.load_rows("probe")
        assert saved is not None
        assert saved[0] == 2
        assert list(saved[1]) == sorted(expected.items())
    finally:
        release(lmdb_home)
