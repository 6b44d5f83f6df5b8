"""attack18b: what a person states is explicit and never expires or decays (DESIGN §4).

DESIGN §4 "Clocks": "Expiry by longevity without fresh evidence: tentative 30 days,
ongoing 90 days, durable never by age alone (only by decay), explicit (user-stated)
never." README rule 7: "User-stated lessons never decay ... An `explicit` lesson leaves
only when contradicted under the floor or retired."

A person stating a lesson the loop already learned (same kind, operations and target,
citing the loop's outcome) has it absorbed into the loop's ``ongoing`` lesson
(superseded "replaced"); that one then decays and expires, and nothing the person stated
is active any more, though it was never contradicted or retired.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _attack18b_agent import P1, Agent, day, fail, ok
from lessonledger.commands import CommandError, open_ledger


def test_a_user_stated_lesson_is_not_lost_to_expiry_through_an_equivalent_loop_lesson(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        outcome = agent.outcome(P1, "s1", [fail(), ok()], when=day(0))
        agent.learned_from(outcome)
        stated = agent.propose(P1, source="user", evidence=[outcome], when=day(1),
                               text="Always run pytest from the repository root")
        assert led.lesson(stated).longevity == "explicit"
        # Nothing confirms or contradicts it: a reconcile pass every 10 days for 110 days.
        for n in range(1, 12):
            agent.reconcile(day(10 * n))
        active = led.lessons(P1, record=False)
        assert [r.longevity for r in active] == ["explicit"], [
            (r.source, r.status, r.reason) for r in led.view.lessons.values()]


def test_only_a_persons_lesson_is_explicit(tmp_path: Path) -> None:
    """Explicit outlasts what the loop learned and replaces it: an extractor saying
    ``longevity="explicit"`` would be a person's word it is not."""
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        outcome = agent.outcome(P1, "s1", [fail(), ok()], when=day(0))
        head = led.head()
        with pytest.raises(CommandError, match="only what a person states"):
            agent.propose(P1, source="extractor", longevity="explicit", evidence=[outcome])
        assert led.head() == head
