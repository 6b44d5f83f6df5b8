"""attack18b: the evidence clock of a demoted lesson's copies (DESIGN §4 "Clocks").

DESIGN §4: "`last_evidence_at` moves only on supporting evidence or a human correction
... Expiry by longevity without fresh evidence: ... ongoing 90 days". README
"Erasure"/rule 2: a demoted global lesson leaves each other supporting project "a lesson
of its own ... citing its own outcomes".

The copy cites P1's own outcome from day 0, yet its ``last_evidence_at`` is day 80: the
time of P3's *contradicting* outcome, which made the copy (the view stamps a proposal's
evidence clock with the proposing event's time). So a contradiction elsewhere renews the
evidence clock in P1: at day 95 the demoted lesson (evidence days 0-1) has expired, the
copy (evidence day 0) has not, and it ranks as fresh in recall.
"""

from __future__ import annotations

from pathlib import Path

from _attack18b_agent import P1, P2, P3, Agent, day, fail, ns, ok
from lessonledger.commands import open_ledger


def test_a_demotion_copy_keeps_the_evidence_clock_of_the_evidence_it_cites(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lid = agent.learn(P1, "s1", when=day(0))
        agent.learn(P2, "s2", when=day(1))
        assert led.lesson(lid).scope == "global"
        agent.contradict(P3, "s3", lid, when=day(80))
        assert led.lesson(lid).scope == P2
        [copy] = [r for r in led.lessons(P1, record=False) if r.scope == P1]
        cited = [led.view.outcomes[o] for o in copy.evidence]
        assert cited
        assert all(o.project == P1 for o in cited)
        assert copy.last_evidence_at <= ns(day(0)), (
            f"evidence clock moved to day {(copy.last_evidence_at - ns(day(0))) / 86400e9:.0f} "
            "by a contradiction from another project")
        agent.reconcile(day(95))
        assert led.lessons(P1, record=False) == [], "P1's copy outlived its evidence by 90 days"


def test_a_promotion_takes_the_second_projects_fresh_evidence_into_the_evidence_clock(
        tmp_path: Path) -> None:
    """DESIGN §4: "When a second project learns ... an equivalent lesson, the two are
    promoted to one global lesson (both project lessons superseded by it, evidence
    merged)", and expiry is "by longevity without fresh evidence". P2 learns the lesson
    on day 80; the global lesson cites P2's day-80 outcome but keeps P1's day-0 evidence
    clock (``LessonPromoted`` merges evidence and sessions, never the clock), so it
    expires at day 95 and P2, which learned it 15 days before, has nothing left."""
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lid = agent.learn(P1, "s1", when=day(0))
        second = agent.outcome(P2, "s2", [fail(), ok()], when=day(80))
        row = led.lesson(lid)
        assert row.scope == "global"
        assert second in row.evidence
        assert row.last_evidence_at >= ns(day(80)), (
            f"evidence clock at day {(row.last_evidence_at - ns(day(0))) / 86400e9:.0f}")
        agent.reconcile(day(95))
        assert [r.lesson_id for r in led.lessons(P2, record=False)] == [lid]

