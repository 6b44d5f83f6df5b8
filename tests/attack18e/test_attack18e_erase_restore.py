"""attack18e: erasing a person's lesson restores the loop's one it replaced, out of rules.

README Erasure: "a supersede by an erased lesson no longer holds (the lesson it replaced,
or absorbed, is active again)". DESIGN §4: "Below 0.2 the lesson is superseded by
`decayed`: kept in history, out of every active query"; ongoing lessons expire after 90
days without fresh evidence.

A person's explicit lesson replaced the loop's (attack18b's rule). Reconcile passes run
for 200 days. Erasing the person's lesson refolds the view: the loop's lesson is active
again, and the refold decays it at every pass it missed (0.5 -> 0.12) but no pass ever
superseded it (the reconcile *policy* decided while it was superseded). It comes back
active, below the floor and 200 days past its expiry, and recall/lessons serve it.
"""

from __future__ import annotations

from pathlib import Path

from _attack18e_agent import P1, Agent, day, fail, ok
from lessonledger.commands import open_ledger


def test_restored_lesson_is_not_active_below_the_floor(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        learned = agent.outcome(P1, "s1", [fail(), ok()], when=day(0))
        loop = agent.learned_from(learned)
        shown = agent.outcome(P1, "s2", [ok()], when=day(1))
        stated = agent.propose(P1, source="user", evidence=[shown], when=day(1),
                               text="Always run pytest from the repository root")
        # The loop's lesson absorbs the statement, and lasts as it while it holds it.
        assert led.lesson(stated).superseded_by == loop
        for n in range(1, 21):
            agent.reconcile(day(10 * n))
        led.erase(key="erase-1", what="lesson", subject=str(stated), reason="wrong")
        floor = led.view.rules.floor
        below = [(r.source, r.confidence, r.status) for r in led.lessons(P1, record=False)
                 if r.confidence < floor]
        assert below == []
