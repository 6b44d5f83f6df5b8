"""Views that read their saved rows on demand, from the snapshot they were loaded at.

Real homes and the lifecycle benchmark's story: a ledger opened on a home reads the
outcome statistics, the audit index and the lesson view's failures and sessions row by
row as it needs them, while another ledger
on the same home folds ahead and saves its rows over them many times. Each view still
dumps as the one folded from position 0, and so do the views reopened from the rows they
both saved.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import lmdb
import msgspec
import pytest
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands import ledger as ledger_module
from lessonledger.ops.bench.lifecycle import call, story
from lessonledger.projections import lesson_rows_store as saved_rows
from lessonledger.projections.audit_index import AuditIndex
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.outcome_stats import OutcomeStats
from lessonledger.projections.views import AUDIT_NAME, STATS_NAME, VIEW_NAME

NAMES = (STATS_NAME, AUDIT_NAME, VIEW_NAME)


def rebuilt(ledger: Ledger, name: str) -> bytes:
    position = ledger.runner[name].position
    return ledger.runner.fresh(ledger.log, position, [name])[name].dump()


def test_a_view_read_on_demand_stays_right_while_another_ledger_saves_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "_ROWS_EVERY", 5)
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 300):
            call(ledger, step)
    with open_ledger(home, sync=False) as first, open_ledger(home, sync=False) as second:
        stats, audit = first.runner[STATS_NAME], first.runner[AUDIT_NAME]
        assert isinstance(stats, OutcomeStats)
        assert isinstance(audit, AuditIndex)
        assert stats._pin is not None
        assert audit._pin is not None
        assert first.view._pin is not None
        for step in itertools.islice(steps, 150):
            call(second, step)  # saves its rows over the ones the first has not read
        for step in itertools.islice(steps, 150):
            call(first, step)  # folds the second's events, then its own, reading rows
        for step in itertools.islice(steps, 60):
            call(second, step)
        second.catch_up()
        first.catch_up()
        for ledger in (first, second):
            for name in NAMES:
                view = ledger.runner[name]
                assert isinstance(view, OutcomeStats | AuditIndex | LessonView)
                if ledger is first:
                    assert view._pin is not None, "read whole before the check: blind"
                assert view.dump() == rebuilt(ledger, name), name
    with open_ledger(home, sync=False) as again:
        for name in NAMES:
            assert again.runner[name].dump() == rebuilt(again, name), name


def test_opening_reads_only_what_is_asked_for(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 400):
            call(ledger, step)
        projects = ledger.runner[STATS_NAME]._s.projects  # type: ignore[attr-defined]
        project, everyone = next(iter(projects)), len(projects)
        kept = dict(ledger.view.failures)
        lesson, history = next((i, r.moves) for i, r in ledger.view.lessons.items() if r.moves)
    with open_ledger(home, sync=False) as again:
        stats = again.runner[STATS_NAME]
        assert isinstance(stats, OutcomeStats)
        assert stats._s.projects == {}
        asked = stats.project(project)
        assert asked.outcomes > 0
        assert len(stats._s.projects) == 1 < everyone
        audit = again.runner[AUDIT_NAME]
        assert isinstance(audit, AuditIndex)
        assert not any(audit._maps.values())
        assert audit.positions("lesson", lesson)
        assert sum(len(m) for m in audit._maps.values()) == 1
        failures = again.view._s.failures
        assert failures == {}
        assert again.view._recalled == {}
        key = next(iter(kept))
        assert again.view.failures[key] == kept[key]
        assert list(failures) == [key]
        bare = again.view._bare
        assert len(bare) == len(again.view._s.lessons) > 1
        row = again.view.lessons[lesson]
        assert row.moves
        assert row.moves == history
        assert lesson not in bare
        assert len(bare) == len(again.view._s.lessons) - 1


def test_what_was_read_on_demand_is_let_go_once_saved_and_read_again_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An agent's memory grew with every lesson history, failure and session it read:
    # after each save of its own it forgets what is as saved, and reads it again.
    monkeypatch.setattr(ledger_module, "_ROWS_EVERY", 40)
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 400):
            call(ledger, step)
    let_go = 0
    with open_ledger(home, sync=False) as agent:
        view = agent.view
        assert view._pin is not None
        original = view._let_go

        def counted() -> None:
            nonlocal let_go
            let_go += 1
            original()
            # Right after: nothing read on demand is held but what changed since the save.
            assert all(not view._s.lessons[i].moves for i in view._bare)
            assert set(view._s.failures) <= view._dirty_failures
        monkeypatch.setattr(view, "_let_go", counted)
        for step in itertools.islice(steps, 400):
            call(agent, step)
            # Every answer as a fold from 0 gives it, whatever was let go before.
            if step.kind == "query":
                fresh = agent.runner.fresh(agent.log, view.position, [VIEW_NAME])[VIEW_NAME]
                assert isinstance(fresh, LessonView)
                project = step.fields["project"]
                assert view.active_for(project) == fresh.active_for(project)
        assert let_go > 2, "never let go: the test is blind"
        assert view._pin is not None
        assert view.dump() == rebuilt(agent, VIEW_NAME)
    with open_ledger(home, sync=False) as again:
        assert again.runner[VIEW_NAME].dump() == rebuilt(again, VIEW_NAME)


def test_outcome_statistics_read_on_demand_are_let_go_once_saved_and_read_again_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fold read a project's every operation and kept it: an agent's memory grew with
    # the home's one-off operations. It reads the rows an outcome names, and forgets
    # what is as saved after each save of its own.
    monkeypatch.setattr(ledger_module, "_ROWS_EVERY", 40)
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 400):
            call(ledger, step)
    with open_ledger(home, sync=False) as agent:
        stats = agent.runner[STATS_NAME]
        assert isinstance(stats, OutcomeStats)
        assert stats._pin is not None
        let_go, partial_reads = 0, 0
        for step in itertools.islice(steps, 400):
            due = stats._let_go_due
            call(agent, step)
            if due and not stats._let_go_due:
                let_go += 1
                # Right after: only what changed since the save is held.
                held = {(p, n) for p, s in stats._s.projects.items() for n in s.operations}
                assert held <= stats._dirty
            partial_reads += bool(stats._partial)
            if step.kind == "outcome":
                fresh = agent.runner.fresh(agent.log, stats.position, [STATS_NAME])
                project = step.fields["project"]
                assert stats.project(project) == fresh[STATS_NAME].project(  # type: ignore[attr-defined]
                    project)
        assert let_go > 2, "never let go: the test is blind"
        assert partial_reads, "every project read whole: the test is blind"
        assert stats._pin is not None
        assert stats.dump() == rebuilt(agent, STATS_NAME)
    with open_ledger(home, sync=False) as again:
        assert again.runner[STATS_NAME].dump() == rebuilt(again, STATS_NAME)


def _as_layout_2(home: str) -> int:
    """Rewrite a closed home's saved lesson rows as layout 2 kept them; how many moved."""
    env = lmdb.open(home, max_dbs=128)
    prefix, moved = b"lessons/", 0
    try:
        with env.begin(write=True) as txn:
            db = env.open_db(b"views", txn=txn)
            rows = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)
                    if bytes(k).startswith(prefix)]
            for k, v in rows:
                rest = k[len(prefix):]
                if rest[:1] == saved_rows.USAGE_BY_LESSON:
                    new = saved_rows.LESSON + rest[1:9] + saved_rows.USAGE
                elif rest[:1] == saved_rows.HISTORY:
                    new = saved_rows.LESSON + rest[1:]
                elif rest == saved_rows.HEADER:
                    head = msgspec.msgpack.decode(v)
                    head[5] = 2
                    txn.put(k, msgspec.msgpack.encode(head), db=db)
                    continue
                else:
                    continue
                txn.delete(k, db=db)
                txn.put(prefix + new, v, db=db)
                moved += 1
    finally:
        env.close()
    return moved


