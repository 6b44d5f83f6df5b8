"""attack18e: erasing the outcome a person's lesson cited leaves its project with nothing.

DESIGN §4: a lesson without evidence "is stored as `claimed` ... and is never recalled";
``commands/policies.py`` ``_promote`` never lets a claim replace anything (``if not
new.active ... return []``). README Erasure: "`outcome`: the outcome, everything the
policies decided from it"; "a supersede by an erased lesson no longer holds (the lesson
it replaced, or absorbed, is active again)".

A person's explicit lesson citing outcome O replaced the loop's trusted lesson (the
attack18b rule). Erasing O refolds the view: the person's lesson has no evidence left
and is a claim, but the supersede the policy decided because it was an evidenced lesson
still holds, so the loop's trusted lesson (its own evidence untouched) stays "replaced"
by a claim nobody is shown. The project's active lessons go from one to none, a state
no run of the rules on the remaining log would reach.
Suspected: projections/lessons.py ``_supersede`` only drops a supersede whose ``by`` is
unknown, not one by a lesson the refold left a claim.
"""

from __future__ import annotations

from pathlib import Path

from _attack18e_agent import P1, Agent, day, ok
from lessonledger.commands import open_ledger


def test_erasing_the_cited_outcome_does_not_leave_the_loops_lesson_replaced_by_a_claim(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        loop = agent.learn(P1, "s1", when=day(0))
        agent.trusted(P1, loop, ["s2", "s3"], when=day(1))
        shown = agent.outcome(P1, "s9", [ok()], when=day(2))
        stated = agent.propose(P1, source="user", evidence=[shown], when=day(2),
                               text="Always run pytest from the repository root")
        # The loop's trusted lesson absorbs the statement (and lasts as it).
        assert [r.lesson_id for r in led.lessons(P1, record=False)] == [loop]
        led.erase(key="erase-1", what="outcome", subject=str(shown), reason="pasted a record")
        assert led.lesson(stated).status in ("claimed", "superseded")
        active = led.lessons(P1, record=False)
        assert active != [], [(r.source, r.status, r.reason) for r in led.view.lessons.values()]
