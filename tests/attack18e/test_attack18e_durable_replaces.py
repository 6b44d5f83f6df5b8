"""attack18e: an extractor's or the model's "durable" replaces the loop's trusted lesson.

DESIGN §4 "Where lessons come from, most trusted first: (1) the loop ... (2) an
extractor ... (3) the model's own claim"; confidence 0.5 / 0.4 / 0.3. Commit 49b72c4
refuses ``explicit`` from an extractor or the model because "it would never expire and
would replace what the loop learned" -- but ``durable`` (never expires by age, DESIGN
§4 Clocks) does exactly that through ``commands/policies.py`` ``_promote``'s ``_LASTS``
branch, which compares longevity alone, not source or earned trust.

A loop lesson trusted at 0.95 in P1 is superseded "replaced" by (a) an extractor's
``durable`` proposal citing the loop's own outcome (trial, 0.4), or (b) the model's
``durable`` claim once a single outcome confirms it (trial, 0.45). One contradiction
then takes the replacement under the floor and P1 has no lesson at all, where the
loop's would have stayed trusted at 0.7.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from _attack18e_agent import P1, Agent, day, ok
from lessonledger.commands import open_ledger


def _trusted_loop(agent: Agent) -> UUID:
    lesson = agent.learn(P1, "s1", when=day(0))
    agent.trusted(P1, lesson, ["s2", "s3", "s4"], when=day(1))
    return lesson


def test_an_extractors_durable_proposal_does_not_displace_the_loops_trusted_lesson(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        loop = _trusted_loop(agent)
        agent.propose(P1, source="extractor", longevity="durable", when=day(2),
                      evidence=[led.lesson(loop).evidence[0]], text="Run pytest at the root")
        row = led.lesson(loop)
        assert row.active, (row.status, row.reason, row.superseded_by)


def test_a_models_confirmed_durable_claim_does_not_displace_the_loops_trusted_lesson(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        loop = _trusted_loop(agent)
        claim = agent.propose(P1, source="model", longevity="durable", when=day(3),
                              text="Run pytest at the root")
        assert led.lesson(claim).status == "claimed"
        agent.outcome(P1, "s5", [ok()], when=day(4), in_play=[claim])
        row = led.lesson(loop)
        assert row.active, (row.status, row.reason, row.superseded_by)
