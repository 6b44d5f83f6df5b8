"""The ``lessonledger`` command line.

Every query takes ``--json``. Bad input prints one line saying what is wrong and what to
do, and exits with code 2; a ledger that fails verification exits with code 1.
"""

from __future__ import annotations

import argparse
import collections
import importlib.metadata
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import lmdb
import msgspec
from lessonledger.ledger.errors import LedgerStorageError, LessonLedgerError
from lessonledger.ledger.log import EventLog
from lessonledger.ledger.verify import verify
from lessonledger.ops import erasure_commands, lesson_commands, recall_commands, skill_commands
from lessonledger.ops.config import HOME_ENV, LOG_NAME, default_home, open_log, open_logs
from lessonledger.ops.render import (
    add_read_only,
    echo,
    print_json,
    printable,
    progress,
    record_json,
    record_line,
)

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}; see `{self.prog} --help`\n")


#: The largest count or position a command takes (a log position is 64-bit).
_MOST = (1 << 63) - 1


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= _MOST:
            msg = f"expected a whole number from {minimum} to {_MOST}, got {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse


def _cmd_init(args: argparse.Namespace) -> int:
    with open_log(args.home, create=True) as log:
        echo(f"ledger home ready at {args.home} (last position {log.head()})")
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    with open_log(args.home, read_only=args.read_only, name=args.log) as log:
        for record in log.read(args.start, limit=args.limit):
            if args.json:
                print_json(record_json(record))
            else:
                print(record_line(record))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    with open_logs(args.home, read_only=args.read_only, name=args.log) as logs:
        reports = [(log.name, verify(log, progress=progress(f"verify {log.name}")))
                   for log in logs]
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
        verdict = "ok" if report.ok else f"DAMAGED at position {report.problems[0].position}"
        echo(f"{where}verified {report.checked:,} of {report.head:,} events{erased}: {verdict}")
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from lessonledger.ops.demo import run_demo

    return run_demo(args.home)


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _report(args: argparse.Namespace, result: dict[str, Any]) -> int:
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            print(f"{key:<32}{value}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from lessonledger.ops import bench_append

    return _report(args, bench_append.run(events=args.events, replay_events=args.replay_events,
                                          progress=_say))


def _cmd_bench_lifecycle(args: argparse.Namespace) -> int:
    from lessonledger.ops import bench_lifecycle

    return _report(args, bench_lifecycle.run(commands=args.commands,
                                             log_events=args.log_events, progress=_say))


def _cmd_bench_recall(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from lessonledger.ops import bench_recall
    from lessonledger.ops.bench_recall_home import ledger_recall

    with ExitStack() as stack:
        result = bench_recall.run(
            sizes=tuple(args.sizes), projects=args.projects, queries=args.queries,
            progress=_say, plan_recall=ledger_recall(stack))
    if args.json:
        print_json(result)
    else:
        for size, figures in result["sizes"].items():
            print(size, " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


def _cmd_bench_deltas(args: argparse.Namespace) -> int:
    from lessonledger.ops import bench_deltas

    return _report(args, bench_deltas.run(sessions=args.sessions,
                                          latency_sessions=args.latency_sessions,
                                          progress=_say))


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        msg = f"expected a fraction between 0 and 1, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _cmd_bench_trapworld(args: argparse.Namespace) -> int:
    from lessonledger.ops import bench_trapworld
    from lessonledger.ops.trapworld import WorldConfig

    config = WorldConfig(seed=args.seed, projects=args.projects, targets=args.targets,
                         sessions=args.sessions, steps=args.steps, trap_rate=args.trap_rate,
                         shared_rate=args.shared_rate, flip_rate=args.flip_rate,
                         noise=args.noise)
    if args.world == "all":
        results, summary = bench_trapworld.run_all(config, repeats=args.repeats,
                                                   progress=_say)
    else:
        results = [bench_trapworld.run(config, repeats=args.repeats, progress=_say,
                                       world=args.world)]
        summary = None
    if args.json:
        for result in results:
            print_json(result)
        if summary is not None:
            print_json(summary)
        return 0
    for result in results:
        _print_trapworld(result, bench_trapworld.METRICS)
    if summary is not None:
        print(f"\nevery family met every target: {'yes' if summary['met'] else 'NO'}")
    return 0


def _print_trapworld(result: dict[str, Any], metrics: Sequence[str]) -> None:
    print(f"\nworld: {result['world']}")
    arms = result["arms"]
    print(f"{'':<32}" + "".join(f"{arm:>14}" for arm in arms))
    for metric in metrics:
        cells = []
        for figures in arms.values():
            value, spread = figures[metric], figures["spread"].get(metric)
            cells.append("—" if value is None else
                         f"{value:.3f}±{spread['sd']:.3f}" if spread else f"{value:.3f}")
        print(f"{metric:<32}" + "".join(f"{c:>14}" for c in cells))
    print(f"\n{result['config']['repeats']} repeats, {result['seconds']} s; targets:")
    for name, met in result["met"].items():
        print(f"  {'met ' if met else 'MISSED'} {name} {result['targets'].get(name, '')}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lessonledger", description=(
        "An event-sourced memory ledger: agents record outcomes and lessons; "
        "every write is an immutable, hash-chained event."))
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {importlib.metadata.version('lessonledger')}")
    _home_option(parser, None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    sub.add_parser("init", help="create a ledger home").set_defaults(run=_cmd_init)
    log = sub.add_parser("log", help="list events as an auditor sees them: envelope and body")
    log.add_argument("--from", dest="start", type=_count(1), default=1, metavar="N",
                     help="first position to show (default 1)")
    log.add_argument("--limit", type=_count(1), default=None, metavar="N",
                     help="show at most N events")
    log.add_argument("--json", action="store_true", help="one JSON object per line")
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
    sub.add_parser("demo", help=(
        "a scripted agent learns, stops repeating a mistake, unlearns (memory on vs off); "
        "in a home of its own (~/.lessonledger-demo) unless one is named"
    )).set_defaults(run=_cmd_demo, demo=True)
    lesson_commands.register(sub, _Parser)
    recall_commands.register(sub, _Parser)
    erasure_commands.register(sub, _Parser)
    skill_commands.register(sub, _Parser)
    bench = sub.add_parser("bench", help="measure against baselines in the same run")
    which = bench.add_subparsers(dest="bench", required=True, metavar="BENCH",
                                 parser_class=_Parser)
    append = which.add_parser("append", help=(
        "durable appends and replay vs raw LMDB, eventsourcing SQLite and POPO"))
    append.add_argument("--events", type=_count(100), default=20_000,
                        help="events per append run (default 20,000)")
    append.add_argument("--replay-events", type=_count(100), default=100_000,
                        help="events to replay (default 100,000)")
    append.add_argument("--json", action="store_true", help="print one JSON object")
    append.set_defaults(run=_cmd_bench)
    recall = which.add_parser("recall", help=(
        "plan-time recall latency, and the vector index vs exact numpy search"))
    recall.add_argument("--sizes", type=_count(100), nargs="+", default=[10_000, 100_000],
                        metavar="N", help="lesson counts (default 10000 100000)")
    recall.add_argument("--projects", type=_count(1), default=500, help="projects (500)")
    recall.add_argument("--queries", type=_count(10), default=2000,
                        help="queries per size (default 2,000: enough for a p99)")
    recall.add_argument("--json", action="store_true", help="print one JSON object")
    recall.set_defaults(run=_cmd_bench_recall)
    lifecycle = which.add_parser("lifecycle", help=(
        "agent commands through the Python API on a durable home, and the lesson view "
        "rebuilt from a long log vs replaying it"))
    lifecycle.add_argument("--commands", type=_count(100), default=5_000,
                           help="queries, outcomes, proposals and reconciles per run "
                                "(default 5,000)")
    lifecycle.add_argument("--log-events", type=_count(1_000), default=100_000,
                           help="events in the log the view is rebuilt from "
                                "(default 100,000)")
    lifecycle.add_argument("--json", action="store_true", help="print one JSON object")
    lifecycle.set_defaults(run=_cmd_bench_lifecycle)
    deltas = which.add_parser("deltas", help=(
        "200 skill deltas on 10 skills: the budget, resolve latency cold and cached, and "
        "the delta view's fold vs raw replay"))
    deltas.add_argument("--sessions", type=_count(1), default=2_000,
                        help="agent sessions of traffic in the log (default 2,000)")
    deltas.add_argument("--latency-sessions", type=_count(1), default=100,
                        help="sessions whose resolutions are timed (default 100)")
    deltas.add_argument("--json", action="store_true", help="print one JSON object")
    deltas.set_defaults(run=_cmd_bench_deltas)
    _trapworld_parser(which)
    _describe(parser)
    return parser


def _home_option(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--home", type=Path, default=default, metavar="DIR", help=(
        f"ledger home directory (default: ${HOME_ENV}, else ~/.lessonledger); "
        "before or after the command"))


def _describe(parser: argparse.ArgumentParser) -> None:
    """Give every sub-command's ``--help`` page a description, and ``--home`` too.

    argparse shows a sub-command's ``help`` only in its parent's list; the page itself
    would start with the options alone. ``--home`` is taken after the command as well as
    before it; with ``SUPPRESS`` as its default there, one given before is kept.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                child = action.choices[listed.dest]
                if child.description is None and listed.help:
                    child.description = listed.help[0].upper() + listed.help[1:] + "."
            for child in action.choices.values():
                _home_option(child, argparse.SUPPRESS)
                _describe(child)


def _trapworld_parser(which: Any) -> None:
    from lessonledger.ops.trapworld import FAMILIES, WorldConfig

    d = WorldConfig()
    world = which.add_parser("trapworld", help=(
        "agents with the ledger, with no memory and with a last-error store, in a seeded "
        "world of traps, blips and flips"), description=(
        "Runs a simple agent through a deterministic world of projects whose obvious "
        "operations sometimes fail (traps), sometimes fail by bad luck (blips), and "
        "sometimes turn over part-way (flips), with three kinds of memory. The README "
        "explains the world and every figure."))
    world.add_argument("--projects", type=_count(1), default=d.projects,
                       help=f"projects (default {d.projects})")
    world.add_argument("--sessions", type=_count(2), default=d.sessions,
                       help=f"sessions per project, one a day (default {d.sessions})")
    world.add_argument("--targets", type=_count(1), default=d.targets,
                       help=f"target kinds per project, of 10 (default {d.targets})")
    world.add_argument("--steps", type=_count(1), default=d.steps,
                       help=f"targets per task (default {d.steps})")
    world.add_argument("--trap-rate", type=_fraction, default=d.trap_rate,
                       help=f"share of a local kind's targets that are traps ({d.trap_rate})")
    world.add_argument("--shared-rate", type=_fraction, default=d.shared_rate,
                       help=f"share of kinds whose trap is the same everywhere "
                            f"({d.shared_rate})")
    world.add_argument("--flip-rate", type=_fraction, default=d.flip_rate,
                       help=f"share of traps that flip half-way ({d.flip_rate})")
    world.add_argument("--noise", type=_fraction, default=d.noise,
                       help=f"chance a working attempt fails transiently ({d.noise})")
    world.add_argument("--seed", type=_count(0), default=d.seed,
                       help="the first repeat's seed; repeat r uses seed + r (default 0)")
    world.add_argument("--repeats", type=_count(1), default=5,
                       help="worlds to run, each with every arm (default 5)")
    world.add_argument("--world", choices=[*FAMILIES, "all"], default="default",
                       help="the world family (README), or all of them in turn "
                            "(default: default)")
    world.add_argument("--json", action="store_true",
                       help="print one JSON object (with --world all: one line per family, "
                            "then a summary)")
    world.set_defaults(run=_cmd_bench_trapworld)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.home = args.home or default_home(demo=getattr(args, "demo", False))
    try:
        return int(args.run(args))
    except LedgerStorageError as e:
        print(f"lessonledger: {printable(str(e))}", file=sys.stderr)
        return 1
    except LessonLedgerError as e:
        print(f"lessonledger: {printable(str(e))}", file=sys.stderr)
        return 2
    except msgspec.ValidationError as e:
        print(f"lessonledger: invalid input: {printable(str(e))}; fix it and retry",
              file=sys.stderr)
        return 2
    except (UnicodeDecodeError, UnicodeEncodeError) as e:
        print(f"lessonledger: input is not UTF-8 text ({e.reason}); convert it and retry",
              file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        print(f"lessonledger: {e.strerror or e}{where}; nothing after that was done",
              file=sys.stderr)
        return 1
    except lmdb.Error as e:
        print(f"lessonledger: the store failed: {e}; nothing of the failed step was "
              "committed", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lessonledger: interrupted; what was committed before stays committed",
              file=sys.stderr)
        return 130
