"""``lessonledger lessons …``, ``publish``, ``rebuild`` and ``reconcile``.

People read and change lessons here; tools publish commands as JSON lines. Browsing
never counts as a recall: only an agent's query moves a lesson's usage clock.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import msgspec
from lessonledger.commands.errors import BatchRefusedError, CommandError, InvalidCommandError
from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import (
    AnyCommand,
    EditLesson,
    Reconcile,
    RetireLesson,
    command_from,
    decode_command,
)
from lessonledger.commands.read_side import Reader
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.errors import LedgerConfigError, LessonLedgerError
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ops import charts
from lessonledger.ops.config import require_home, sync_setting
from lessonledger.ops.hub_commands import add_remote, remote
from lessonledger.ops.progress import bar
from lessonledger.ops.render import add_read_only, echo, parse_time, print_json, timestamp
from lessonledger.projections.lessons import LessonRow
from lessonledger.projections.runner import Runner
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import lesson_view, registry, view_names
from lessonledger.sync.client import RemoteLedger
from lessonledger.sync.replica import queue_commands, replica_info
from lessonledger.sync.snapshots import is_replica
from lessonledger.sync.wire import MAX_BATCH_COMMANDS

__all__ = ["asking", "open_lessons", "open_queries", "register", "row_json"]


@contextmanager
def open_lessons(home: Path) -> Iterator[Ledger]:
    """Open an existing home's ledger; a missing home is a one-line error, not a new home.

    A replica is refused: its log grows only by what it pulls from its hub.
    """
    require_home(home)
    if is_replica(home):
        msg = (f"{home} is a replica of {replica_info(home).hub}: nothing is written here "
               "but what it pulls; `publish` puts commands in its outbox for `push`, and "
               "erasures are made at the hub")
        raise LedgerConfigError(msg)
    ledger = Ledger(home, sync=sync_setting())
    try:
        yield ledger
    finally:
        ledger.close()


@contextmanager
def asking(args: argparse.Namespace) -> Iterator[Reader | RemoteLedger]:
    """The read side a query verb asks: a hub's with ``--to``, else the home's."""
    if getattr(args, "to", None):
        with remote(args) as hub:
            yield hub
    else:
        with open_queries(args.home, read_only=args.read_only) as reader:
            yield reader


@contextmanager
def open_queries(home: Path, *, read_only: bool = False) -> Iterator[Reader]:
    """Open an existing home's read side: never the write lock, never a policy.

    With ``read_only`` (automatic on a read-only filesystem) not a byte is written.
    """
    require_home(home)
    # A replica's queries record nothing: its log grows only by what it pulls.
    reader = Reader(home, read_only=read_only or None, record=not is_replica(home),
                    one_shot=True)
    try:
        yield reader
    finally:
        reader.close()
        if reader.unrecorded:
            print(f"lessonledger: answered, but {reader.unrecorded} recall record(s) were "
                  "not written: another process held the write lock too long, or an "
                  "erasure came after they were shown", file=sys.stderr)


def row_json(row: LessonRow, *, moves: bool = False) -> dict[str, Any]:
    """A lesson row as ``--json`` prints it: its clocks as ISO 8601 UTC times."""
    data: dict[str, Any] = msgspec.to_builtins(row)
    data["created_at"] = timestamp(row.created_at)
    data["last_evidence_at"] = timestamp(row.last_evidence_at)
    data["last_used_at"] = timestamp(row.last_used_at) if row.last_used_at else None
    if not moves:
        del data["moves"]
    return data


def _line(row: LessonRow) -> str:
    return (f"{str(row.lesson_id)[:18]}  {row.status:<10} {row.confidence:4.2f}  "
            f"{row.scope[:12]:<12}  {row.text}")


def _cmd_list(args: argparse.Namespace) -> int:
    with asking(args) as reader:
        rows = reader.catalogue(args.project, everything=args.all)
    for row in rows:
        if args.json:
            print_json(row_json(row))
        else:
            echo(_line(row))
    if not args.json and not rows:
        print("no lessons yet" + ("" if args.all else " (--all shows retired and superseded)"))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    chart = getattr(args, "chart", None)
    if chart is not None:
        charts.require()  # before any work: a missing extra is refused in one line
    with asking(args) as reader:
        row = reader.lesson(reader.find_lesson(args.lesson))
        steps = [(s.occurred_at, s.type, s.confidence)
                 for s in reader.why(row.lesson_id).steps] if chart is not None else []
    if chart is not None:
        charts.confidence_chart(f"{str(row.lesson_id)[:8]}: {row.text}", steps, chart)
    if args.json:
        print_json(row_json(row, moves=True))
        return 0
    echo(f"{row.lesson_id}  {row.status}  confidence {row.confidence:.2f}  version {row.version}")
    echo(f"  {row.text}")
    echo(f"  {row.kind}: avoid {row.avoid_op or '-'}  prefer {row.prefer_op or '-'}  "
         f"on {row.target}  scope {row.scope}  ({row.source}, {row.longevity})")
    echo(f"  evidence: {', '.join(str(e) for e in row.evidence) or 'none (a claim)'}")
    echo(f"  last evidence {timestamp(row.last_evidence_at)}; last used "
         f"{timestamp(row.last_used_at) if row.last_used_at else 'never'}")
    echo("  what moved it:")
    for move in row.moves:
        cited = f" outcome {move.outcome}" if move.outcome else ""
        echo(f"    @{move.position:<8} {move.type:<20} -> {move.confidence:.2f}{cited} "
             f"{move.note}")
    if chart is not None:
        echo(f"  chart of its confidence over time: {chart}")
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    with asking(args) as reader:
        chain = reader.history(reader.find_lesson(args.lesson))
    if args.json:
        print_json([row_json(r) for r in chain])
        return 0
    for row in chain:
        why = f"superseded ({row.reason}) by {row.superseded_by}" if row.superseded_by \
            else row.reason or row.status
        echo(_line(row))
        echo(f"    evidence {', '.join(str(e) for e in row.evidence) or 'none'}; {why}")
    return 0


def _run(args: argparse.Namespace, command: AnyCommand | Callable[[Ledger], AnyCommand]) -> int:
    """Execute a command (or build it from the open ledger first) and print the receipt."""
    with open_lessons(args.home) as ledger:
        receipt = ledger.execute(command if not callable(command) else command(ledger))
    if args.json:
        print_json(receipt)
    else:
        print(f"written at positions {receipt.positions}"
              + "".join(f"; {k} {v}" for k, v in receipt.ids.items()))
    return 0


def _cmd_edit(args: argparse.Namespace) -> int:
    def edit(ledger: Ledger) -> AnyCommand:
        lesson_id = ledger.find_lesson(args.lesson)
        return command_from({"key": args.key or f"edit:{lesson_id}:{time.time_ns()}",
                             "lesson_id": lesson_id, "text": args.text, "actor": "user",
                             "expected_version": args.expected_version}, EditLesson)

    return _run(args, edit)


def _cmd_retire(args: argparse.Namespace) -> int:
    def retire(ledger: Ledger) -> AnyCommand:
        lesson_id = ledger.find_lesson(args.lesson)
        return command_from({"key": args.key or f"retire:{lesson_id}:{time.time_ns()}",
                             "lesson_id": lesson_id, "reason": args.reason, "actor": "user",
                             "expected_version": args.expected_version}, RetireLesson)

    return _run(args, retire)


def _cmd_reconcile(args: argparse.Namespace) -> int:
    now = args.now or datetime.now(UTC)
    # The key names the instant, not its spelling: the same moment written in another
    # zone is a retry of the pass, not a second decay. In UTC, as a UTC spelling always
    # was, so the keys existing homes hold stay the same.
    key = f"reconcile:{now.astimezone(UTC).isoformat()}"
    return _run(args, command_from({"key": args.key or key,
                                    "now": now, "actor": "operator"}, Reconcile))


#: The most a ``publish`` reads, standard input or a file (64 MiB): every command is
#: decoded before any runs, so an input without end would otherwise fill the memory.
MAX_PUBLISH_BYTES = 64 << 20


def _commands(stream: IO[bytes] | IO[str], source: str) -> list[tuple[int, AnyCommand]]:
    """Every command of a JSON-lines stream with its line number, all decoded first.

    A UTF-8 byte order mark before the first line is skipped (editors on Windows write
    one). A stream with no command at all is refused: a publisher that sends nothing has
    almost always lost its input on the way, and one over :data:`MAX_PUBLISH_BYTES` is
    refused before more of it is read. Bytes are read where the stream has them (a text
    stream, as a caller in-process may set ``sys.stdin`` to, is measured encoded).
    """
    commands = []
    left = MAX_PUBLISH_BYTES
    number = 0
    while raw := stream.readline(left + 1):
        number += 1
        left -= len(raw) if isinstance(raw, bytes) else len(raw.encode(errors="replace"))
        if left < 0:
            msg = (f"the input {source} is over {MAX_PUBLISH_BYTES >> 20} MiB, the most "
                   "publish reads at once; nothing was published: split it into smaller "
                   "files (or use `lessonledger import` for a whole ledger)")
            raise InvalidCommandError(msg, f"line {number}")
        try:
            line = raw.decode() if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as e:
            msg = f"line {number}: not UTF-8 ({e.reason}); nothing was published"
            raise InvalidCommandError(msg, f"line {number}") from e
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        try:
            commands.append((number, decode_command(line)))
        except (msgspec.DecodeError, InvalidCommandError) as e:
            msg = f"line {number}: {e}; nothing was published"
            raise InvalidCommandError(msg, f"line {number}") from e
    if not commands:
        msg = (f"no commands {source}; send one JSON command per line "
               "(see `lessonledger publish --help`)")
        raise InvalidCommandError(msg, "$")
    return commands


def _cmd_publish(args: argparse.Namespace) -> int:
    if args.file == "-":
        commands = _commands(getattr(sys.stdin, "buffer", sys.stdin), "on standard input")
    else:
        try:
            with open(args.file, "rb") as f:
                commands = _commands(f, f"in {args.file}")
        except OSError as e:
            msg = f"cannot read {args.file}: {e.strerror}"
            raise LedgerConfigError(msg) from e
    if not args.to and is_replica(args.home):
        try:
            waiting = queue_commands(args.home, [msgspec.json.encode(c) for _, c in commands],
                                     sync=sync_setting())
        except BatchRefusedError as e:
            msg = f"line {commands[e.index][0]}: {e.cause}; nothing was queued"
            raise InvalidCommandError(msg, f"line {commands[e.index][0]}") from e
        echo(f"queued {len(commands)} commands in the outbox ({waiting} waiting); "
             "`lessonledger push` sends them to the hub")
        return 0
    if args.to:
        with remote(args) as hub:
            _publish_in_batches(hub, commands)
        return 0
    with open_lessons(args.home) as ledger:
        try:
            receipts = ledger.execute_all([command for _, command in commands])
        except BatchRefusedError as e:
            msg = f"line {commands[e.index][0]}: {e.cause}; nothing was published"
            raise InvalidCommandError(msg, f"line {commands[e.index][0]}") from e
    for (_, command), receipt in zip(commands, receipts, strict=True):
        _print_receipt(command, receipt)
    return 0


def _print_receipt(command: AnyCommand, receipt: Receipt) -> None:
    print_json({"key": command.key, **msgspec.to_builtins(receipt)})


def _publish_in_batches(hub: RemoteLedger, commands: list[tuple[int, AnyCommand]]) -> None:
    """Run the commands on a hub in batches of at most ``MAX_BATCH_COMMANDS``, in order.

    Each batch is all-or-nothing, and its receipts are printed once it is committed. A
    refused batch stops the run: what the batches before it wrote stays, and the error
    says which lines those were. Publishing the file again is safe: every command
    carries its key, so those already written are answered with their first receipts.
    """
    size = MAX_BATCH_COMMANDS
    batches = [commands[i:i + size] for i in range(0, len(commands), size)]
    done = 0
    with bar("publish", len(commands)) as shown:
        for batch in batches:
            try:
                receipts = hub.execute_all([command for _, command in batch])
            except BatchRefusedError as e:
                line = batch[e.index][0]
                msg = _stopped(commands, done, batch, f"line {line}: {e.cause}", sure=True)
                raise InvalidCommandError(msg, f"line {line}") from e
            except CommandError as e:
                msg = _stopped(commands, done, batch, str(e), sure=True)
                raise InvalidCommandError(msg, f"line {batch[0][0]}") from e
            except LessonLedgerError as e:
                # A hub gone silent may have committed the batch before its reply was lost.
                raise LessonLedgerError(_stopped(commands, done, batch, str(e), sure=False)
                                        ) from e
            for (_, command), receipt in zip(batch, receipts, strict=True):
                _print_receipt(command, receipt)
            done += len(batch)
            shown.update(done)
    if len(batches) > 1:
        print(f"published {len(commands)} commands in {len(batches)} batches of at most "
              f"{size}, each all-or-nothing", file=sys.stderr)


def _stopped(commands: list[tuple[int, AnyCommand]], done: int,
             batch: list[tuple[int, AnyCommand]], why: str, *, sure: bool) -> str:
    """Why a publish stopped at ``batch``, what of the file is written, what to do."""
    if len(batch) == len(commands):
        return f"{why}; nothing was published" if sure else (
            f"{why}; the commands may or may not have been written: publish the file "
            "again, and those written are answered with their first receipts (their keys)")
    first, last = batch[0][0], batch[-1][0]
    kept = (f"lines {commands[0][0]}-{commands[done - 1][0]} were published (their "
            "receipts are above)" if done else "no line before it was published")
    lost = ("nothing of it was written" if sure
            else "it may or may not have been written")
    return (f"{why}; the batch of lines {first}-{last} stopped the publish: {lost}, and "
            f"{kept}. Publish the file again (after fixing it): commands already written "
            "are answered with their first receipts (by their keys), not written twice")


def _cmd_rebuild(args: argparse.Namespace) -> int:
    require_home(args.home)
    names = view_names() if args.view == "all" else [args.view]
    home = acquire(str(args.home), sync=sync_setting())
    try:
        log = EventLog(home, LOG_NAME)
        head = log.head()
        runner = Runner(registry(), ViewStore(home))
        with bar(f"rebuild {args.view}", head, quiet=args.json) as shown:
            runner.fold(log)  # the others stay as they are, folded to where the rebuilt stand
            runner.rebuild(log, names, progress=shown.update)
            shown.update(head)
        lessons = len(lesson_view(runner).lessons)
    finally:
        release(home)
    if args.json:
        print_json({"views": names, "position": runner.position, "lessons": lessons})
    else:
        echo(f"rebuilt {', '.join(names)} from position 0 to {runner.position:,}: "
             f"{lessons:,} lessons")
    return 0


def _when(text: str) -> datetime:
    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add the lesson commands to the CLI's sub-parsers."""
    lessons = sub.add_parser("lessons", help="list, show, trace, edit and retire lessons")
    which = lessons.add_subparsers(dest="lessons", required=True, metavar="ACTION",
                                   parser_class=parser_class)
    ls = which.add_parser("list", help="active lessons (and claims), strongest first")
    ls.add_argument("--project", help="only this project digest (and global lessons)")
    ls.add_argument("--all", action="store_true", help="include superseded and retired")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    add_read_only(ls)
    add_remote(ls)
    ls.set_defaults(run=_cmd_list)
    for name, run, about in (
        ("show", _cmd_show, "one lesson: its confidence and the events that moved it"),
        ("history", _cmd_history, "the supersede chain through a lesson, and why"),
    ):
        p = which.add_parser(name, help=about)
        p.add_argument("lesson", help="lesson id, or a unique prefix of it")
        p.add_argument("--json", action="store_true", help="print as JSON")
        add_read_only(p)
        add_remote(p)
        p.set_defaults(run=run)
    p = which.choices["show"]
    p.add_argument("--chart", type=charts.chart_file, metavar="FILE.png|svg", help=(
        "also draw its confidence over time, each confirming and contradicting outcome "
        "marked (needs the charts extra: pip install 'lessonledger[charts]')"))
    edit = which.add_parser("edit", help="replace a lesson's text (the old one stays in history)")
    edit.add_argument("lesson", help="lesson id, or a unique prefix of it")
    edit.add_argument("--text", required=True, help="the new text")
    retire = which.add_parser("retire", help="retire a lesson; it is never re-learned")
    retire.add_argument("lesson", help="lesson id, or a unique prefix of it")
    retire.add_argument("--reason", default="", help="why, for the record")
    for p, run in ((edit, _cmd_edit), (retire, _cmd_retire)):
        p.add_argument("--expected-version", type=int, default=None, metavar="N",
                       help="refuse if the lesson changed since you saw version N")
        p.add_argument("--key", help="idempotency key (default: a fresh one)")
        p.add_argument("--json", action="store_true", help="print the receipt as JSON")
        p.set_defaults(run=run)
    publish = sub.add_parser(
        "publish", help="run commands given as JSON lines (see README)",
        description=(
            "Run the commands of a JSON-lines file, in order. On the home they run in one "
            "transaction: every one, or none. With --to a hub takes at most "
            f"{MAX_BATCH_COMMANDS} commands per batch (a batch holds its single writer), "
            f"so the file goes in batches of at most {MAX_BATCH_COMMANDS}, each "
            "all-or-nothing, their receipts printed as each commits; a refusal stops it "
            "and says which lines were written. Running the same file again is safe: "
            "every command carries its key, and one already written is answered with its "
            "first receipt."))
    publish.add_argument("file", nargs="?", default="-", help="a file, or - for stdin")
    add_remote(publish)
    publish.set_defaults(run=_cmd_publish)
    rebuild = sub.add_parser("rebuild", help="drop a view and rebuild it from position 0")
    rebuild.add_argument("view", nargs="?", default="all", choices=[*view_names(), "all"],
                         help=f"which view: {', '.join(view_names())}, or all (default)")
    rebuild.add_argument("--json", action="store_true", help="print the result as JSON")
    rebuild.set_defaults(run=_cmd_rebuild)
    reconcile = sub.add_parser("reconcile", help="run decay, expiry and caps as of a time")
    reconcile.add_argument("--now", type=_when, default=None,
                           help="as of this ISO time (default: the current time)")
    reconcile.add_argument("--key", help="idempotency key (default: derived from --now)")
    reconcile.add_argument("--json", action="store_true", help="print the receipt as JSON")
    reconcile.set_defaults(run=_cmd_reconcile)
