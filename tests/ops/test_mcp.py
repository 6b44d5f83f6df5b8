"""``lessonledger mcp`` as an MCP client sees it: a real subprocess, the SDK's own client.

The server is started the way a client config starts it (``lessonledger mcp``) and driven
over stdio by ``mcp``'s ``stdio_client`` and ``ClientSession``: the tools it lists and
their schemas, an outcome observed and then the lesson recalled, and secret-shaped input
refused as a tool error that writes nothing, in the command line's own words.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import msgspec
import pytest
from in_process import cli
from lessonledger.commands.messages import ObserveOutcome, ProposeLesson
from lessonledger.commands.queries import CheckQuery, LessonsQuery, RecallQuery, WhyQuery
from lessonledger.commands.read_side import open_reader
from lessonledger.ops.mcp_server import TOOLS, tool_schema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CLI = str(Path(sys.executable).with_name("lessonledger"))
PROJECT = "d" * 32
TRAP = [{"op": "pytest:tests/", "target": "tests", "ok": False, "error": "no conftest"},
        {"op": "pytest:root", "target": "tests", "ok": True, "order": 1}]
#: detect-secrets' keyword detector calls this a credential (the AWS documentation's key).
SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _init(home: Path) -> None:
    # By main() in this process: making the home is not under test (the server is).
    done = cli("--home", str(home), "init")
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def _session(home: Path, *args: str, cwd: Path | None = None
                   ) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=CLI, args=["--home", str(home), "mcp", *args],
                                   cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


def _head(home: Path) -> int:
    with open_reader(home) as reader:
        return reader.head()


def _cli_line(home: Path, *argv: str) -> str:
    """The CLI's one-line refusal of ``argv`` (by main() in this process), to compare."""
    done = cli("--home", str(home), *argv)
    assert done.returncode == 2, (done.stdout, done.stderr)
    return done.stderr.strip()


