"""attack18e: beside a global lesson, a project collects duplicate equivalent lessons.

(Found against the rule that a longer-lived lesson replaced its equivalent, since
dropped: a lesson absorbing a person's statement is explicit instead. The test now
checks the outcome the finding asked for: one lesson saying it, in P3.)

``commands/policies.py`` ``_promote`` docstring: "In the new lesson's own scope, or
globally, the lesson already on file absorbs it"; README (attack18b): a longer-lived
lesson "replaces its project's equivalent instead of being absorbed by it ... (beside an
equivalent global lesson it stands in its own project)".

With a global lesson (the loop's, ongoing) and a person's explicit lesson standing
beside it in P3, a second equivalent proposal in P3 (another person's wording, or an
extractor's ``durable`` one) should be absorbed by P3's own lesson as it is when no
global lesson exists (control). ``_promote`` walks the equivalents oldest first and
returns at the first: the global lesson, which it outlasts, so ``return []`` and the
new one stands too. P3 then has two active lessons saying the same, and recall spends
two of its five places on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _attack18e_agent import P1, P2, P3, Agent, day, ok
from lessonledger.commands import Ledger, open_ledger


def _own(led: Ledger, project: str) -> list[str]:
    return [r.text for r in led.lessons(project, record=False) if r.scope == project]


def test_control_second_statement_is_absorbed_without_a_global_lesson(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        shown = agent.outcome(P3, "s3", [ok()], when=day(1))
        agent.propose(P3, source="user", evidence=[shown], when=day(1), text="root, one")
        agent.propose(P3, source="user", evidence=[shown], when=day(2), text="root, two")
        assert _own(led, P3) == ["root, one"]


@pytest.mark.parametrize("second", [{"source": "user"},
                                    {"source": "extractor", "longevity": "durable"}])
def test_second_equivalent_in_a_project_beside_a_global_lesson_is_absorbed(
        tmp_path: Path, second: dict[str, str]) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        glob = agent.learn(P1, "s1", when=day(0))
        agent.learn(P2, "s2", when=day(0))
        assert led.lesson(glob).scope == "global"
        shown = agent.outcome(P3, "s3", [ok()], when=day(1))
        agent.propose(P3, source="user", evidence=[shown], when=day(1), text="root, one")
        agent.propose(P3, evidence=[shown], when=day(2), text="root, two", **second)
        # The global lesson absorbs both (and, having a person's word, lasts as it):
        # P3 is shown one lesson saying this, not two or three.
        same = [r for r in led.lessons(P3, record=False)
                if r.same_as == led.lesson(glob).same_as]
        assert [r.lesson_id for r in same] == [glob], [(r.scope, r.text) for r in same]
        assert led.lesson(glob).longevity == "explicit"
