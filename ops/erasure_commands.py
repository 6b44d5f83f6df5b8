"""``lessonledger erase`` and ``compact``: deleting content for good.

Erasing deletes bodies from the log (and rebuilds the views without them), but LMDB keeps
deleted bytes in free pages until the file is rewritten, and rewriting it needs the home
closed in every process. So ``erase`` compacts right after, and says so when it could not
(another process has the home open): the erasure is complete only once ``compact`` ran.
Each command here is a ``_cmd_*`` function and a few lines in :func:`register`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
from lessonledger.commands.erasure import Erasure, NothingToEraseError
from lessonledger.commands.errors import LessonNotFoundError
from lessonledger.ledger.compaction import Compacted, check_unused, compact, due
from lessonledger.ledger.errors import HomeBusyError, LedgerConfigError
from lessonledger.ops.config import LOG_NAME, require_home, tree_names
from lessonledger.ops.lesson_commands import open_lessons
from lessonledger.ops.progress import bar
from lessonledger.ops.render import echo, nonblank, print_json
from lessonledger.sync.replica import refold
from lessonledger.sync.snapshots import is_replica

__all__ = ["EXIT_COMPACTION_PENDING", "register"]

#: Exit code of an erasure whose bytes wait for a compaction (the home is open elsewhere).
EXIT_COMPACTION_PENDING = 3
_KINDS = ("principal", "session", "lesson", "outcome")


def _size(count: int) -> str:
    """A byte count as a person reads it: ``512 bytes``, ``12.3 MB``."""
    if count < 1000:
        return f"{count} bytes"
    value = float(count)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def _require_lesson_log(home: Path, what: str) -> None:
    """Refuse, writing nothing, a home with no lesson log (an application's only)."""
    require_home(home)
    if f"{LOG_NAME}.log".encode() not in tree_names(home):
        msg = f"{home} holds no lesson log: {what}"
        raise LedgerConfigError(msg)


def _cmd_erase(args: argparse.Namespace) -> int:
    what, subject = next((kind, getattr(args, kind)) for kind in _KINDS
                         if getattr(args, kind) is not None)
    _require_lesson_log(args.home, "nothing to erase")
    done_before: NothingToEraseError | None = None
    with open_lessons(args.home) as ledger:
        if what == "lesson":
            try:
                subject = str(ledger.find_lesson(subject))
            except LessonNotFoundError as e:
                # An erased lesson has left the view, but a killed run's rerun must reach
                # its key or "compact what it left" below: erase() decides from the log.
                if e.erased is None:
                    raise
                subject = str(e.erased)
        try:
            erasure = ledger.erase(key=args.key or f"erase:{uuid4()}", what=what,
                                   subject=subject, reason=args.reason, actor=args.by)
        except NothingToEraseError as e:
            if not e.erased or args.no_compact:
                raise
            done_before, erasure = e, Erasure(0, [])
    already = 0
    if done_before is not None:
        # Erased by an earlier run: if it stopped before its compaction (killed), the
        # bytes still sit in free pages, and this run finishes that job.
        if not due(str(args.home)):
            raise done_before
        already = done_before.erased
    compacted: Compacted | None = None
    pending = ""
    if not args.no_compact:
        try:
            with bar(f"compact {args.home}", quiet=args.json):
                compacted = compact(str(args.home))
        except HomeBusyError as e:
            pending = str(e)
    if args.json:
        print_json({"what": what, "subject": subject, "position": erasure.position or None,
                    "erased": erasure.erased, "erased_already": already,
                    "compacted": msgspec.to_builtins(compacted), "pending": pending or None})
    elif already:
        echo(f"the {already:,} events of {what} {subject} were erased already; "
             "compacting so their bytes leave the file")
    else:
        echo(f"erased {len(erasure.erased):,} bodies of {what} {subject}, recorded at "
             f"position {erasure.position:,}; the views were rebuilt without them")
        if compacted is not None:
            print(f"compacted: {_size(compacted.bytes_before)} -> "
                  f"{_size(compacted.bytes_after)} in {compacted.seconds:.2f} s; "
                  "no erased byte is left in the home's files")
        elif args.no_compact:
            print("not compacted: the erased bytes stay in free pages until "
                  "`lessonledger compact` runs")
    if pending:
        print(f"lessonledger: erased, but the bytes stay until compaction: {pending}",
              file=sys.stderr)
        return EXIT_COMPACTION_PENDING
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    # require_home first: a directory without the marker gets the same one-line advice
    # as every other command, before compaction looks at any LMDB file.
    require_home(args.home)
    # A ledger opened and closed first folds any erasure its saved view and index files
    # predate (a process killed between an erasure and its rebuild leaves such files),
    # so the compacted file keeps nothing derived from what was erased. Not when the
    # compaction cannot run: then the home is left as it was.
    check_unused(str(args.home))
    with bar(f"compact {args.home}", quiet=args.json):
        if is_replica(args.home):
            refold(args.home)  # a replica folds without the write side (its policies never run)
        elif f"{LOG_NAME}.log".encode() in tree_names(args.home):
            with open_lessons(args.home):  # an application's home has no lesson view
                pass
        result = compact(str(args.home))
    if args.json:
        print_json({"path": str(args.home), **msgspec.to_builtins(result)})
    else:
        echo(f"compacted {args.home}: {_size(result.bytes_before)} -> "
              f"{_size(result.bytes_after)} in {result.seconds:.2f} s")
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add the erasure commands to the CLI's sub-parsers."""
    erase = sub.add_parser("erase", help=(
        "delete a principal's, a session's, a lesson's or an outcome's content for good"),
        description=(
        "Deletes the bodies of the events it names, in the transaction that records an "
        "Erased event listing them; envelopes and the hash chain stay, so `verify` still "
        "passes and reports them as erased. The lesson view and the vector index are "
        "rebuilt without them, here and in every process that reads the erasure. Then "
        "the home is compacted so the bytes leave its files; if another process has the "
        "home open, that waits: exit code 3, and run `lessonledger compact` once it "
        "stops."))
    kind = erase.add_mutually_exclusive_group(required=True)
    kind.add_argument("--principal", type=nonblank, help=(
        "every event whose envelope names this principal (as principal or actor), and "
        "every body naming it as a person"))
    kind.add_argument("--session", type=nonblank, help="every event of this agent session")
    kind.add_argument("--lesson", type=nonblank, help="a lesson (id or unique prefix) and "
                      "every event about it")
    kind.add_argument("--outcome", type=nonblank, help="an outcome id, and what the "
                      "policies learned from it")
    erase.add_argument("--reason", required=True, type=nonblank,
                       help="why, for the record (no content)")
    erase.add_argument("--by", default="operator", type=nonblank,
                       help="who erases (default: operator)")
    erase.add_argument("--key", help="idempotency key, to retry safely (default: a fresh one)")
    erase.add_argument("--no-compact", action="store_true",
                       help="leave the compaction for later (`lessonledger compact`)")
    erase.add_argument("--json", action="store_true", help="print the result as JSON")
    erase.set_defaults(run=_cmd_erase)
    compacting = sub.add_parser("compact", help=(
        "rewrite the home's file without free pages, so erased bytes are gone; "
        "needs every process using the home stopped"))
    compacting.add_argument("--json", action="store_true", help="print the result as JSON")
    compacting.set_defaults(run=_cmd_compact)
