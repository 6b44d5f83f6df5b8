"""Attacks on the hub by a key with a grant on another project (wave 2, attack2).

Each test is one attempt a hostile peer makes on a real hub process over CURVE.
"""

from __future__ import annotations

from collections.abc import Iterator
from uuid import uuid4

import msgspec
import pytest
from hubtools import HubProcess, Keys, curve_hub
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.ledger.errors import InvalidEventError
from lessonledger.ledger.events import decode_event
from test_hub_access import GRANTS, P, Q, pair

SECRET_WORDS = "retired because the quarterly acquisition of ZetaCorp"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    with curve_hub(tmp_path_factory.mktemp("attack2"), GRANTS, admin="ops",
                   keys=("mallory", "gone", "late")) as started:
        yield started


def test_a_retirement_note_of_a_project_is_not_read_through_the_log(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "alice") as alice:
        alice.observe_outcome(key="alice-r1", project=P, session="r1", passed=True,
                              operations=pair("docs"))
        lesson = alice.lessons(P, record=False)[0]
        alice.retire_lesson(key="alice-retire", lesson_id=lesson.lesson_id,
                            reason=SECRET_WORDS)
        head = alice.head()
    with keys.client(server, "bob") as bob:
        with pytest.raises(AccessRefusedError):
            bob.lesson(lesson.lesson_id)
        records = bob.read_log(1, head + 10)
    shown = [(r.envelope, r.payload) for r in records if r.payload is not None]
    for envelope, payload in shown:
        assert SECRET_WORDS.encode() not in payload, envelope
        event = decode_event(payload)
        assert str(lesson.lesson_id) not in msgspec.json.encode(event).decode(), (
            f"{envelope.type} about a lesson of {P} shown to a key without a read "
            "grant on it")


def test_a_raw_submission_cannot_act_on_another_projects_lesson(
        setup: tuple[HubProcess, Keys]) -> None:
    """Naming one's own project in the body does not make another's lesson one's own."""
    server, keys = setup
    with keys.client(server, "bob") as bob:
        bob.observe_outcome(key="bob-s1", project=Q, session="bs1", passed=True,
                            operations=pair("bob-only"))
        (theirs,) = [row for row in bob.lessons(Q, record=False) if row.target == "bob-only"]
    with keys.client(server, "alice") as alice:
        mine = alice.observe_outcome(key="alice-s1", project=P, session="as1", passed=True,
                                     operations=pair("build"))
        head = alice.head()
        for i, event in enumerate([
                {"type": "lesson.confirmed", "lesson_id": str(theirs.lesson_id),
                 "outcome_id": str(mine.ids["outcome_id"]), "project": P},
                {"type": "lesson.contradicted", "lesson_id": str(theirs.lesson_id),
                 "outcome_id": str(mine.ids["outcome_id"]), "project": P, "failed": True}]):
            submission = msgspec.json.encode({
                "event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
                "occurred_at": "2026-12-01T12:00:00Z", "actor": f"alice-{i}",
                "event": event})
            # Refused at the door since attack13: only the ledger attributes outcomes.
            with pytest.raises(InvalidEventError):
                alice.submit(submission)
        assert alice.head() == head
    with keys.client(server, "bob") as bob:
        after = bob.lesson(theirs.lesson_id)
        assert (after.scope, after.confidence, after.status) == (
            theirs.scope, theirs.confidence, theirs.status)
