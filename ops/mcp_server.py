"""``lessonledger mcp``: the ledger as Model Context Protocol tools, over stdio.

Built on the official ``mcp`` SDK's low-level :class:`~mcp.server.lowlevel.Server`:
its tools are ours, with input schemas generated from the msgspec types the ledger
already checks (:mod:`lessonledger.commands.messages` for the two commands,
:mod:`lessonledger.commands.queries` for the four queries), so a schema cannot drift
from what the ledger accepts. A refusal is a tool error (``isError``) whose text is
the line the command line prints for it (:func:`lessonledger.ops.failures.failure`).

The server works on any object with the ledger's methods
(:class:`~lessonledger.ops.ledger_api.LedgerApi`): a local
:class:`~lessonledger.commands.ledger.Ledger`, or a client of a hub. Each call runs in a
worker thread, as the ledger's calls block (LMDB, fsync); the ledger serialises them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.to_thread
import mcp.types as types
import msgspec
from lessonledger.commands.messages import (
    ObserveOutcome,
    ProposeLesson,
    checked_project,
    command_from,
)
from lessonledger.commands.queries import CheckQuery, LessonsQuery, RecallQuery, WhyQuery
from lessonledger.ledger.events import Project, Scope
from lessonledger.ops.failures import failure
from lessonledger.ops.ledger_api import LedgerApi
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from msgspec import Meta, Struct

__all__ = ["TOOLS", "Tool", "build_server", "call_tool", "serve_stdio",
           "tool_schema"]


#: What a tool answers: the text shown to the model, and the same as structured content.
Answer = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its name, the type its arguments decode into, and what it runs."""

    name: str
    kind: type[Struct]
    run: Callable[[LedgerApi, Any, str], Answer]
    #: What a model should know to call it well, beyond what the type says.
    hint: str = ""

    @property
    def description(self) -> str:
        """The type's docstring (what it is, in the ledger's own words), then the hint."""
        return " ".join([*(self.kind.__doc__ or "").split(), *self.hint.split()])


def _builtins(value: object) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(value)
    return data


def _json(data: object) -> str:
    return msgspec.json.encode(data).decode()


def _stamp(q: Any) -> dict[str, str]:
    return {"session": q.session, "actor": q.actor, "principal": q.principal}


def _recall(api: LedgerApi, q: RecallQuery, project: str) -> Answer:
    result = api.recall(q.project or project, q.query, **_stamp(q))
    return result.section or "no lessons on file for this project", _builtins(result)


def _check(api: LedgerApi, q: CheckQuery, project: str) -> Answer:
    result = api.check(q.project or project, q.operation, q.target, **_stamp(q))
    return result.line, _builtins(result)


def _lessons(api: LedgerApi, q: LessonsQuery, project: str) -> Answer:
    rows = [_builtins(row) for row in api.lessons(q.project or project, **_stamp(q))]
    for row in rows:
        del row["moves"]  # `why` tells a lesson's story; the listing stays short
    data = {"lessons": rows}
    return _json(data), data


def _why(api: LedgerApi, q: WhyQuery, project: str) -> Answer:
    lesson_id = api.find_lesson(q.lesson)
    story = api.why(lesson_id, project=q.project or project, query=q.query)
    data = _builtins(story)
    return _json(data), data


#: A tool's ``project``: a command's, but optional.
_PROJECT_ARGUMENT = Annotated[Scope | None, Meta(description=(
    "the project digest (16 to 64 lowercase hex characters, or 'global'); the server's "
    "own project (its working directory's git remote) when omitted"))]
#: The same, where the command takes a project alone (an outcome, a proposal).
_PROJECT_ONLY_ARGUMENT = Annotated[Project | None, Meta(description=(
    "the project digest (16 to 64 lowercase hex characters); the server's own project "
    "(its working directory's git remote) when omitted"))]


def _arguments_of(kind: type[Struct]) -> type[Struct]:
    """A command's fields as a tool's arguments: the same types, ``project`` optional.

    Derived from the command's own fields (never restated), so its schema is the
    command's schema but for the tag, which the tool's name stands for, and the project,
    which defaults to the server's.
    """
    fields: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(kind):
        if f.name == "project":
            fields.append((f.name, _PROJECT_ONLY_ARGUMENT if f.type is Project
                           else _PROJECT_ARGUMENT, None))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, f.type, msgspec.field(default_factory=f.default_factory)))
        elif f.default is not msgspec.NODEFAULT:
            fields.append((f.name, f.type, f.default))
        else:
            fields.append((f.name, f.type, msgspec.NODEFAULT))
    return msgspec.defstruct(
        kind.__name__, [(n, t) if d is msgspec.NODEFAULT else (n, t, d) for n, t, d in fields],
        kw_only=True, frozen=True, forbid_unknown_fields=True,
        namespace={"__doc__": kind.__doc__, "command": kind})


def _command(kind: type[ObserveOutcome | ProposeLesson]
             ) -> Callable[[LedgerApi, Any, str], Answer]:
    def run(api: LedgerApi, args: Any, project: str) -> Answer:
        fields = {name: getattr(args, name) for name in args.__struct_fields__}
        fields["project"] = fields["project"] or project
        receipt = api.execute(command_from(fields, kind))
        data = _builtins(receipt)
        return _json(data), data
    return run


TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool("recall", RecallQuery, _recall, "Call it before planning; the text answered is "
         "the section to read. What it shows is in play for the session's outcome."),
    Tool("check", CheckQuery, _check, "Call it before a risky operation."),
    Tool("observe_outcome", _arguments_of(ObserveOutcome), _command(ObserveOutcome),
         "Call it when a task ends, with every operation tried in order, failed ones "
         "included: a failure then a success on one target teaches a lesson. The same "
         "key again writes nothing (a safe retry)."),
    Tool("propose_lesson", _arguments_of(ProposeLesson), _command(ProposeLesson),
         "Give as evidence the outcome ids (from observe_outcome) that show it."),
    Tool("lessons", LessonsQuery, _lessons),
    Tool("why", WhyQuery, _why),
)}


def _ecma(schema: Any) -> Any:
    r"""The schema with Python's end anchor ``\Z`` written as JSON Schema's ``$``.

    JSON Schema patterns are ECMA-262 regexes, where ``\Z`` is no anchor (it matches a
    ``Z``, or is a syntax error with the ``u`` flag), so a client validating arguments
    would refuse every project digest. ``$`` without the multiline flag means the same.
    """
    if isinstance(schema, dict):
        return {k: (v[:-2] + "$" if k == "pattern" and isinstance(v, str)
                    and v.endswith("\\Z") else _ecma(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_ecma(v) for v in schema]
    return schema


#: A time as msgspec decodes one (RFC 3339, ``T``, ``t`` or a space between date and
#: time, the offset optional): msgspec's schema of a ``datetime`` is a bare string, which
#: a client would fill with ``yesterday`` or ``2026-01-01``, both refused.
_TIME_PATTERN = (r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]"
                 r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?"
                 r"([Zz]|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?$")
_TIME_DESCRIPTION = ("when it happened, RFC 3339 (2026-01-01T09:30:00Z); a time without an "
                     "offset is UTC; the ledger's clock when omitted")


def _times(kind: type[Struct], schema: dict[str, Any]) -> None:
    """Say in ``schema`` what a time field of ``kind`` takes (see :data:`_TIME_PATTERN`)."""
    info = msgspec.inspect.type_info(kind)
    assert isinstance(info, msgspec.inspect.StructType)
    for f in info.fields:
        options = f.type.types if isinstance(f.type, msgspec.inspect.UnionType) else (f.type,)
        if not any(isinstance(o, msgspec.inspect.DateTimeType) for o in options):
            continue
        prop = schema["properties"][f.encode_name]
        prop.setdefault("description", _TIME_DESCRIPTION)
        for branch in prop.get("anyOf", [prop]):
            if branch.get("type") == "string":
                branch["pattern"] = _TIME_PATTERN


def tool_schema(kind: type[Struct]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, generated from their msgspec type.

    msgspec puts the type itself under ``$defs`` and refers to it; a tool's input schema
    must be the object itself, so it is lifted out, the other definitions kept beside it.
    A time field gets the pattern of what msgspec decodes as a time (:func:`_times`).
    """
    generated = msgspec.json.schema(kind)
    defs = dict(generated.get("$defs", {}))
    schema: dict[str, Any] = defs.pop(generated["$ref"].rsplit("/", 1)[-1])
    _times(kind, schema)
    if defs:
        schema["$defs"] = defs
    return dict(_ecma(schema))


def call_tool(api: LedgerApi, name: str, arguments: dict[str, Any] | None,
              project: str) -> types.CallToolResult:
    """Run one tool call; a refusal is a tool error with the command line's message."""
    tool = TOOLS.get(name)
    if tool is None:
        line = (f"lessonledger: no tool named {name!r}; the tools are "
                f"{', '.join(TOOLS)}")
        return _error(line)
    try:
        project_given = (arguments or {}).get("project")
        if isinstance(project_given, str):
            checked_project(project_given)  # refused in the words the command line uses
        args = msgspec.convert(arguments or {}, tool.kind)
        text, data = tool.run(api, args, project)
    except Exception as e:
        failed = failure(e)
        if failed is None:
            raise
        return _error(failed.line)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=data)


def _error(line: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=line)],
                                is_error=True)


def build_server(api: LedgerApi, project: str, *, version: str = "") -> Server[Any]:
    """An MCP server whose tools call ``api``; queries default to ``project``."""
    listed = [types.Tool(name=tool.name, description=tool.description,
                         input_schema=tool_schema(tool.kind)) for tool in TOOLS.values()]

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def on_call(ctx: ServerRequestContext[Any],
                      params: types.CallToolRequestParams) -> types.CallToolResult:
        return await anyio.to_thread.run_sync(
            call_tool, api, params.name, params.arguments, project)

    return Server("lessonledger", version=version, instructions=_INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=on_call)


_INSTRUCTIONS = (
    "Before planning a task, call recall with what you are about to do and put its "
    "section in front of you; before a risky operation, call check. When the task ends, "
    "call observe_outcome with every operation you tried, in order, failed ones "
    "included: the ledger learns lessons from them. Secrets are refused; never send one.")


def serve_stdio(api: LedgerApi, project: str, *, version: str = "") -> None:
    """Serve ``api`` over stdin and stdout until the client closes them."""
    server = build_server(api, project, version=version)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
