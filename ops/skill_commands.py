"""``lessonledger skill …``, ``deltas …`` and ``facts …``: the learned overlay, legible.

A person registers an authored skill (its ``SKILL.md`` stays where it is: only its
digest and section anchors are recorded), reviews the staged deltas with a diff of the
effective skill with and without each, approves, rejects or archives them, and sees
which learned facts no tool reads. Every command takes ``--json``, and ``--to
tcp://HOST:PORT`` to act on a hub's ledger instead of the home (with ``--key-file`` and
``--server-key`` for CURVE: ``--key`` is the command's idempotency key here).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args
from uuid import UUID

import msgspec
from lessonledger.commands.skills import Skills
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.events import Scope
from lessonledger.ledger.text import folded
from lessonledger.ops.hub_commands import add_remote, remote
from lessonledger.ops.lesson_commands import open_lessons
from lessonledger.ops.render import echo, print_json
from lessonledger.projections.deltas import DeltaRow, DeltaStatus
from lessonledger.projections.resolution import DEFAULT_BUDGET
from lessonledger.sync.client import RemoteSkills

__all__ = ["front_matter", "front_matter_permissions", "register"]


_FRONT = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.S)


def front_matter(text: str) -> dict[str, str]:
    """The top-level ``key: value`` lines of a skill's front matter (no full YAML)."""
    match = _FRONT.match(text)
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines() if match else []:
        key, colon, value = line.partition(":")
        if colon and key.strip() and not line[:1].isspace() and not line.startswith("-"):
            fields[key.strip()] = value.strip().strip("'\"")
    return fields


_PERMISSIONS_KEY = re.compile(r"^(\s*)-?\s*permissions\s*:(.*)$", re.I)
#: ``allowed-tools`` entries that imply a local capability (Claude Code's tool names).
_LOCAL_TOOLS = {
    "bash": "shell", "shell": "shell", "terminal": "shell", "exec": "shell",
    "computer": "desktop", "write": "filesystem", "edit": "filesystem",
    "multiedit": "filesystem", "notebookedit": "filesystem", "read": "filesystem",
    "glob": "filesystem", "grep": "filesystem", "ls": "filesystem",
}


def front_matter_permissions(text: str) -> list[str]:
    """Every permission a skill's front matter declares or implies (no full YAML).

    Read: a ``permissions:`` key at any depth (top level or ``metadata: gaia:``), as an
    inline list (``[a, b]``), a comma-separated value or ``- item`` lines below it; and
    ``allowed-tools`` naming a tool with local capability (``Bash`` implies ``shell``,
    ``Write``, ``Edit``, ``Read``, … ``filesystem``).
    """
    match = _FRONT.match(text)
    lines = match.group(1).splitlines() if match else []
    found: list[str] = []
    for number, line in enumerate(lines):
        key = _PERMISSIONS_KEY.match(folded(line))
        if key is None:
            continue
        found += _tool_list(key.group(2))
        indent = len(key.group(1))
        for below in lines[number + 1:]:
            item = folded(below)
            if item.strip() and (len(item) - len(item.lstrip())) <= indent \
                    and not item.lstrip().startswith("-"):
                break
            if item.lstrip().startswith("-"):
                found += _tool_list(item.lstrip()[1:])
    for tool in _tool_list(front_matter(text).get("allowed-tools", "")):
        implied = _LOCAL_TOOLS.get(tool.split("(", 1)[0].strip().casefold())
        if implied:
            found.append(implied)
    return list(dict.fromkeys(p for p in found if p))


def _tool_list(value: str) -> list[str]:
    """``allowed-tools``: space- or comma-separated, optionally in brackets."""
    return [t.strip("'\"") for t in re.split(r"[\s,]+", value.strip().strip("[]")) if t]


