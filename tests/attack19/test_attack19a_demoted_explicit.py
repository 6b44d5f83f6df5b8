"""attack19a: a demoted explicit lesson stays explicit in the project the person spoke in.

README (attack18b rules): "A person's statement of what is on file is absorbed by it as
any equivalent is, and the lesson that absorbed it (the project's, or a promotion's
global one) is `explicit` from then on ... A demoted explicit lesson stays explicit only
in the project it came from."
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import _attack19_paths  # noqa: F401
from lesson_agent import P1, P2, P3, Agent, day, ok
from lessonledger.commands import Ledger, open_ledger
from test_properties import fold


def _state(led: Ledger, project: str) -> list[tuple[str, str, str, str]]:
    return [(r.scope[:4], r.source, r.longevity, r.text)
            for r in led.lessons(project, record=False)]


def _setup(led: Ledger) -> tuple[Agent, UUID]:
    agent = Agent(led)
    glob = agent.learn(P1, "s1", when=day(0))
    agent.learn(P2, "s2", when=day(0))
    assert led.lesson(glob).scope == "global"
    shown = agent.outcome(P2, "s3", [ok()], when=day(1))
    agent.propose(P2, source="user", evidence=[shown], when=day(1), text="root, said in P2")
    assert led.lesson(glob).longevity == "explicit"
    return agent, glob


def test_demoted_to_the_project_the_person_spoke_in_stays_explicit(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent, glob = _setup(led)
        agent.confirm(P2, "s4", glob, when=day(2))          # P2 confirms last
        agent.contradict(P3, "s5", glob, when=day(3))       # P3 never supported it
        p2 = _state(led, P2)
        assert p2, p2
        assert all(lg == "explicit" for _, _, lg, _ in p2), p2


def test_demoted_to_a_project_the_person_never_spoke_in_is_not_explicit(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent, glob = _setup(led)
        agent.confirm(P1, "s4", glob, when=day(2))          # P1 confirms last
        agent.contradict(P3, "s5", glob, when=day(3))
        p1, p2 = _state(led, P1), _state(led, P2)
        assert p1, (p1, p2)
        assert p2, (p1, p2)
        assert all(lg != "explicit" for _, _, lg, _ in p1), (p1, p2)
        assert any(lg == "explicit" for _, _, lg, _ in p2), (p1, p2)
        led.catch_up()
        assert fold(led.log).dump() == led.view.dump()
