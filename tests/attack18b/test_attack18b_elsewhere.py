"""attack18b: a global lesson bound to another environment says nothing there (rule 11).

README rule 11: "A global lesson bound to another environment says nothing there. Where
a project's outcomes last reported another value of a fingerprint component than a
global lesson is bound to, that lesson is neither recalled nor checked there".
``recall`` and ``check`` hide it, but ``lessons(project, session=...)`` -- the README's
"put in front of the agent" listing, and the MCP ``lessons`` tool -- returns it and
records it as shown; the project's next outcome is then judged against it, and a
contradiction from the project where it "says nothing" demotes the global lesson
everywhere.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from _attack18b_agent import AVOID, P1, P2, P3, TARGET, Agent, day, ok
from lessonledger.commands import open_ledger


def _bound(agent: Agent) -> UUID:
    lid = agent.learn(P1, "s1", when=day(0), fingerprint={"py": "3.11"})
    agent.learn(P2, "s2", when=day(1), fingerprint={"py": "3.11"})
    agent.outcome(P3, "s3", [ok("make", "docs")], when=day(2), fingerprint={"py": "3.12"})
    led = agent.ledger
    assert led.lesson(lid).scope == "global"
    assert led.recall(P3, "pytest root", record=False).lessons == []
    assert led.check(P3, AVOID, TARGET, record=False).supporting == []
    assert led.check(P3, AVOID, TARGET, record=False).opposing == []
    return lid


def test_the_listing_hides_it_as_recall_and_check_do(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        lid = _bound(Agent(led))
        assert lid not in [r.lesson_id for r in led.lessons(P3, record=False)]


def test_an_outcome_where_it_says_nothing_does_not_demote_it(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lid = _bound(agent)
        led.lessons(P3, session="s4")  # what an agent is shown at plan time
        agent.outcome(P3, "s4", [ok(AVOID)], when=day(3), fingerprint={"py": "3.12"})
        row = led.lesson(lid)
        assert row.scope == "global", [(m.type, m.note) for m in row.moves]
