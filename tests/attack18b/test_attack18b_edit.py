"""attack18b: editing a lesson (DESIGN §4 "Supersede, never delete").

An edit writes a new lesson that supersedes the old one. The new lesson must keep being
the same lesson for the rules: a global lesson stays one that the projects behind it
confirmed (so a third project's contradiction demotes it to its last confirmer), and a
lesson confirmed in three distinct sessions stays trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _attack18b_agent import P1, P2, P3, Agent, day
from lessonledger.commands import open_ledger


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    with open_ledger(tmp_path, sync=False) as ledger:
        yield Agent(ledger)


def test_an_edited_global_lesson_contradicted_from_a_third_project_is_demoted_to_its_last_confirmer(
        agent: Agent) -> None:
    """DESIGN §4: "A global lesson contradicted from a third project is demoted to the
    project that last confirmed it." Unedited, this holds (demoted to P2, P1 keeps a
    copy). After an edit the new row's ``projects`` is ``["global"]`` and the demotion
    goes "to global": the lesson stays global, P3 is still shown it, and P1/P2 get
    nothing of their own."""
    led = agent.ledger
    first = agent.learn(P1, "s1", when=day(0))
    agent.learn(P2, "s2", when=day(1))
    assert led.lesson(first).scope == "global"
    edited = led.edit_lesson(key=agent.key(), lesson_id=first,
                             text="Run pytest from the repository root",
                             occurred_at=day(2)).ids["lesson_id"]
    assert led.lesson(edited).scope == "global"

    agent.contradict(P3, "s3", edited, when=day(3))

    row = led.lesson(edited)
    demotions = [m.note for m in row.moves if m.type == "lesson.demoted"]
    assert demotions == [f"to {P2}"], demotions
    assert row.scope == P2
    assert [r.lesson_id for r in led.lessons(P3, record=False)] == []


def test_an_edited_trusted_lesson_stays_trusted(agent: Agent) -> None:
    """DESIGN §4: "a lesson is trial until confirmed in 3 distinct sessions, then
    trusted". The edit keeps the evidence and the sessions (3 distinct) and the
    confidence, but the new row is ``trial`` and recall labels it ``[trial]``, though
    nothing about its evidence changed. Any later confirmation, even in a session it
    already counts, flips it straight back to trusted: the status is simply stale."""
    led = agent.ledger
    lid = agent.learn(P1, "s1", when=day(0))
    agent.trusted(P1, lid, ["s2", "s3"], when=day(1))
    before = led.lesson(lid)
    assert before.status == "trusted"

    edited = led.edit_lesson(key=agent.key(), lesson_id=lid, text="pytest: from the root",
                             occurred_at=day(2)).ids["lesson_id"]
    row = led.lesson(edited)
    assert (row.sessions, row.confidence) == (before.sessions, before.confidence)
    assert row.status == "trusted", (row.status, row.sessions)
    assert "[trial]" not in led.recall(P1, "pytest root", record=False).section
