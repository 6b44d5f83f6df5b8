"""``lessonledger mcp --to``: the MCP tools of a hub's ledger, driven by the SDK's client.

A real hub process (``lessonledger serve``) and a real ``lessonledger mcp --to`` process,
over stdio with ``mcp``'s own ``stdio_client``: an outcome observed through the tool is
written by the hub (its log grows, under the hub's principal), recalled as a lesson, and
a refusal comes back as a tool error in the command line's words. No home is opened by
the MCP server: the one ``--home`` names is never created.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import hubtools
from hubtools import lessonledger
from lessonledger.sync import RemoteLedger
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PROJECT = "e" * 32
TRAP = [{"op": "pytest:tests/", "target": "tests", "ok": False, "error": "no conftest"},
        {"op": "pytest:root", "target": "tests", "ok": True, "order": 1}]
SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _text(result: object) -> str:
    return "".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def test_mcp_to_a_hub_observes_and_recalls_through_the_hub(tmp_path: Path) -> None:
    unused = tmp_path / "never-opened"
    with hubtools.hub(tmp_path / "hub", tmp_path / "serve.log", "--principal", "ops-agent",
                      drain=True) as hub:
        with RemoteLedger(hub.endpoint) as client:
            before = client.head()

        async def body() -> None:
            params = StdioServerParameters(command=lessonledger(), args=[
                "--home", str(unused), "mcp", "--to", hub.endpoint, "--project", PROJECT])
            async with stdio_client(params) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                observed = await session.call_tool("observe_outcome", {
                    "key": "remote-1", "session": "s-1", "passed": True,
                    "task": "fix the build", "operations": TRAP})
                assert not observed.is_error, _text(observed)
                receipt = json.loads(_text(observed))
                assert receipt["positions"]
                recalled = await session.call_tool("recall", {"query": "run the tests",
                                                              "session": "s-2"})
                assert not recalled.is_error, _text(recalled)
                assert "Prefer `pytest:root` over `pytest:tests/` for tests" in _text(recalled)
                refused = await session.call_tool("observe_outcome", {
                    "key": "remote-2", "passed": False, "operations": [
                        {"op": "deploy", "target": "prod", "ok": False, "error": SECRET}]})
                assert refused.is_error
                assert _text(refused).startswith(
                    "lessonledger: $.operations[0].error looks like a credential")
                assert SECRET not in _text(refused)

        anyio.run(body)
        with RemoteLedger(hub.endpoint) as client:
            assert client.head() > before
            rows = client.lessons(PROJECT, record=False)
            assert any(row.prefer_op == "pytest:root" for row in rows)
            written = client.read_log(before + 1)
        assert written
        assert {r.envelope.principal for r in written} == {"ops-agent"}
        assert not unused.exists(), "mcp --to opened no home"
