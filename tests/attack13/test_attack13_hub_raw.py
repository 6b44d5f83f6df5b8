"""The raw-event holes of test_attack13_raw_lessons through a real CURVE hub (attack13).

A hub process on 127.0.0.1 with CURVE keys and a real LMDB home. Alice may read and write
her project P and ``global`` (as in tests/attack11a); bob reads and writes Q; ``ops`` is
the admin. Alice's raw submissions pass ``authorize_event`` (they name only her own
project's lessons, and ``global``) and then ``check_submitted``, which lets them through.
Every test here FAILS on c9b9ced.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid4

import _attack13_paths  # noqa: F401  (first: hubtools lives in tests/sync)
import msgspec
import pytest
from hubtools import HubProcess, Keys, curve_hub
from lessonledger.commands import Ledger, Operation
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.ledger.events import LESSON_CONFIRMED, LESSON_PROMOTED, LESSON_PROPOSED

P, Q = "a" * 32, "b" * 32
GRANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "alice": ("alice", {"read": [P, "global"], "write": [P, "global"]}),
    "bob": ("bob", {"read": [Q], "write": [Q]}),
    "ops": ("operator", {"admin": True, "read": [P, Q, "global"]}),
}
Setup = tuple[HubProcess, Keys, dict[str, UUID]]


def _learned(ledger: Ledger, key: str, project: str, principal: str, op: str) -> UUID:
    """The loop learns ``prefer {op}-new over {op}-old`` on ``prod``: its outcome's id."""
    return ledger.observe_outcome(
        key=key, principal=principal, session=f"{key}-s", project=project, passed=True,
        operations=[Operation(op=f"{op}-old", target="prod", ok=False, error="refused"),
                    Operation(op=f"{op}-new", target="prod", ok=True, order=1)],
    ).ids["outcome_id"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    made: dict[str, UUID] = {}

    def prepare(ledger: Ledger) -> None:
        for name, op in (("confirm", "c"), ("promote", "p")):
            outcome = _learned(ledger, name, P, "alice", op)
            (row,) = [r for r in ledger.view.lessons.values() if r.evidence == [outcome]]
            made[f"{name}_outcome"], made[f"{name}_lesson"] = outcome, row.lesson_id
        made["plain"] = ledger.observe_outcome(
            key="plain", principal="alice", project=P, passed=True,
            operations=[Operation(op="b1", target="t1", ok=True)]).ids["outcome_id"]

    with curve_hub(tmp_path_factory.mktemp("attack13"), GRANTS, admin="ops",
                   prepare=prepare) as (server, keys):
        yield server, keys, made


def _raw(event: dict[str, Any]) -> bytes:
    event_id = uuid4()
    return msgspec.json.encode({
        "event_id": str(event_id), "stream": str(event_id), "version": 0,
        "occurred_at": "2026-12-01T12:00:00Z", "actor": "alice", "event": event})


def _send(client: Any, event: dict[str, Any]) -> str:
    try:
        client.submit(_raw(event))
    except LessonLedgerError as e:
        return f"refused: {e}"
    return "taken"


def test_a_hub_writer_confirms_her_lesson_four_times_by_one_outcome(setup: Setup) -> None:
    """FAILED on c9b9ced: 0.5 -> 1.0 by the outcome the lesson was learned from, sent four times."""
    server, keys, made = setup
    lesson, outcome = made["confirm_lesson"], made["confirm_outcome"]
    with keys.client(server, "alice") as alice:
        said = [_send(alice, {"type": LESSON_CONFIRMED, "lesson_id": str(lesson),
                              "outcome_id": str(outcome), "project": P})
                for _ in range(4)]
    with keys.client(server, "ops") as ops:
        confidence = ops.lesson(lesson).confidence
    assert confidence == pytest.approx(0.5), f"{said}: confidence {confidence}"


def test_a_hub_writer_of_p_promotes_her_lesson_on_her_own_say_so(setup: Setup) -> None:
    """FAILED on c9b9ced: a raw lesson.promoted naming Q (which never saw the lesson) makes P's
    lesson global, and bob, who writes only Q, is then given it in Q's recall."""
    server, keys, made = setup
    lesson = made["promote_lesson"]
    with keys.client(server, "alice") as alice:
        said = _send(alice, {"type": LESSON_PROMOTED, "lesson_id": str(lesson),
                             "projects": [P, Q]})
    with keys.client(server, "bob") as bob:
        shown = [row.lesson_id for row in bob.lessons(Q, record=False)]
    assert lesson not in shown, f"{said}: P's lesson is in Q's recall"


def test_a_hub_writer_s_model_lesson_is_not_recalled_as_evidenced(setup: Setup) -> None:
    """FAILED on c9b9ced: a raw model lesson citing an outcome is ``trial`` and recalled (its
    command would store a claim, never recalled)."""
    server, keys, made = setup
    lesson_id = uuid4()
    with keys.client(server, "alice") as alice:
        said = _send(alice, {
            "type": LESSON_PROPOSED, "lesson_id": str(lesson_id), "text": "run b1 on t1",
            "kind": "do", "prefer_op": "b1", "target": "t1", "scope": P,
            "source": "model", "confidence": 0.3, "evidence": [str(made["plain"])]})
        shown = [row.lesson_id for row in alice.lessons(P, record=False)]
    assert lesson_id not in shown, f"{said}: the model's claim is recalled"


def test_setup_names_lessons_of_p(setup: Setup) -> None:
    """GUARD (passes): the lessons the tests above send about are alice's, in P."""
    server, keys, made = setup
    with keys.client(server, "ops") as ops:
        assert ops.lesson(made["confirm_lesson"]).scope in (P, "global")
        assert ops.lesson(made["promote_lesson"]).origin == P
