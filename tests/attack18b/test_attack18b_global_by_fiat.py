"""attack18b: a lesson is global only when a second project learns it (DESIGN §4).

DESIGN §4 "Scopes": "When a second project learns or confirms an equivalent lesson, the
two are promoted to one global lesson ... — automatically, never on anyone's say-so."
DESIGN §3: an outcome is "a task ended" in a project (``scope (project digest or
global)`` is the envelope's scope, not a project an agent works in).

``observe_outcome`` and ``propose_lesson`` take ``project="global"`` (the MCP tools'
schemas even advertise it: "16 to 64 lowercase hex characters, or 'global'"): one
outcome "in project global" teaches a global lesson at once, shown in every project,
and anyone can propose a global lesson directly. Its ``projects`` is ``["global"]``, so
a contradiction from a real project "demotes" it to the scope "global".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _attack18b_agent import P2, P3, Agent, day, fail, ok
from lessonledger.commands import CommandError, open_ledger


def test_one_outcome_never_makes_a_global_lesson(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        try:
            agent.outcome("global", "s1", [fail(), ok()], when=day(0))
        except CommandError:
            return  # refused: an outcome belongs to a project
        assert [r.scope for r in led.view.lessons.values()] != ["global"]
        assert led.lessons(P3, record=False) == []


def test_a_proposal_cannot_make_a_lesson_global_by_say_so(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        with pytest.raises(CommandError):
            agent.propose("global", text="Prefer pytest from the repository root",
                          source="user")
        assert led.lessons(P2, record=False) == []