def _budget(text: str) -> int:
    """``--budget``: a whole number of tokens, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"the budget is a number of tokens, 0 or more, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _scope(text: str) -> str:
    """``--scope`` of a query: a project digest or 'global', as a command's scope must be.

    A query writes no command that would refuse it, so a typo would resolve as a scope
    no delta is in and answer the base as though nothing were learned.
    """
    try:
        return msgspec.convert(text, Scope)
    except msgspec.ValidationError:
        msg = (f"the scope is a project digest (16 to 64 lowercase hex characters) or "
               f"'global', not {text!r}")
        raise argparse.ArgumentTypeError(msg) from None


#: The largest skill file read (4 MB): a body holds at most 1,000,000 characters
#: (``RegisterSkill.body``), which is at most 4 bytes each in UTF-8.
MAX_SKILL_FILE_BYTES = 4_000_000
#: Help for a verb's first positional: which is the name and which the file, since a
#: missing one is reported by its place (one argument given is taken as the name).
_NAME_HELP = "the name the skill was registered under (`skill register NAME PATH`)"


def _read(path: Path) -> str:
    """A skill file's text, exactly (no newline translation: the digest is of its bytes).

    Raises:
        LedgerConfigError: the file is over :data:`MAX_SKILL_FILE_BYTES`, or cannot be
            read; read no further than the limit (a device or a pipe may have no end).
    """
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SKILL_FILE_BYTES + 1)
    except OSError as e:
        msg = f"cannot read {path}: {e.strerror}"
        raise LedgerConfigError(msg) from e
    if len(data) > MAX_SKILL_FILE_BYTES:
        msg = (f"{path} is over {MAX_SKILL_FILE_BYTES:,} bytes, the most a skill file may "
               "hold (a body is at most 1,000,000 characters); nothing was read or written")
        raise LedgerConfigError(msg)
    return data.decode()


@contextmanager
def _skills(args: argparse.Namespace) -> Iterator[Skills | RemoteSkills]:
    """The skills a verb acts on: a hub's with ``--to``, else the home's."""
    if args.to:
        with remote(args) as hub:
            yield hub.skills
    else:
        with open_lessons(args.home) as ledger:
            yield ledger.skills


def _ids(skills: Skills | RemoteSkills, texts: list[str]) -> list[UUID]:
    return [skills.find_delta(t) for t in texts]


def _key(args: argparse.Namespace) -> dict[str, str]:
    """``--key``, when given: the command's idempotency key (a retry writes nothing)."""
    key = getattr(args, "key", None)
    return {"key": key} if key else {}


def _row_line(row: DeltaRow) -> str:
    record = f"{row.total_successes}/{row.total_attempts}"
    return (f"{str(row.delta_id)[:8]}  {row.status:<10} {row.skill}  tier {row.tier} "
            f"{row.kind:<10} {row.anchor:<18} {record:>7}  {row.payload}")


def _print_rows(args: argparse.Namespace, rows: list[DeltaRow]) -> None:
    if args.json:
        print_json([msgspec.to_builtins(r) for r in rows])
        return
    for row in rows:
        echo(_row_line(row))
    if not rows:
        print("no deltas")


def _cmd_register(args: argparse.Namespace) -> int:
    body = _read(args.path)
    front = front_matter(body)
    name = args.name or front.get("name") or (
        args.path.parent.name if args.path.name == "SKILL.md" else args.path.stem)
    tools = args.tool or _tool_list(front.get("allowed-tools", ""))
    with _skills(args) as skills:
        before = skills.base(name, args.root)
        fields = {"root": args.root, "version": args.version or front.get("version") or "0",
                  "tools": tools, "permissions": list(dict.fromkeys(
                      [*(args.permission or []), *front_matter_permissions(body)]))}
        skills.register(name, body, **fields, **({"key": args.key} if args.key else {}))
        base = skills.base(name, args.root)
        assert base is not None
        # Orphaned by this registration (a changed body or changed permissions).
        orphaned = [r.delta_id for r in skills.deltas(name, args.root, "orphaned")
                    if before is not None and r.changed[0] == base.position]
    if args.json:
        print_json(msgspec.to_builtins(base) | {"orphaned": [str(i) for i in orphaned]})
        return 0
    echo(f"registered {name} ({args.root}) version {base.version}: "
         f"{len(base.anchors)} sections, {len(base.tools)} tools, "
         f"digest {base.body_digest[:12]}")
    if orphaned:
        print(f"the body or permissions changed: {len(orphaned)} deltas orphaned; review "
              "them with `lessonledger deltas pending`")
    return 0


