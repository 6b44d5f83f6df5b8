"""``lessonledger init``, ``log``, ``verify`` and ``stats``: a home and its log as stored.

What an operator and an auditor read: the events with their envelopes, the chain and
body commitments recomputed, and counts. ``log``, ``verify`` and ``stats`` take
``--read-only`` for a backup or snapshot, and ``--log`` for a home holding several logs.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path
from typing import Any

import msgspec
from lessonledger.ledger.log import EventLog
from lessonledger.ledger.verify import verify
from lessonledger.ops.config import LOG_NAME, open_log, open_logs
from lessonledger.ops.hub_commands import add_remote, remote
from lessonledger.ops.progress import bar
from lessonledger.ops.render import (
    add_read_only,
    count_option,
    echo,
    print_json,
    record_json,
    record_line,
)
from lessonledger.sync.queries import MAX_LOG_RECORDS
from lessonledger.sync.state import excused

__all__ = ["register"]


def _cmd_init(args: argparse.Namespace) -> int:
    with open_log(args.home, create=True) as log:
        echo(f"ledger home ready at {args.home} (last position {log.head()})")
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    if args.snapshots:
        from lessonledger.ops.sync_commands import show_snapshots

        return show_snapshots(args.home, as_json=bool(args.json),
                              read_only=bool(args.read_only))
    if args.to:
        with remote(args) as hub:
            # Page by page: the hub answers what fits one reply frame.
            start, left = args.start, args.limit
            while left is None or left > 0:
                records = hub.read_log(start, min(left or MAX_LOG_RECORDS, MAX_LOG_RECORDS))
                if not records:
                    break
                for record in records:
                    if args.json:
                        print_json(record_json(record))
                    else:
                        print(record_line(record))
                start = records[-1].envelope.position + 1
                left = None if left is None else left - len(records)
        return 0
    with open_log(args.home, read_only=args.read_only, name=args.log) as log:
        for record in log.read(args.start, limit=args.limit):
            if args.json:
                print_json(record_json(record))
            else:
                print(record_line(record))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    with open_logs(args.home, read_only=args.read_only, name=args.log) as logs:
        # A partial replica's withheld bodies and a checkout's later-erased ones are
        # recorded by sync beside the log: neither is damage.
        reports = []
        for log in logs:
            withheld, later = excused(log.home) if log.name == LOG_NAME else ((), ())
            with bar(f"verify {log.name}", log.head(), quiet=args.json) as shown:
                reports.append((log.name, verify(log, progress=shown.update,
                                                 withheld=withheld, erased_later=later)))
    # The lesson log alone is the usual home: its lines need no name.
    named = [name for name, _ in reports] != [LOG_NAME]
    for name, report in reports:
        if args.json:
            print_json({"log": name, "ok": report.ok, **msgspec.to_builtins(report)})
            continue
        where = f"log {name}: " if named else ""
        for problem in report.problems:
            echo(f"{where}position {problem.position}: {problem.kind}: {problem.detail}")
        erased = f", {len(report.erased)} bodies erased" if report.erased else ""
        if report.withheld:
            erased += f", {len(report.withheld)} withheld (not readable by this replica)"
        verdict = "ok" if report.ok else f"DAMAGED at position {report.problems[0].position}"
        echo(f"{where}verified {report.checked:,} of {report.head:,} events{erased}: {verdict}")
        if report.chain:
            echo(f"{where}chain head {report.chain}")
    return 0 if all(report.ok for _, report in reports) else 1


def _stats(log: EventLog, home: Path) -> dict[str, object]:
    types: collections.Counter[str] = collections.Counter()
    erased = 0
    for record in log.scan():
        types[record.envelope.type] += 1
        erased += record.payload is None
    # Every file of the home: the LMDB files and the vector index under vectors/.
    size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    return {"home": str(home), "log": log.name, "head": log.head(),
            "events_by_type": dict(types),
            "erased_bodies": erased, "file_bytes": size, "fsync": log.home.sync}


def _cmd_stats(args: argparse.Namespace) -> int:
    with open_log(args.home, read_only=args.read_only, name=args.log) as log:
        stats = _stats(log, args.home)
    if args.json:
        print_json(stats)
    else:
        echo(f"home      {stats['home']}  (fsync every commit: {stats['fsync']})")
        if stats["log"] != LOG_NAME:
            echo(f"log       {stats['log']}")
        print(f"events    {stats['head']:,}   erased bodies {stats['erased_bodies']:,}")
        print(f"on disk   {stats['file_bytes']:,} bytes")
        for kind, count in sorted(stats["events_by_type"].items()):  # type: ignore[attr-defined]
            echo(f"  {kind:<22}{count:>10,}")
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add init, log, verify and stats to the CLI's sub-parsers."""
    sub.add_parser("init", help="create a ledger home").set_defaults(run=_cmd_init)
    log = sub.add_parser("log", help="list events as an auditor sees them: envelope and body")
    log.add_argument("--from", dest="start", type=count_option(1), default=1, metavar="N",
                     help="first position to show (default 1)")
    log.add_argument("--limit", type=count_option(1), default=None, metavar="N",
                     help="show at most N events")
    log.add_argument("--json", action="store_true", help="one JSON object per line")
    log.add_argument("--snapshots", action="store_true",
                     help="list the snapshots instead of the events")
    add_remote(log)
    log.set_defaults(run=_cmd_log)
    check = sub.add_parser("verify", help="recompute the hash chain and body commitments")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(run=_cmd_verify)
    stats = sub.add_parser("stats", help="counts by event type, erased bodies, size on disk")
    stats.add_argument("--json", action="store_true", help="print as JSON")
    stats.set_defaults(run=_cmd_stats)
    for auditing in (log, check, stats):
        add_read_only(auditing)
        auditing.add_argument("--log", metavar="NAME", default=None, help=(
            "the log to read, when the home holds several (an eventsourcing application "
            "writes one named after itself); verify checks every log unless told one"))
