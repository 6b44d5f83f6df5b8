"""attack18e: an edit gives a lesson back the sessions it lost on trial (DESIGN §4).

DESIGN §4: "a lesson is `trial` until confirmed in 3 distinct sessions, then `trusted`";
"Environment binding: ... when a component changes, bound lessons drop to trial" (the
view empties its sessions: trust must be earned again). README: an edit "keeps ... its
trust".

``projections/lessons.py`` ``_propose`` fills a new row's ``sessions`` from the sessions
of every outcome in its evidence; an edit copies the old lesson's whole evidence list,
and the edit branch copies origin/projects/recent/doubted but not ``sessions``. So a
lesson sent back to trial (environment change, clustered contradictions), once edited,
has its pre-trial sessions back, and the next single confirmation makes it trusted.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from _attack18e_agent import P1, Agent, day, fail, ok
from lessonledger.commands import Ledger, open_ledger


def _back_on_trial(led: Ledger, agent: Agent) -> UUID:
    learned = agent.outcome(P1, "s1", [fail(), ok()], when=day(0), fingerprint={"py": "3.11"})
    lesson = agent.learned_from(learned)
    agent.trusted(P1, lesson, ["s2", "s3"], when=day(1))
    led.declare_environment_change(key="env", scope=P1, component="py", new="3.12")
    assert led.lesson(lesson).status == "trial"
    return lesson


def test_control_unedited_lesson_needs_three_new_sessions(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lesson = _back_on_trial(led, agent)
        agent.confirm(P1, "s9", lesson, when=day(3))
        assert led.lesson(lesson).status == "trial"


def test_edited_lesson_back_on_trial_is_not_trusted_after_one_session(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lesson = _back_on_trial(led, agent)
        edited = led.edit_lesson(key="e1", lesson_id=lesson,
                                 text="Run pytest from the repository root").ids["lesson_id"]
        assert led.lesson(edited).status == "trial"
        agent.confirm(P1, "s9", edited, when=day(3))
        row = led.lesson(edited)
        assert row.status == "trial", (row.status, row.sessions)
