"""attack18e: a person's explicit lesson absorbed by a promotion expires with the loop's.

README (attack18b rules): "a person's `explicit` lesson is never lost to the expiry of the
loop's `ongoing` one"; rule 7: "An `explicit` lesson leaves only when contradicted under
the floor or retired." DESIGN §4 Clocks: "explicit (user-stated) never" expires.

The loop learned a lesson in P1 (ongoing). A person states the same lesson in P2, citing
a P2 outcome that shows it. ``commands/policies.py`` ``_promote`` only lets the longer
lesson win over an equivalent in its *own* project or a global one; one in another
project takes the promotion branch: the loop's ongoing lesson becomes global and absorbs
the person's (superseded "replaced"). The global lesson keeps longevity ``ongoing`` and
expires after 90 days, and nothing the person stated is active anywhere.
"""

from __future__ import annotations

from pathlib import Path

from _attack18e_agent import P1, P2, Agent, day, fail, ok
from lessonledger.commands import open_ledger


def test_explicit_lesson_in_a_second_project_is_not_lost_to_the_loops_expiry(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        learned = agent.outcome(P1, "s1", [fail(), ok()], when=day(0))
        agent.learned_from(learned)
        shown = agent.outcome(P2, "s2", [ok()], when=day(1))
        stated = agent.propose(P2, source="user", evidence=[shown], when=day(1),
                               text="Always run pytest from the repository root")
        assert led.lesson(stated).longevity == "explicit"
        # Nothing confirms or contradicts anything: a reconcile every 10 days, 110 days.
        for n in range(1, 12):
            agent.reconcile(day(10 * n))
        active = led.lessons(P2, record=False)
        assert "explicit" in [r.longevity for r in active], [
            (r.source, r.scope[:4], r.longevity, r.status, r.reason)
            for r in led.view.lessons.values()]
