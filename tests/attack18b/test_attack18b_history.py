"""attack18b: ``lessons history`` walks the supersede chain both ways (README "Lessons").

README: "`lessonledger lessons history LESSON` walks the supersede chain both ways";
the repository's own test of an edit chain asks every member for the same chain. A
promotion supersedes the second project's lesson by the first's (DESIGN §4: "both
project lessons superseded by it, evidence merged"): ``history`` of the absorbed lesson
is [absorbed, global], but ``history`` of the global lesson is [global] alone, so the
two members of one chain tell two histories, and the global lesson's history never
shows where half of its evidence came from.
"""

from __future__ import annotations

from pathlib import Path

from _attack18b_agent import P1, P2, Agent, day
from lessonledger.commands import open_ledger


def test_every_member_of_a_promotion_chain_gives_the_same_history(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        first = agent.learn(P1, "s1", when=day(0))
        second = agent.learn(P2, "s2", when=day(1))
        assert led.lesson(first).scope == "global"
        assert led.lesson(second).superseded_by == first
        from_absorbed = [r.lesson_id for r in led.history(second)]
        from_global = [r.lesson_id for r in led.history(first)]
        assert from_absorbed == [second, first]
        assert from_global == from_absorbed