def test_tools_list_gives_every_tool_with_the_schema_of_its_msgspec_type(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _init(home)
    kinds: dict[str, type[msgspec.Struct]] = {
        "recall": RecallQuery, "check": CheckQuery, "lessons": LessonsQuery, "why": WhyQuery,
        "observe_outcome": ObserveOutcome, "propose_lesson": ProposeLesson}

    async def body() -> None:
        async with _session(home, "--project", PROJECT) as session:
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == set(kinds)
        for name, kind in kinds.items():
            schema = listed[name].input_schema
            assert schema == tool_schema(TOOLS[name].kind), name
            assert schema["type"] == "object"
            assert schema["additionalProperties"] is False
            jsonschema.Draft202012Validator.check_schema(schema)
            # The command's own fields, all of them, but for the tag the tool's name is.
            fields = {f.encode_name for f in msgspec.structs.fields(kind)}
            assert set(schema["properties"]) == fields - {"command"}, name
            assert "project" not in schema.get("required", []), "the server's by default"
            assert "\\Z" not in json.dumps(schema), "JSON Schema patterns are ECMA regexes"
            assert listed[name].description
        outcome = listed["observe_outcome"].input_schema
        assert set(outcome["required"]) == {"key", "passed"}
        validator = jsonschema.Draft202012Validator(outcome)
        assert validator.is_valid({"key": "k", "passed": True, "operations": TRAP})
        assert not validator.is_valid({"key": "k", "passed": True, "project": "NOPE"})
        assert not validator.is_valid({"key": "k", "passed": True, "operations": [{"op": ""}]})

    _run(body)


def test_an_observed_outcome_is_recalled_as_a_lesson(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _init(home)

    async def body() -> None:
        async with _session(home, "--project", PROJECT) as session:
            empty = await session.call_tool("recall", {"query": "run the tests"})
            assert not empty.is_error
            assert _text(empty) == "no lessons on file for this project"
            observed = await session.call_tool("observe_outcome", {
                "key": "task-1", "session": "s-1", "passed": True, "task": "fix the build",
                "operations": TRAP})
            assert not observed.is_error, _text(observed)
            receipt = json.loads(_text(observed))
            assert receipt["positions"]
            assert "outcome_id" in receipt["ids"]
            recalled = await session.call_tool("recall", {"query": "run the tests",
                                                          "session": "s-2"})
            assert not recalled.is_error
            section = _text(recalled)
            assert section.startswith("Lessons:")
            assert "Prefer `pytest:root` over `pytest:tests/` for tests" in section
            data = recalled.structured_content
            assert data is not None
            assert data["project"] == PROJECT
            lesson_id = data["lessons"][0]["lesson_id"]
            check = await session.call_tool("check", {"operation": "pytest:tests/",
                                                      "target": "tests"})
            assert _text(check).startswith("pytest:tests/ on tests: avoid")
            listed = json.loads(_text(await session.call_tool("lessons", {})))["lessons"]
            assert [row["lesson_id"] for row in listed] == [lesson_id]
            why = await session.call_tool("why", {"lesson": lesson_id[:8],
                                                  "query": "run the tests"})
            story = json.loads(_text(why))
            assert story["lesson"]["lesson_id"] == lesson_id
            assert story["steps"][0]["outcome"] == receipt["ids"]["outcome_id"]
            assert story["recall"]["shown"] is True
        # The same lesson, read by the command line from the home the server wrote.
        done = cli("--home", str(home), "lessons", "list", "--json")
        assert done.returncode == 0, done.stderr
        assert lesson_id in done.stdout

    _run(body)


def test_secret_shaped_input_is_a_tool_error_in_the_cli_s_words_and_writes_nothing(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    _init(home)
    leaked = [{"op": "deploy", "target": "prod", "ok": False, "error": SECRET}]
    cli_recall = _cli_line(home, "recall", "--project", PROJECT, SECRET)

    async def body() -> None:
        async with _session(home, "--project", PROJECT) as session:
            first = await session.call_tool("observe_outcome", {
                "key": "task-1", "passed": True, "operations": TRAP})
            assert not first.is_error
            head = _head(home)
            refused = [
                await session.call_tool("observe_outcome", {
                    "key": "task-2", "passed": False, "operations": leaked}),
                await session.call_tool("propose_lesson", {
                    "key": "claim-1", "kind": "do", "prefer_op": "deploy", "target": "prod",
                    "text": f"deploy with {SECRET}"}),
                await session.call_tool("recall", {"query": SECRET}),
                await session.call_tool("check", {"operation": "deploy", "target": SECRET}),
                await session.call_tool("lessons", {"principal": SECRET}),
            ]
            for result in refused:
                assert result.is_error
                line = _text(result)
                assert line.startswith("lessonledger: ")
                assert "\n" not in line
                assert "looks like a credential" in line
                assert SECRET not in line
            assert _text(refused[0]).startswith(
                "lessonledger: $.operations[0].error looks like a credential")
            assert _text(refused[2]) == cli_recall
            await anyio.sleep(0.2)  # past the 50 ms in which a recall's record lands
            assert _head(home) == head, "a refusal wrote nothing"
            # Other bad input: a tool error too, in the words of the command line.
            bad = await session.call_tool("recall", {"query": "x", "project": "NOPE"})
            assert bad.is_error
            assert _text(bad) == _cli_line(home, "recall", "--project", "NOPE", "x")
            unknown = await session.call_tool("why", {"lesson": "zzzz"})
            assert unknown.is_error
            assert _text(unknown) == _cli_line(home, "why", "zzzz")

    _run(body)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.mark.parametrize("remote", ["git@GitHub.com:acme/widgets.git",
                                    "https://alice@github.com/acme/widgets",
                                    "ssh://git@github.com:22/acme/widgets.git/"])
def test_without_a_project_the_server_uses_its_directory_s_git_remote(
        tmp_path: Path, remote: str) -> None:
    import lessonledger

    home, repo = tmp_path / "home", tmp_path / "repo"
    _init(home)
    (repo / "sub").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "remote", "add", "origin", remote)
    # The documented hash, computed here by hand as a client in another language would.
    expected = hashlib.sha256(b"git:github.com/acme/widgets").hexdigest()[:32]
    assert lessonledger.project_id(repo) == expected
    assert lessonledger.project_id(repo / "sub") == expected, "anywhere in the work tree"

    async def body() -> None:
        async with _session(home, cwd=repo) as session:
            observed = await session.call_tool("observe_outcome", {
                "key": "task-1", "passed": True, "operations": TRAP})
            assert not observed.is_error, _text(observed)
            recalled = await session.call_tool("recall", {"query": "tests"})
            assert recalled.structured_content is not None
            assert recalled.structured_content["project"] == expected
            assert recalled.structured_content["lessons"]

    _run(body)


def _text(result: Any) -> str:
    [content] = result.content
    text: str = content.text
    return text


@pytest.mark.parametrize("when", [
    "2026-01-01T00:00:00Z", "2026-01-01t10:30:00.5+05:30", "2026-01-01 00:00:00-00:00",
    "2026-01-01T00:00:00", "2026-01-01", "yesterday", "2026-01-01T00:00Z",
    "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00,5Z", "1700000000",
])
def test_a_time_the_schema_allows_is_one_the_tool_takes(tmp_path: Path, when: str) -> None:
    from lessonledger.commands import open_ledger
    from lessonledger.ops.mcp_server import call_tool

    arguments = {"key": f"k-{when}", "passed": True, "occurred_at": when}
    with open_ledger(tmp_path / "home", sync=False) as ledger:
        for name in ("observe_outcome", "propose_lesson"):
            schema = tool_schema(TOOLS[name].kind)
            assert "description" in schema["properties"]["occurred_at"], name
        validator = jsonschema.Draft202012Validator(tool_schema(TOOLS["observe_outcome"].kind))
        answer = call_tool(ledger, "observe_outcome", arguments, PROJECT)
        assert validator.is_valid(arguments) == (not answer.is_error), answer.content
