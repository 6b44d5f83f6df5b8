"""attack18e: the loop's lesson in another project becomes a person's explicit one.

README (attack18b): "Only a person's lesson is `explicit`"; rule 7: "User-stated lessons
never decay (seed 001)"; DESIGN §4 Clocks: ongoing lessons expire after 90 days without
fresh evidence, explicit (user-stated) never.

A person states a lesson in P1 (explicit). The loop learns the same in P2 (ongoing).
``commands/policies.py`` ``_promote`` makes the person's lesson the global one and
absorbs the loop's: the global lesson keeps source ``user`` and longevity ``explicit``.
A contradiction from P3 demotes it to its last confirmer, P2 (DESIGN §4). P2 now holds
a "user"/"explicit" lesson in the person's words that no person ever stated there:
what the loop learned in P2 never decays and never expires (240 days, 24 passes, no
evidence: still active at 0.25), where the loop's own lesson would have expired at 90.
Suspected: the promotion keeps the absorbing lesson's source/longevity whatever the
merged one's (policies.py ``_promote`` last loop; projections/lessons.py ``_promote``).
"""

from __future__ import annotations

from pathlib import Path

from _attack18e_agent import P1, P2, P3, Agent, day, ok
from lessonledger.commands import open_ledger


def test_a_project_where_only_the_loop_learned_it_gets_no_explicit_lesson(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        shown = agent.outcome(P1, "s1", [ok()], when=day(0))
        stated = agent.propose(P1, source="user", evidence=[shown], when=day(0),
                               text="Always run pytest from the repository root")
        agent.learn(P2, "s2", when=day(1))
        assert led.lesson(stated).scope == "global"
        agent.contradict(P3, "s3", stated, when=day(2))
        for n in range(1, 25):
            agent.reconcile(day(10 * n))
        kept = [(r.source, r.longevity, r.confidence) for r in led.lessons(P2, record=False)
                if r.scope == P2]
        assert kept == [], kept
