"""attack18b: ``why --project P --query Q`` says why a lesson was or was not recalled.

README "Recall": "with `--project P --query Q` it says why the lesson was or was not
recalled". README rule 11: "A global lesson bound to another environment says nothing
there ... neither recalled nor checked there". For exactly such a lesson ``why`` must say
so; it raises StopIteration instead (a traceback on the command line, exit 1).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from uuid import UUID

from _attack18b_agent import P1, P2, P3, Agent, day, ok
from lessonledger.commands import open_ledger


def _bound_global(home: Path) -> UUID:
    with open_ledger(home, sync=False) as led:
        agent = Agent(led)
        lid = agent.learn(P1, "s1", when=day(0), fingerprint={"py": "3.11"})
        agent.learn(P2, "s2", when=day(1), fingerprint={"py": "3.11"})
        assert led.lesson(lid).scope == "global"
        # P3's outcomes run under another Python: the global lesson says nothing there.
        agent.outcome(P3, "s3", [ok("make", "docs")], when=day(2), fingerprint={"py": "3.12"})
        assert led.recall(P3, "pytest root", record=False).lessons == []
    return lid


def test_why_explains_a_global_lesson_that_holds_elsewhere(tmp_path: Path) -> None:
    lid = _bound_global(tmp_path)
    with open_ledger(tmp_path, sync=False) as led:
        story = led.why(lid, project=P3, query="pytest root")
    assert story.recall is not None
    assert story.recall.shown is False


def test_why_cli_on_such_a_lesson_answers_instead_of_a_traceback(tmp_path: Path) -> None:
    lid = _bound_global(tmp_path)
    cli = Path(sys.executable).with_name("lessonledger")
    done = subprocess.run([str(cli), "--home", str(tmp_path), "why", str(lid)[:8],
                           "--project", P3, "--query", "pytest root"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in done.stderr, done.stderr[-400:]
    assert done.returncode == 0, (done.returncode, done.stderr[-400:])
    assert "not shown" in done.stdout


def test_mcp_why_tool_on_such_a_lesson_answers(tmp_path: Path) -> None:
    """The MCP ``why`` tool always judges recall in the server's project (``_why`` passes
    ``q.project or project``), so in P3 plain ``why`` of that lesson, with no query,
    raises StopIteration out of ``call_tool`` instead of answering or returning a tool
    error (README "Agents over MCP": a refusal "is a tool error")."""
    from lessonledger.ops.mcp_server import call_tool

    lid = _bound_global(tmp_path)
    with open_ledger(tmp_path, sync=False) as led:
        result = call_tool(led, "why", {"lesson": str(lid)}, P3)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["lesson"]["lesson_id"] == str(lid)