def _cmd_resolve(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        result = skills.resolve(
            args.name, _read(args.path), root=args.root, scope=args.scope,
            learning=not args.off, session=args.session or "", budget=args.budget,
            available=args.tool, trial=_ids(skills, args.trial or []))
    if args.json:
        print_json(msgspec.to_builtins(result))
        return 0
    # Line by line, escaped: a learned payload never drives the terminal (--json is exact).
    for line in result.text.splitlines():
        echo(line)
    echo(f"-- tools: {', '.join(result.tools) or 'none'}; {len(result.rendered)} deltas "
         f"rendered, {len(result.retrieval_only)} retrieval-only, "
         f"{result.learned_tokens}/{result.budget} tokens learned")
    if result.orphans:
        print(f"-- {len(result.orphans)} deltas were orphaned by a change of the skill "
              "(shown once): `lessonledger deltas pending`")
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        delta = skills.find_delta(args.delta)
        without, with_it = skills.diff(args.name, _read(args.path), delta,
                                              root=args.root, scope=args.scope)
    lines = list(difflib.unified_diff(
        without.text.splitlines(keepends=True), with_it.text.splitlines(keepends=True),
        "without", f"with {str(delta)[:8]}"))
    if args.json:
        print_json({"delta": str(delta), "without": msgspec.to_builtins(without),
                    "with": msgspec.to_builtins(with_it), "diff": "".join(lines)})
        return 0
    for line in lines:
        echo(line.rstrip("\n"))
    if without.tools != with_it.tools:
        echo(f"tools: {without.tools} -> {with_it.tools}")
    if not lines and without.tools == with_it.tools:
        print("no difference (the delta is out of scope, over the budget, or not rendered)")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        rows = skills.deltas(args.skill, None, args.status)
    _print_rows(args, rows)
    return 0


def _cmd_pending(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        rows = [r for r in skills.deltas(args.skill)
                if r.status in ("staged", "orphaned")]
    _print_rows(args, rows)
    return 0


def _cmd_propose(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        receipt = skills.propose(
            args.skill, root=args.root, tier=args.tier, kind=args.kind, anchor=args.anchor,
            payload=args.payload, provenance=args.provenance, scope=args.scope,
            auto_approve=args.auto_approve, actor=args.by, evidence=args.evidence or [],
            **({"key": args.key} if args.key else {}))
    delta = receipt.ids["delta_id"]
    if args.json:
        print_json({"delta_id": str(delta), "positions": receipt.positions})
    else:
        print(f"staged delta {delta}; review it with `lessonledger skill diff`")
    return 0


def _move(args: argparse.Namespace, verb: str) -> int:
    with _skills(args) as skills:
        ids = _ids(skills, args.ids)
        if getattr(args, "orphans", False):
            ids += [r.delta_id for r in skills.deltas(args.skill, None, "orphaned")]
        if not ids:
            print(f"nothing to {verb}")
            return 0
        fields: dict[str, Any] = {"actor": args.by, **_key(args)}
        if verb != "approve":
            fields["reason"] = args.reason
        receipt = getattr(skills, verb)(ids, **fields)
    if args.json:
        print_json({verb: [str(i) for i in ids], "positions": receipt.positions})
    else:
        done = {"approve": "approved", "reject": "rejected", "archive": "archived"}[verb]
        print(f"{done} {len(ids)} delta{'' if len(ids) == 1 else 's'}; the change applies "
              "from each agent's next session")
    return 0


def _cmd_facts(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        listed = skills.fact_list(args.namespace, inert=args.facts == "inert")
    if args.json:
        print_json([msgspec.to_builtins(f.fact) | {"consumers": f.consumers}
                    for f in listed])
        return 0
    for f in listed:
        row = f.fact
        honoured = ", ".join(f.consumers) or "INERT: no tool reads it"
        echo(f"{row.namespace}  {row.key} = {row.value}  ({row.scope}; {honoured})")
    if not listed:
        print("no facts" if args.facts == "list" else "no inert facts")
    return 0


def _cmd_learn(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        receipt = skills.learn_fact(args.namespace, args.fact_key, args.value,
                                           scope=args.scope, actor=args.by, **_key(args))
    if args.json:
        print_json({"positions": receipt.positions})
    else:
        echo(f"learned {args.namespace} {args.fact_key}")
    return 0


def _cmd_declare(args: argparse.Namespace) -> int:
    with _skills(args) as skills:
        receipt = skills.declare_consumer(args.tool, args.namespace, actor=args.by,
                                                 **_key(args))
    if args.json:
        print_json({"positions": receipt.positions})
    else:
        echo(f"{args.tool} reads {args.namespace}")
    return 0


def _skill_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    skill = sub.add_parser("skill", help="authored skills: register, resolve, diff")
    verbs = skill.add_subparsers(dest="skill_verb", required=True, metavar="VERB",
                                 parser_class=parser_class)
    reg = verbs.add_parser("register", help="record a SKILL.md's digest and section anchors")
    reg.add_argument("path", type=Path, help="the skill file (never copied into the log)")
    reg.add_argument("--name", help="the skill's name (default: its front matter's name, "
                     "else its folder, or the file's stem)")
    reg.add_argument("--version", help="the authored version (default: the front matter's "
                     "version, else 0)")
    reg.add_argument("--tool", action="append", help="a tool the skill may use (repeat; "
                     "default: the front matter's allowed-tools)")
    reg.add_argument("--permission", action="append", help="a declared permission (repeat)")
    reg.add_argument("--key", help="idempotency key")
    reg.set_defaults(run=_cmd_register)
    res = verbs.add_parser("resolve", help="the effective skill: base plus active deltas")
    res.add_argument("name", help=_NAME_HELP)
    res.add_argument("path", type=Path, help="the registered skill file")
    res.add_argument("--off", action="store_true", help="learning off: the base exactly")
    res.add_argument("--session", help="record the resolution for this agent session")
    res.add_argument("--budget", type=_budget, default=DEFAULT_BUDGET,
                     help=f"tokens the learned block may hold ({DEFAULT_BUDGET})")
    res.add_argument("--tool", action="append", help="a tool the agent has (default: the "
                     "skill's declared tools)")
    res.add_argument("--trial", action="append", metavar="ID",
                     help="try a staged delta (trusted, --auto-approve) in this session so "
                     "it can earn its track record (repeat)")
    res.set_defaults(run=_cmd_resolve)
    diff = verbs.add_parser("diff", help="the effective skill with and without a delta")
    diff.add_argument("name", help=_NAME_HELP)
    diff.add_argument("path", type=Path, help="the registered skill file")
    diff.add_argument("delta", help="a delta id or unique prefix")
    diff.set_defaults(run=_cmd_diff)
    for parser in (reg, res, diff):
        parser.add_argument("--root", default="user", help="the skill's root (default user)")
        if parser is not reg:
            parser.add_argument("--scope", default="global", type=_scope,
                                help="project digest or global")
        _common(parser, by=False)


def _common(parser: argparse.ArgumentParser, *, by: bool = True) -> None:
    """The options every skill, deltas and facts verb takes."""
    if by:
        parser.add_argument("--by", default="operator", help="who acts (default operator)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_remote(parser, key_flag="--key-file")


def _delta_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    deltas = sub.add_parser("deltas", help="learned deltas on skills: review and consent")
    verbs = deltas.add_subparsers(dest="deltas_verb", required=True, metavar="VERB",
                                  parser_class=parser_class)
    listing = verbs.add_parser("list", help="every delta, with status and track record")
    # A closed set: a typo would list nothing and tell a reviewer there is nothing to review.
    listing.add_argument("--status", choices=get_args(DeltaStatus), help="only this status")
    listing.set_defaults(run=_cmd_list)
    pending = verbs.add_parser("pending", help="staged and orphaned deltas awaiting a person")
    pending.set_defaults(run=_cmd_pending)
    propose = verbs.add_parser("propose", help="stage a delta (tier 1 hint or tier 3 prose)")
    propose.add_argument("skill")
    propose.add_argument("--tier", type=int, required=True, choices=[0, 1, 2, 3])
    propose.add_argument("--kind", required=True,
                         help="tool_hint | preference | example | caveat")
    propose.add_argument("--payload", required=True, help="the tool, or the prose")
    propose.add_argument("--anchor", default="(body)", help="a section slug")
    propose.add_argument("--provenance", default="user_instruction",
                         choices=["user_instruction", "outcome", "extractor", "untrusted"])
    propose.add_argument("--scope", default="global", help="project digest or global")
    propose.add_argument("--root", default="user")
    propose.add_argument("--evidence", action="append", type=UUID, metavar="OUTCOME_ID",
                         help="an outcome it was learned from (repeat; needed for "
                         "--provenance outcome)")
    propose.add_argument("--auto-approve", action="store_true",
                         help="let a track record of 5 at 85%% activate it (trusted only)")
    propose.add_argument("--key", help="idempotency key")
    propose.set_defaults(run=_cmd_propose)
    for verb in ("approve", "reject", "archive"):
        moving = verbs.add_parser(verb, help=f"{verb} deltas (ids or unique prefixes)")
        moving.add_argument("ids", nargs="*", metavar="ID")
        if verb == "approve":
            moving.add_argument("--orphans", action="store_true",
                                help="also re-approve every orphan (of --skill)")
        else:
            moving.add_argument("--reason", default="", help="why, for the record")
        moving.set_defaults(run=lambda a, v=verb: _move(a, v))
        moving.add_argument("--skill", help="with --orphans: only this skill's")
        moving.add_argument("--key", help="idempotency key (a retry writes nothing)")
    for parser in (listing, pending):
        parser.add_argument("--skill", help="only this skill's deltas")
    for parser in verbs.choices.values():
        _common(parser)


def _fact_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    facts = sub.add_parser("facts", help="tier-0 learned facts and the tools that read them")
    verbs = facts.add_subparsers(dest="facts", required=True, metavar="VERB",
                                 parser_class=parser_class)
    listing = verbs.add_parser("list", help="every learned fact and who reads it")
    listing.add_argument("--namespace", help="only this namespace")
    listing.set_defaults(run=_cmd_facts)
    inert = verbs.add_parser("inert", help="facts no declared consumer reads")
    inert.set_defaults(run=_cmd_facts, namespace=None)
    learn = verbs.add_parser("learn", help="record a fact (a row, never prompt text)")
    learn.add_argument("namespace")
    learn.add_argument("fact_key", metavar="KEY")
    learn.add_argument("value")
    learn.add_argument("--scope", default="global", help="project digest or global")
    learn.set_defaults(run=_cmd_learn)
    declare = verbs.add_parser("declare", help="declare that a tool reads a namespace")
    declare.add_argument("tool")
    declare.add_argument("namespace")
    declare.set_defaults(run=_cmd_declare)
    for parser in (learn, declare):
        parser.add_argument("--key", help="idempotency key (a retry writes nothing)")
    for parser in verbs.choices.values():
        _common(parser)


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``skill``, ``deltas`` and ``facts`` to the CLI's sub-parsers."""
    _skill_parsers(sub, parser_class)
    _delta_parsers(sub, parser_class)
    _fact_parsers(sub, parser_class)
