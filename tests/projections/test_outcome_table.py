"""Outcomes read from the log: a view loaded from a home keeps the last few in memory.

Real homes. Whatever it holds in memory, a loaded view must answer every outcome as the
view folded from position 0 does: outcomes observed through commands (first on their own
stream), raw submissions on another stream, an id observed twice (the last wins), and
nothing past the position the view has folded.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands.messages import AnyCommand, ObserveOutcome, ProposeLesson, command_from
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.events import Operation, OutcomeObserved
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.submission import Submission, to_new_event
from lessonledger.ops.bench.lifecycle import call, story
from lessonledger.projections import lesson_rows_store, outcome_table
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.outcome_table import OutcomeTable
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import VIEW_NAME

P = "b" * 32


def raw_outcome(outcome_id: UUID, error: str) -> Submission:
    """An outcome a publisher submits on a stream of its own choosing."""
    eid = uuid4()
    return Submission(event_id=eid, stream=eid, version=0, occurred_at=datetime.now(UTC),
                      actor="publisher", session="raw-session", event=OutcomeObserved(
                          outcome_id=outcome_id, project=P, passed=False, signal="tool",
                          operations=[Operation(op="make:x", target="x", ok=False,
                                                error=error)]))


def rebuilt(ledger: Ledger) -> LessonView:
    view = ledger.runner.fresh(ledger.log, ledger.runner[VIEW_NAME].position, [VIEW_NAME])
    found = view[VIEW_NAME]
    assert isinstance(found, LessonView)
    return found


def test_a_loaded_view_answers_every_outcome_as_the_fold_from_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outcome_table, "RECENT", 3)  # nearly every outcome from the log
    home = str(tmp_path / "home")
    steps = story()
    twice, elsewhere = uuid4(), uuid4()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 120):
            call(ledger, step)
        results = ledger.execute_each([raw_outcome(twice, "first"), raw_outcome(elsewhere, "e")])
        assert all(isinstance(r, Receipt) for r in results)
        for step in itertools.islice(steps, 40):
            call(ledger, step)
        # Refused now (attack13), but a ledger before took it: written as it did.
        (again,) = ledger.execute_each([raw_outcome(twice, "second")])
        assert not isinstance(again, Receipt)
        ledger.log.append([to_new_event(raw_outcome(twice, "second"))])
        ledger.catch_up()
    with open_ledger(home, sync=False) as ledger:
        view = ledger.view
        assert view.outcomes.reads_log
        fresh = rebuilt(ledger)
        assert fresh.outcomes.keys() == view.outcomes.keys()
        for outcome_id, row in fresh.outcomes.items():
            assert view.outcomes[outcome_id] == row
        assert view.outcomes[twice].operations[0].error == "second"
        assert set(view.outcomes.irregular) == {twice, elsewhere}
        assert uuid4() not in view.outcomes
        assert view.dump() == fresh.dump()
        for step in itertools.islice(steps, 60):  # decided with outcomes read from the log
            call(ledger, step)
        assert view.dump() == rebuilt(ledger).dump()


def test_no_outcome_past_the_position_folded_is_found(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(story(), 30):
            call(ledger, step)
        outcomes = list(rebuilt(ledger).outcomes.items())
    lmdb_home = acquire(home, sync=False)
    try:
        table = OutcomeTable(EventLog(lmdb_home, LOG_NAME))
        outcome_id, row = outcomes[-1]
        position = next(r.envelope.position for r in EventLog(lmdb_home, LOG_NAME).scan()
                        if r.envelope.stream_id == outcome_id)
        table.limit = position - 1
        assert outcome_id not in table
        table.limit = position
        assert table[outcome_id] == row
        assert list(table.everything()) == [o for o, _ in outcomes]
    finally:
        release(lmdb_home)


def test_rows_saved_with_every_outcome_load_and_are_saved_without_them(
        tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    steps = story()
    with open_ledger(home, sync=False) as ledger:
        for step in itertools.islice(steps, 100):
            call(ledger, step)
        fresh = rebuilt(ledger)
    lmdb_home = acquire(home, sync=False)
    try:
        store = ViewStore(lmdb_home)
        saved = store.load_rows(VIEW_NAME)
        assert saved is not None
        # The rows as a home saved them before outcomes were read from the log: one
        # ``o`` row per outcome, by its place.
        legacy = [(b"o" + n.to_bytes(8, "big"), lesson_rows_store.outcome(row))
                  for n, row in enumerate(fresh.outcomes.values())]
        assert store.save_rows(VIEW_NAME, saved[0], None, [*saved[1], *legacy], force=True)
    finally:
        release(lmdb_home)
    with open_ledger(home, sync=False) as ledger:
        assert ledger.view.dump() == rebuilt(ledger).dump()
        assert not ledger.view.outcomes.irregular  # every one found in the log
        for step in itertools.islice(steps, 20):
            call(ledger, step)
    lmdb_home = acquire(home, sync=False)
    try:
        saved = ViewStore(lmdb_home).load_rows(VIEW_NAME)
        assert saved is not None
        assert not [k for k, _ in saved[1] if k[:1] == b"o"]
    finally:
        release(lmdb_home)



def _batch(steps: int) -> list[AnyCommand]:
    """The story's outcomes and proposals as commands, for one group commit."""
    commands: list[AnyCommand] = []
    for step in itertools.islice(story(), steps):
        if step.kind == "outcome":
            commands.append(command_from(step.fields, ObserveOutcome))
        elif step.kind == "proposal":
            commands.append(command_from(step.fields, ProposeLesson))
    # The proposals last: each cites an outcome observed many outcomes before it.
    return sorted(commands, key=lambda c: isinstance(c, ProposeLesson))


def test_one_transaction_of_more_outcomes_than_kept_decides_as_with_all_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A group commit (execute_each, a hub's gathered group) folds every outcome before
    # it commits, and the log is read as committed: an outcome of the same transaction
    # dropped from memory must still be found by a proposal citing it.
    batch = _batch(400)
    assert sum(isinstance(c, ProposeLesson) for c in batch) >= 3
    with open_ledger(str(tmp_path / "all"), sync=False) as ledger:
        expected = ledger.execute_each(batch)
        dump = ledger.view.dump()
    monkeypatch.setattr(outcome_table, "RECENT", 3)
    with open_ledger(str(tmp_path / "few"), sync=False) as ledger:
        assert ledger.view.outcomes.reads_log
        results = ledger.execute_each(batch)
        assert [type(r) for r in results] == [type(r) for r in expected]
        assert ledger.view.dump() == dump == rebuilt(ledger).dump()
