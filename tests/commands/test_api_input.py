"""Bad keyword fields through the Python API are refused like bad JSON: typed, named, unwritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.commands.errors import (
    BatchRefusedError,
    CommandError,
    InvalidCommandError,
    KeyReusedError,
)
from lessonledger.commands.handlers import command_id
from lessonledger.commands.messages import Erase, ObserveOutcome, decode_command
from lessonledger.ledger.events import OutcomeObserved
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.submission import new_event

GOOD: dict[str, Any] = {"key": "k1", "project": "a" * 32, "passed": True}


@pytest.mark.parametrize(("change", "field"), [
    ({"project": "/home/me/repo"}, "$.project"),
    ({"passed": "yes"}, "$.passed"),
    ({"operations": [{"op": "pytest", "ok": True}]}, "$.operations[0]"),
    ({"in_play": ["not-a-uuid"]}, "$.in_play[0]"),
    ({"surprise": 1}, "$"),
])
def test_bad_fields_are_named_and_nothing_is_written(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        with pytest.raises(InvalidCommandError) as caught:
            ledger.observe_outcome(**(GOOD | change))
        assert caught.value.field == field
        assert ledger.log.head() == 0
        assert ledger.observe_outcome(**GOOD).positions == [1]


@pytest.mark.parametrize("project", ["NOT HEX", "", "ABCDEF0123456789"])
def test_queries_refuse_a_project_that_is_no_digest_and_record_nothing(
        tmp_path: Path, project: str) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        for query in (lambda: ledger.recall(project, "run the tests"),
                      lambda: ledger.check(project, "pytest:tests/", "tests"),
                      lambda: ledger.lessons(project)):
            with pytest.raises(InvalidCommandError) as refused:
                query()
            assert refused.value.field == "$.project"
        ledger.flush()
        assert ledger.log.head() == 0


def test_a_key_an_earlier_command_of_another_kind_used_is_refused(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        ledger.observe_outcome(key="k", project="a" * 16, passed=True)
        head = ledger.log.head()
        with pytest.raises(KeyReusedError, match=r"outcome\.observed"):
            ledger.reconcile(key="k", now="2030-01-01T00:00:00Z")
        assert ledger.log.head() == head


def test_a_key_reused_for_a_command_of_the_same_kind_saying_else_is_refused(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        first = ledger.observe_outcome(key="k", project="a" * 16, passed=True)
        assert ledger.observe_outcome(key="k", project="a" * 16, passed=True) == first
        head = ledger.log.head()
        with pytest.raises(KeyReusedError, match="position 1"):
            ledger.observe_outcome(key="k", project="a" * 16, passed=False)
        assert ledger.log.head() == head


P = "a" * 16
IN_PLAY = "0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90"
OUTCOME: dict[str, Any] = {
    "key": "k", "project": P, "passed": False, "principal": "alice", "session": "s1",
    "signal": "verification", "task": "run the tests", "in_play": [IN_PLAY],
    "fingerprint": {"python": "3.11"},
    "operations": [{"op": "pytest:run", "target": "tests", "ok": False, "error": "boom"}],
}


def test_an_outcome_key_of_another_principal_is_a_command_of_its_own(tmp_path: Path) -> None:
    """Keys are each principal's own: Bob's ``k`` neither refuses nor repeats Alice's."""
    with open_ledger(tmp_path, sync=False) as ledger:
        first = ledger.observe_outcome(**OUTCOME)
        other = ledger.observe_outcome(**(OUTCOME | {"principal": "bob"}))
        assert set(other.positions).isdisjoint(first.positions)
        assert other.ids["outcome_id"] != first.ids["outcome_id"]
        assert ledger.observe_outcome(**OUTCOME) == first
        assert ledger.observe_outcome(**(OUTCOME | {"principal": "bob"})) == other


@pytest.mark.parametrize("change", [
    {"session": "s2"}, {"actor": "someone-else"},
    {"signal": "tool"}, {"in_play": []}, {"fingerprint": {"python": "3.12"}},
    {"fingerprint": {}}, {"occurred_at": "2030-01-01T00:00:00Z"},
    {"operations": [{"op": "pytest:run", "target": "tests", "ok": False, "error": "boom",
                     "order": 1}]},
], ids=lambda change: ",".join(change))
def test_an_outcome_key_reused_with_any_field_changed_is_refused(
        tmp_path: Path, change: dict[str, Any]) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        first = ledger.observe_outcome(**OUTCOME)
        head = ledger.log.head()
        with pytest.raises(KeyReusedError, match="position 1"):
            ledger.observe_outcome(**(OUTCOME | change))
        assert ledger.log.head() == head
        assert ledger.observe_outcome(**OUTCOME) == first  # the true retry still is one


