"""``lessonledger recall``, ``check`` and ``why``: what an agent sees, and why.

Every one takes ``--as-of POSITION|TIME`` to answer as the ledger stood then (a fresh
replay of the log up to that point; nothing is recorded), and ``--json``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from lessonledger.commands.audit import Why
from lessonledger.commands.errors import UnknownLessonError
from lessonledger.commands.read_side import Reader
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ops.hub_commands import add_remote
from lessonledger.ops.lesson_commands import asking, row_json
from lessonledger.ops.render import (
    TimeRangeError,
    add_read_only,
    echo,
    parse_time,
    print_json,
    time_fields,
    timestamp,
)
from lessonledger.sync.client import RemoteLedger

__all__ = ["register", "why_json"]


def _as_of(text: str) -> int | datetime:
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return parse_time(text)
    except TimeRangeError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    except ValueError as e:
        msg = f"expected a log position or an ISO 8601 time, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from e


def _position(reader: Reader | RemoteLedger, as_of: int | datetime | None) -> int | None:
    if as_of is None or isinstance(as_of, int):
        head = reader.head()
        if isinstance(as_of, int) and as_of > head:
            msg = f"--as-of {as_of} is past the last position {head}"
            raise LedgerConfigError(msg)
        return as_of
    # Whole microseconds, exactly: a float timestamp would be off by up to a few hundred ns.
    since = as_of - datetime(1970, 1, 1, tzinfo=UTC)
    return reader.position_at(since // timedelta(microseconds=1) * 1000)


def _unrecorded(reader: Reader | RemoteLedger) -> dict[str, bool]:
    """On a home nobody may write, an answer says that what it showed was not recorded."""
    return {} if reader.records else {"recorded": False}


def _cmd_recall(args: argparse.Namespace) -> int:
    with asking(args) as reader:
        as_of = _position(reader, args.as_of)
        record = args.record and as_of is None and reader.records
        result = reader.recall(args.project, args.query, session=args.session,
                               principal=args.principal, record=record, as_of=as_of)
    if args.json:
        print_json({**msgspec.to_builtins(result), **_unrecorded(reader)})
    else:
        for line in (result.section or "no lessons on file for this project").split("\n"):
            echo(line)
        print(f"({len(result.lessons)} of {len(result.ranked)} candidates, "
              f"{result.tokens} tokens)", file=sys.stderr)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    with asking(args) as reader:
        as_of = _position(reader, args.as_of)
        record = args.record and as_of is None and reader.records
        result = reader.check(args.project, args.operation, args.target, session=args.session,
                              principal=args.principal, record=record, as_of=as_of)
    if args.json:
        print_json({**msgspec.to_builtins(result), **_unrecorded(reader)})
    else:
        echo(result.line)
    return 0


def _cmd_why(args: argparse.Namespace) -> int:
    with asking(args) as reader:
        as_of = _position(reader, args.as_of)
        lesson_id = reader.find_lesson(args.lesson)
        try:
            story = reader.why(lesson_id, project=args.project, query=args.query, as_of=as_of)
        except UnknownLessonError:
            if as_of is None:
                raise
            # It exists now (find_lesson found it), so it was not yet there at --as-of.
            moves = reader.lesson(lesson_id).moves
            when = args.as_of if isinstance(args.as_of, int) else args.as_of.isoformat()
            born = f"; it was first recorded at position {moves[0].position}" if moves else ""
            msg = f"lesson {lesson_id} did not exist yet at {when} (--as-of){born}"
            raise LedgerConfigError(msg) from None
    if args.json:
        print_json(why_json(story))
        return 0
    row = story.lesson
    echo(f"{row.lesson_id}  {row.status}  confidence {row.confidence:.2f}  scope {row.scope}")
    echo(f"  {row.text}")
    for step in story.steps:
        cited = f" outcome {step.outcome}" if step.outcome else ""
        echo(f"  @{step.position:<7} {timestamp(step.recorded_at)}  {step.type:<20} "
             f"by {step.actor or '-':<8} -> {step.confidence:.2f}{cited} {step.note}")
    if story.recall is not None:
        verdict = story.recall
        said = verdict.reason if verdict.shown else f"not shown: {verdict.reason}"
        echo(f"  recall for {verdict.project[:16]} / {verdict.query!r}: {said}")
    return 0


def why_json(story: Why) -> dict[str, Any]:
    """A lesson's story as ``why --json`` prints it.

    The lesson's clocks are ISO times as in ``lessons show --json``; each step's
    ``recorded_at`` (the ledger's clock) and ``occurred_at`` (the publisher's) are ISO
    times too, each with its exact nanoseconds beside it (``recorded_at_ns``), as
    ``log --json`` gives them.
    """
    data: dict[str, Any] = msgspec.to_builtins(story)
    data["lesson"] = row_json(story.lesson, moves=True)
    data["steps"] = [{**step, **time_fields("recorded_at", step["recorded_at"]),
                      **time_fields("occurred_at", step["occurred_at"])}
                     for step in data["steps"]]
    return data


def _common(p: Any) -> None:
    p.add_argument("--as-of", type=_as_of, default=None, metavar="POSITION|TIME",
                   help="answer as the ledger stood at a log position or an ISO time")
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_read_only(p)
    add_remote(p)


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add recall, check and why to the CLI's sub-parsers."""
    recall = sub.add_parser("recall", help="the lessons section an agent puts in its prompt")
    recall.add_argument("--project", required=True, help="the project digest")
    recall.add_argument("query", help="what the agent is about to do")
    check = sub.add_parser("check", help="what is on file for an operation, in one line")
    check.add_argument("--project", required=True, help="the project digest")
    check.add_argument("operation", help="the operation key, e.g. pytest:tests/")
    check.add_argument("target", help="the target key, relative to the project")
    for p, run in ((recall, _cmd_recall), (check, _cmd_check)):
        p.add_argument("--session", default="", help="the agent session asking")
        p.add_argument("--principal", default="", help=(
            "whose work it is: the record of what was shown carries it, so erasing the "
            "principal takes it"))
        p.add_argument("--no-record", dest="record", action="store_false",
                       help="do not record this as shown to an agent (browsing)")
        _common(p)
        p.set_defaults(run=run)
    why = sub.add_parser("why", help="the events behind a lesson; why it was (not) recalled")
    why.add_argument("lesson", help="lesson id, or a unique prefix of it")
    why.add_argument("--project", help="judge its recall for this project …")
    why.add_argument("--query", help="… and this query")
    _common(why)
    why.set_defaults(run=_cmd_why)
