"""attack18b: a lesson's kind decides which of its operations it speaks about.

DESIGN §4: "`prefer B over A` predicts that B succeeds and A fails; `avoid A` that A
fails; `do B` that B succeeds", and "when active lessons on the same operation and
target disagree, recall returns the strongest as the current belief and the others
labelled as contradicting".

``propose_lesson`` takes an ``avoid`` lesson with a ``prefer_op`` too (or a ``do`` with
an ``avoid_op``). Attribution (``verdict``) and ``check``'s "supporting" ignore that
stray field, as the kind says, but recall's disagreement test
(``projections/recall.py`` ``disagree``/``_rivals``) reads it, so "Avoid make" is shown
as contradicting "Prefer cmake over ninja", which predicts nothing about make.
"""

from __future__ import annotations

from pathlib import Path

from _attack18b_agent import P1, Agent, day, fail, ok
from lessonledger.commands import CommandError, open_ledger


def test_an_avoid_lesson_is_not_labelled_contradicting_by_an_operation_it_does_not_name(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        seen = agent.outcome(P1, "s1", [fail("make", "no rule", "build")], when=day(0),
                             passed=False)
        try:
            agent.propose(P1, text="Avoid make for build", kind="avoid", avoid_op="make",
                          prefer_op="ninja", target="build", evidence=[seen])
        except CommandError:
            return  # refusing the stray prefer_op is a fine answer too
        agent.outcome(P1, "s2", [fail("ninja", "bad flags", "build"), ok("cmake", "build")],
                      when=day(1))
        kinds = sorted(r.kind for r in led.lessons(P1, record=False))
        assert kinds == ["avoid", "prefer"]
        section = led.recall(P1, "build", record=False).section
        assert "contradicts" not in section, section