def test_rows_saved_in_layout_2_are_read_whole_and_saved_afresh_in_layout_3(
        tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 300):
            call(ledger, step)
        expected = ledger.view.dump()
    assert _as_layout_2(home) > 0
    with open_ledger(home, sync=False) as again:
        assert again.view._pin is None  # an older layout: read whole
        assert again.view.dump() == expected
        for step in itertools.islice(steps, 20):
            call(again, step)
    with open_ledger(home, sync=False) as third:
        view = third.view
        assert view._pin is not None, "not saved afresh in layout 3"
        kept = view._pin.under()
        assert not [k for k, _ in kept if k[:1] == saved_rows.LESSON and len(k) > 9]
        assert [k for k, _ in kept if k[:1] == saved_rows.USAGE_BY_LESSON]
        assert view.dump() == rebuilt(third, VIEW_NAME)


def test_a_save_keeps_the_histories_of_active_lessons_a_listing_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every listing reads the history of each active lesson it lists: letting those go
    # at every save made the next listing read them all again (on a 676,000-event home,
    # most of the build's time). Inactive ones are still let go.
    monkeypatch.setattr(ledger_module, "_ROWS_EVERY", 40)
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 250):
            call(ledger, step)
    kept = 0
    with open_ledger(home, sync=False) as agent:
        view = agent.view
        original = view._let_go

        def counted() -> None:
            nonlocal kept
            lessons = view._s.lessons
            held = [i for i in lessons if i not in view._bare]
            original()
            for i in held:
                if lessons[i].active:
                    assert i not in view._bare, "an active lesson's history was let go"
                    kept += 1
        monkeypatch.setattr(view, "_let_go", counted)
        for step in itertools.islice(steps, 150):
            call(agent, step)
        assert kept > 0, "no active lesson's history was held at a save: the test is blind"
        assert view.dump() == rebuilt(agent, VIEW_NAME)
    with open_ledger(home, sync=False) as again:
        assert again.runner[VIEW_NAME].dump() == rebuilt(again, VIEW_NAME)
