"""A listing shares its lessons' history with the view instead of copying it.

A lesson's evidence, sessions and moves grow with its age (hundreds of items on a big
home), and a listing copied them for every lesson it listed: building a 200k-event
home spent a third of its time there, and more the older it got. Now the history
lists are shared, read-only (``lesson_rows.Shared``), and the view takes a copy of its
own before it grows one. What a listing answers is what it answered before: equal to
the view's rows as they stood, unchanged as the ledger moves on, and nothing a caller
does to it changes the ledger.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from lessonledger.commands import Ledger, ObserveOutcome, Operation, open_ledger
from lessonledger.projections.lesson_rows import HISTORY, LessonRow, Shared
from test_properties import (
    PROJECTS,
    SESSIONS,
    Driver,
    Recall,
    Step,
    fold,
    fresh_home,
    steps,
)

P = "a" * 32
_rows = msgspec.msgpack.Decoder(list[LessonRow])


def _observe(ledger: Ledger, n: int, session: str, *, flipped: bool = False) -> None:
    bad, good = ("pytest:root", "pytest:tests/") if flipped else ("pytest:tests/", "pytest:root")
    ledger.execute(ObserveOutcome(key=f"k{n}", project=P, session=session, passed=True,
                                  operations=[Operation(op=bad, target="tests", ok=False,
                                                        error="no conftest", order=0),
                                              Operation(op=good, target="tests", ok=True,
                                                        order=1)]))


def _ledger_with_a_lesson(home: str) -> Ledger:
    ledger = Ledger(home, sync=False)
    for n in range(3):
        _observe(ledger, n, f"s{n}")
    return ledger


def test_two_listings_share_a_lessons_history_rather_than_copy_it(tmp_path: str) -> None:
    with _ledger_with_a_lesson(f"{tmp_path}/home") as ledger:
        first, second = ledger.lessons(P, record=False), ledger.lessons(P, record=False)
        assert first
        assert len(first[0].evidence) == 3
        for name in HISTORY:
            assert getattr(first[0], name) is getattr(second[0], name), name
        # The fingerprint (a dict) is still each caller's own.
        assert first[0].fingerprint is not second[0].fingerprint


def test_a_listing_does_not_change_as_the_ledger_moves_on(tmp_path: str) -> None:
    with _ledger_with_a_lesson(f"{tmp_path}/home") as ledger:
        before = ledger.lessons(P, record=False)
        frozen = msgspec.msgpack.encode(before)
        _observe(ledger, 3, "s3")
        _observe(ledger, 4, "s4")
        after = ledger.lessons(P, record=False)
        assert len(after[0].evidence) == 5
        assert len(after[0].moves) > len(before[0].moves)
        assert msgspec.msgpack.encode(before) == frozen


def test_a_listings_history_is_read_only_and_changing_it_changes_nothing(
        tmp_path: str) -> None:
    with _ledger_with_a_lesson(f"{tmp_path}/home") as ledger:
        rows = ledger.lessons(P, record=False)
        was = msgspec.msgpack.encode(ledger.lessons(P, record=False))
        for attempt in (lambda: rows[0].evidence.append(rows[0].lesson_id),
                        lambda: rows[0].moves.clear(), lambda: rows[0].sessions.pop(),
                        lambda: rows[0].evidence.__iadd__([rows[0].lesson_id]),
                        lambda: rows[0].moves.__setitem__(0, rows[0].moves[-1]),
                        lambda: rows[0].projects.append("mine"),
                        lambda: rows[0].recent.remove(True)):
            with pytest.raises(TypeError, match="read-only"):
                attempt()
        rows[0].fingerprint["mine"] = "x"  # a copy of its own: allowed, and not the view's
        rows[0].evidence = [*rows[0].evidence, rows[0].lesson_id]  # a list of its own
        assert msgspec.msgpack.encode(ledger.lessons(P, record=False)) == was
        # Read-only is not different: it encodes, copies and pickles as the list it is.
        assert isinstance(rows[0].moves, Shared)
        assert list(rows[0].moves) == rows[0].moves


def test_a_shared_history_still_grows_in_the_view(tmp_path: str) -> None:
    """The view copies a shared list before it grows it: the listing kept, the view grown."""
    with _ledger_with_a_lesson(f"{tmp_path}/home") as ledger:
        listed = ledger.lessons(P, record=False)[0]
        _observe(ledger, 3, "s3")
        row = ledger.view.lessons[listed.lesson_id]
        assert len(row.evidence) == len(listed.evidence) + 1
        assert row.evidence[:-1] == listed.evidence
        assert type(row.evidence) is list  # grown: the view's own again until listed


@settings(max_examples=12, deadline=None)
@given(steps)
def test_listings_answer_as_a_deep_copy_of_the_view_would(run: list[Step]) -> None:
    """Every listing equals a deep copy of the rows as they stood, then and at the end."""
    with fresh_home() as home, open_ledger(home, sync=False) as ledger:
        driver, kept = Driver(ledger), []
        for step in [*run, Recall(project=0, session=0)]:
            if isinstance(step, Recall):
                project = PROJECTS[step.project]
                listing = ledger.lessons(project, session=SESSIONS[step.session])
                view = ledger.view
                deep = _rows.decode(msgspec.msgpack.encode(
                    [view.lessons[r.lesson_id] for r in listing]))
                assert listing == deep
                assert [msgspec.structs.asdict(r) for r in listing] == \
                    [msgspec.structs.asdict(r) for r in deep]
                kept.append((listing, msgspec.msgpack.encode(deep)))
                continue
            driver.run(step)
        for listing, then in kept:
            assert msgspec.msgpack.encode(listing) == then
        # The view itself is what a fold from 0 makes (sharing changed none of its rows).
        ledger.catch_up()
        assert fold(ledger.log).dump() == ledger.view.dump()
