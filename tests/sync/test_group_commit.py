"""Group commit: many commands in one durable transaction, each decided in turn.

A refused command leaves nothing of its own, its neighbours commit, and the log holds
what running the same commands one at a time with ``execute`` holds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.commands import Ledger, ObserveOutcome, Operation, open_ledger
from lessonledger.commands.errors import (
    CommandError,
    InvalidCommandError,
    StaleVersionError,
    UnknownLessonError,
)
from lessonledger.commands.messages import AnyCommand, EditLesson, command_from
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.events import decode_event
from lessonledger.ledger.submission import parse_submission
from lessonledger.ledger.verify import verify

P = "a" * 32


def outcome(key: str, target: str = "tests", project: str = P) -> ObserveOutcome:
    return command_from({
        "key": key, "project": project, "session": f"s-{key}", "passed": True,
        "operations": [Operation(op="pytest:tests/", target=target, ok=False,
                                 error="no conftest"),
                       Operation(op="pytest:root", target=target, ok=True, order=1)],
    }, ObserveOutcome)


def bodies(ledger: Ledger) -> list[tuple[str, str, object]]:
    return [(r.envelope.type, r.envelope.actor, decode_event(r.payload))
            for r in ledger.log.scan() if r.payload is not None]


def test_a_refusal_between_two_good_commands_leaves_nothing_and_they_commit(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h") as ledger:
        bad = command_from({"key": "edit", "lesson_id": uuid4(), "text": "new words"},
                           EditLesson)
        first, refused, second = ledger.execute_each([outcome("one"), bad, outcome("two")])
        assert isinstance(first, Receipt)
        assert isinstance(second, Receipt)
        assert isinstance(refused, UnknownLessonError)
        assert refused.lesson_id == bad.lesson_id
        # Nothing under the refused key; the second command's events follow the first's.
        assert ledger.log.position_of(b"edit") is None
        assert second.positions[0] > max(first.positions)
        assert ledger.log.head() >= max(second.positions)
        assert verify(ledger.log).ok
        # A retry of the whole group returns the receipts it returned, writes nothing.
        head = ledger.log.head()
        again = ledger.execute_each([outcome("one"), bad, outcome("two")])
        assert again[0] == first
        assert again[2] == second
        assert isinstance(again[1], UnknownLessonError)
        assert ledger.log.head() == head


def test_a_malformed_command_is_refused_alone(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h") as ledger:
        bad = msgspec.structs.replace(outcome("bad"), project="NOT-A-DIGEST")
        good, refused = ledger.execute_each([outcome("good"), bad])
        assert isinstance(good, Receipt)
        assert isinstance(refused, InvalidCommandError)
        assert refused.field == "$.project"


def test_a_stale_edit_is_refused_after_an_edit_in_the_same_group(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h") as ledger:
        receipt = ledger.execute(outcome("seed"))
        lesson = next(iter(ledger.view.lessons))
        version = ledger.lesson(lesson).version
        edits = [command_from({"key": f"e{i}", "lesson_id": lesson, "text": f"text {i}",
                               "expected_version": version}, EditLesson) for i in range(2)]
        done, stale = ledger.execute_each(edits)
        assert isinstance(done, Receipt)
        assert receipt.positions
        assert isinstance(stale, (StaleVersionError, CommandError))


def test_submissions_ride_in_the_group(tmp_path: Path) -> None:
    event_id, stream = uuid4(), uuid4()
    submission = parse_submission(msgspec.json.encode({
        "event_id": str(event_id), "stream": str(stream), "version": 0,
        "occurred_at": "2026-01-01T00:00:00Z", "actor": "agent",
        "event": {"type": "lesson.recalled", "lesson_ids": [], "project": P}}))
    with open_ledger(tmp_path / "h") as ledger:
        _a, s, _b = ledger.execute_each([outcome("a"), submission, outcome("b")])
        assert isinstance(s, Receipt)
        assert len(s.positions) == 1
        assert ledger.log.position_of(event_id.bytes) == s.positions[0]
        # Resubmitted: its original position, nothing new.
        (again,) = ledger.execute_each([submission])
        assert again == s


def _gathered(ledger: Ledger, items: list[Any]) -> list[Receipt | Exception]:
    """``execute_gathered`` with the items arriving one by one, as a hub's clients send.

    A group undone stops taking: what it did not take goes in the next, as in a hub.
    """
    results: list[Receipt | Exception] = []
    rest = iter(items)
    while (first := next(rest, None)) is not None:
        taken, done = ledger.execute_gathered(first, lambda: next(rest, None))
        assert len(taken) == len(done)
        results += done
    assert len(results) == len(items)
    return results


def _each(ledger: Ledger, items: list[Any]) -> list[Receipt | Exception]:
    """``execute_each``: the group known up front."""
    return list(ledger.execute_each(items))


#: The two group commits, each held to what serial execution does.
GROUPS = pytest.mark.parametrize("group", [_each, _gathered], ids=["each", "gathered"])
keys = st.lists(st.sampled_from(["k1", "k2", "k3", "k4", "edit"]), min_size=1, max_size=8)


@GROUPS
@given(keys, st.sampled_from(["tests", "build"]))
def test_a_group_commit_equals_serial_execute(
        tmp_path_factory: object, group: Callable[[Ledger, list[Any]], list[Any]],
        plan: list[str], target: str) -> None:
    base = Path(str(tmp_path_factory.mktemp("g")))  # type: ignore[attr-defined]
    lesson = uuid4()

    def command(key: str) -> AnyCommand:
        if key == "edit":
            return command_from({"key": "edit", "lesson_id": lesson, "text": "x"}, EditLesson)
        return outcome(key, target=target if key != "k3" else "other")

    with open_ledger(base / "group", sync=False) as grouped:
        results = group(grouped, [command(k) for k in plan])
        group_log = bodies(grouped)
    with open_ledger(base / "serial", sync=False) as serial:
        expected: list[object] = []
        for key in plan:
            try:
                expected.append(serial.execute(command(key)))
            except CommandError as e:
                expected.append(type(e))
        serial_log = bodies(serial)
    assert [r if isinstance(r, Receipt) else type(r) for r in results] == expected
    assert group_log == serial_log


@GROUPS
def test_a_command_failing_after_it_appended_is_undone_and_the_rest_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        group: Callable[[Ledger, list[Any]], list[Any]]) -> None:
    """A policy that fails on one outcome: that command goes, its neighbours commit."""
    from lessonledger.commands import ledger as ledger_module
    from lessonledger.commands import policies
    from lessonledger.ledger.events import OutcomeObserved

    real = policies.react

    def failing(view: Any, event: Any, envelope: Any) -> Any:
        if isinstance(event, OutcomeObserved) and envelope.session == "s-poison":
            msg = "a policy failed on this outcome"
            raise CommandError(msg)
        return real(view, event, envelope)

    monkeypatch.setattr(ledger_module, "react", failing)
    with open_ledger(tmp_path / "h") as ledger:
        first, poisoned, last = group(
            ledger, [outcome("one"), outcome("poison"), outcome("two")])
        assert isinstance(first, Receipt)
        assert isinstance(last, Receipt)
        assert isinstance(poisoned, CommandError)
        assert "policy failed" in str(poisoned)
        sessions = [r.envelope.session for r in ledger.log.scan()]
        assert "s-poison" not in sessions
        assert "s-one" in sessions
        assert "s-two" in sessions
        assert verify(ledger.log).ok