def test_a_retry_with_the_same_time_or_none_is_a_retry(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        first = ledger.observe_outcome(**OUTCOME)
        timed = ledger.observe_outcome(**(OUTCOME | {"key": "k2",
                                                     "occurred_at": "2030-01-01T00:00:00Z"}))
        head = ledger.log.head()
        assert ledger.observe_outcome(**OUTCOME) == first
        assert ledger.observe_outcome(**(OUTCOME | {
            "key": "k2", "occurred_at": "2030-01-01T01:00:00+01:00"})) == timed
        assert ledger.log.head() == head


def _evidence(ledger: Any) -> str:
    return str(ledger.observe_outcome(**(OUTCOME | {"key": "evidence"})).ids["outcome_id"])


LESSON: dict[str, Any] = {
    "key": "l", "project": P, "text": "do not run pytest bare", "kind": "avoid",
    "avoid_op": "pytest:run", "target": "tests", "source": "extractor",
    "longevity": "ongoing", "fingerprint": {"python": "3.11"},
}


@pytest.mark.parametrize("change", [
    {"evidence": []}, {"source": "model"}, {"source": "user"}, {"longevity": "durable"},
    {"fingerprint": {}}, {"vector": [0.5, 0.5]},
], ids=lambda change: ",".join(change))
def test_a_lesson_key_reused_with_any_field_changed_is_refused(
        tmp_path: Path, change: dict[str, Any]) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        lesson = LESSON | {"evidence": [_evidence(ledger)]}
        first = ledger.propose_lesson(**lesson)
        head = ledger.log.head()
        with pytest.raises(KeyReusedError):
            ledger.propose_lesson(**(lesson | change))
        assert ledger.log.head() == head
        assert ledger.propose_lesson(**lesson) == first


def test_a_retirement_key_reused_with_another_reason_is_refused(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        lesson_id = ledger.propose_lesson(**LESSON).ids["lesson_id"]
        first = ledger.retire_lesson(key="r", lesson_id=lesson_id, reason="wrong")
        head = ledger.log.head()
        with pytest.raises(KeyReusedError):
            ledger.retire_lesson(key="r", lesson_id=lesson_id, reason="outdated")
        assert ledger.log.head() == head
        assert ledger.retire_lesson(key="r", lesson_id=lesson_id, reason="wrong") == first


def test_a_log_written_before_commands_were_digested_still_answers_retries(
        tmp_path: Path) -> None:
    # What an older ledger wrote: the command's first event without ``command_digest``.
    with open_ledger(tmp_path, sync=False) as ledger:
        eid = derived_id(command_id("k"), "0")
        outcome = OutcomeObserved(outcome_id=derived_id(command_id("k"), "outcome"),
                                  project=P, passed=True, signal="verification")
        ledger.log.append([new_event(outcome, stream=outcome.outcome_id, version=0,
                                     event_id=eid, actor="agent", principal="alice")])
        ledger.catch_up()
        head = ledger.log.head()
        retry = ledger.observe_outcome(key="k", project=P, passed=True, principal="alice")
        assert retry.positions == [1]
        with pytest.raises(KeyReusedError):
            ledger.observe_outcome(key="k", project=P, passed=False, principal="alice")
        assert ledger.log.head() == head
        # Another principal's key is its own, the old unscoped one included.
        bobs = ledger.observe_outcome(key="k", project=P, passed=True, principal="bob")
        assert bobs.positions == [head + 1]


@pytest.mark.parametrize(("change", "field"), [
    ({"operations": [Operation(op="", target="t", ok=True)]}, "$.operations[0].op"),
    ({"operations": [Operation(op="o", target="t", ok=False, error="x" * 5000)]},
     "$.operations[0].error"),
    ({"operations": [Operation(op="o", target="t", ok=True, order=2 ** 70)]},
     "$.operations[0].order"),
    ({"operations": [{"op": "o", "target": "t", "ok": True, "order": 2 ** 70}]},
     "$.operations[0].order"),
    ({"task": "\ud800"}, "$.task"),
    ({"fingerprint": {"py\udcff": "3"}}, "$.fingerprint"),
    ({"session": "s\ud800"}, "$.session"),
], ids=["empty-op", "long-error", "big-order", "big-order-dict", "surrogate", "surrogate-key",
        "surrogate-session"])
def test_hand_built_or_unencodable_fields_are_typed_refusals(
        tmp_path: Path, change: dict[str, Any], field: str) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        with pytest.raises(InvalidCommandError) as caught:
            ledger.observe_outcome(**(GOOD | change))
        assert caught.value.field.startswith(field)
        assert ledger.log.head() == 0


def test_a_hand_built_command_is_checked_when_executed(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        command = ObserveOutcome(key="k", project=P, passed=True, task="x" * 9000)
        with pytest.raises(InvalidCommandError) as caught:
            ledger.execute(command)
        assert caught.value.field == "$.task"
        with pytest.raises(BatchRefusedError) as batch:
            ledger.execute_all([ObserveOutcome(key="k2", project=P, passed=True), command])
        assert batch.value.index == 1
        assert ledger.log.head() == 0
        with pytest.raises(InvalidCommandError):
            ledger.retire_lesson(key="r", lesson_id=IN_PLAY, expected_version=2 ** 70)


def test_queries_refuse_text_that_is_not_unicode_and_empty_keys(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        for query, field in ((lambda: ledger.recall(P, "q \udcff"), "$.query"),
                             (lambda: ledger.recall(P, "q", session="\ud800"), "$.session"),
                             (lambda: ledger.check("", "", ""), "$.project"),
                             (lambda: ledger.check(P, "", "tests"), "$.operation"),
                             (lambda: ledger.check(P, "pytest:run", ""), "$.target"),
                             (lambda: ledger.check(P, "pytest:run", "t\ud800"), "$.target")):
            with pytest.raises(InvalidCommandError) as refused:
                query()
            assert refused.value.field == field
        ledger.flush()
        assert ledger.log.head() == 0


def test_a_lone_surrogate_in_json_is_named(tmp_path: Path) -> None:
    line = ('{"command": "observe_outcome", "key": "k", "project": "' + P
            + '", "passed": true, "task": "\\ud800"}')
    with pytest.raises(InvalidCommandError, match=r"\$\.task is not valid Unicode") as caught:
        decode_command(line)
    assert caught.value.field == "$.task"


def test_a_key_whose_command_was_erased_refuses_another_command(tmp_path: Path) -> None:
    # Only the envelope of the erased first event is left: what it kept must match.
    with open_ledger(tmp_path, sync=False) as ledger:
        alices = {"key": "s-42/task-1", "project": P, "passed": True, "principal": "alice",
                  "session": "s-42", "task": "alice's task"}
        first = ledger.observe_outcome(**alices)
        ledger.erase(key="e", what="principal", subject="alice", reason="request")
        head = ledger.log.head()
        assert ledger.observe_outcome(**alices).positions == first.positions
        for other in ({"session": "s-43"}, {"project": "b" * 16},
                      {"actor": "tool"}):
            with pytest.raises(KeyReusedError):
                ledger.observe_outcome(**(alices | other))
        with pytest.raises(KeyReusedError):
            ledger.reconcile(key="s-42/task-1", now="2026-11-29T00:00:00Z",
                             principal="alice", session="s-42")
        assert ledger.log.head() == head


@pytest.mark.parametrize("call", [
    lambda led: led.recall(P, "q", as_of=10**30),
    lambda led: led.recall(P, "q", as_of=-1),
    lambda led: led.recall(P, "q", as_of="x"),
    lambda led: led.check(P, "op", "t", as_of=10**30),
    lambda led: led.time_at(10**30),
    lambda led: led.position_at("x"),
    lambda led: led.view_at(True),
    lambda led: led.why(led.find_lesson(""), project="nope"),
    lambda led: led.why(led.find_lesson(""), project=P, query="\ud800"),
    lambda led: led.execute(Erase(key="e", what="principal", subject="alice")),
    lambda led: led.execute_all([Erase(key="e", what="principal", subject="alice")]),
])
def test_queries_and_execute_refuse_bad_arguments_with_typed_errors(
        tmp_path: Path, call: Any) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        ledger.observe_outcome(key="k", project=P, passed=True, principal="alice",
                               operations=[Operation(op="a", target="t", ok=False,
                                                     error="exit 2"),
                                           Operation(op="b", target="t", ok=True, order=1)])
        head = ledger.log.head()
        with pytest.raises(CommandError):
            call(ledger)
        assert ledger.log.head() == head
