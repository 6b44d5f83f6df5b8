"""``lessonledger demo`` and ``lessonledger bench …``: what measures the ledger.

Every bench prints its figures beside a baseline measured in the same run on the same
data (raw LMDB, eventsourcing's SQLite module, exact numpy search, a plain copy); the
modules beside this one hold them. Imported lazily, so the CLI starts without numpy's
benchmark paths loaded.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from lessonledger.ops.charts import chart_file
from lessonledger.ops.progress import bar
from lessonledger.ops.render import count_option, print_json

__all__ = ["register"]


def _cmd_demo(args: argparse.Namespace) -> int:
    from lessonledger.ops.bench.demo import run_demo

    return run_demo(args.home)


@contextmanager
def _steps(args: argparse.Namespace, total: int | None = None) -> Iterator[Callable[[str], None]]:
    """What a bench reports as it goes: each finished step a line on stderr, as always.

    Below them, on a terminal, a bar counts the steps (a spinner when uncounted).
    """
    with bar(f"bench {args.bench}", total, quiet=args.json) as shown:
        def say(line: str) -> None:
            shown.say(line)
            shown.advance()

        yield say


def _report(args: argparse.Namespace, result: dict[str, Any]) -> int:
    if args.json:
        print_json(result)
    else:
        for key, value in result.items():
            print(f"{key:<32}{value}")
    return 0


class _Option(NamedTuple):
    """A count option of a bench: ``--log-events`` is ``run(log_events=...)``."""

    flag: str
    minimum: int
    default: int
    help: str

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


class _Bench(NamedTuple):
    """A bench whose module's ``run(**options, progress=say)`` returns a flat result."""

    help: str
    options: tuple[_Option, ...]


def _cmd_table_bench(args: argparse.Namespace) -> int:
    """Run ``lessonledger.ops.bench.<bench>.run`` with the bench's options."""
    module = importlib.import_module(f"lessonledger.ops.bench.{args.bench}")
    options: dict[str, Any] = {o.dest: getattr(args, o.dest)
                               for o in _TABLE[args.bench].options}
    if getattr(args, "keep_home", None) is not None:
        options["home"] = args.keep_home
    with _steps(args) as say:
        result = module.run(**options, progress=say)
    return _report(args, result)


def _cmd_bench_recall(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from lessonledger.ops.bench import recall as bench_recall
    from lessonledger.ops.bench.recall_home import ledger_recall

    with ExitStack() as stack, _steps(args) as say:
        result = bench_recall.run(
            sizes=tuple(args.sizes), projects=args.projects, queries=args.queries,
            progress=say, plan_recall=ledger_recall(stack))
    if args.json:
        print_json(result)
    else:
        for size, figures in result["sizes"].items():
            print(size, " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


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
    from lessonledger.ops.bench import trapworld_bench as bench_trapworld
    from lessonledger.ops.bench.trapworld import WorldConfig

    if args.chart is not None:
        from lessonledger.ops.charts import require

        require()  # before the run: a missing extra is refused in one line, not after
    config = WorldConfig(seed=args.seed, projects=args.projects, targets=args.targets,
                         sessions=args.sessions, steps=args.steps, trap_rate=args.trap_rate,
                         shared_rate=args.shared_rate, flip_rate=args.flip_rate,
                         noise=args.noise)
    from lessonledger.ops.bench.trapworld import FAMILIES
    from lessonledger.ops.bench.trapworld_agents import ARMS

    worlds = len(FAMILIES) if args.world == "all" else 1
    with _steps(args, args.repeats * len(ARMS) * worlds) as say:
        if args.world == "all":
            results, summary = bench_trapworld.run_all(config, repeats=args.repeats,
                                                       progress=say)
        else:
            results = [bench_trapworld.run(config, repeats=args.repeats, progress=say,
                                           world=args.world)]
            summary = None
    if args.chart is not None:
        from lessonledger.ops.charts import arms_chart

        arms_chart(results, args.chart)
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


def _trapworld_parser(which: Any) -> None:
    from lessonledger.ops.bench.trapworld import FAMILIES, WorldConfig

    d = WorldConfig()
    world = which.add_parser("trapworld", help=(
        "agents with the ledger, with no memory and with a last-error store, in a seeded "
        "world of traps, blips and flips"), description=(
        "Runs a simple agent through a deterministic world of projects whose obvious "
        "operations sometimes fail (traps), sometimes fail by bad luck (blips), and "
        "sometimes turn over part-way (flips), with three kinds of memory. The README "
        "explains the world and every figure."))
    world.add_argument("--projects", type=count_option(1), default=d.projects,
                       help=f"projects (default {d.projects})")
    world.add_argument("--sessions", type=count_option(2), default=d.sessions,
                       help=f"sessions per project, one a day (default {d.sessions})")
    world.add_argument("--targets", type=count_option(1), default=d.targets,
                       help=f"target kinds per project, of 10 (default {d.targets})")
    world.add_argument("--steps", type=count_option(1), default=d.steps,
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
    world.add_argument("--seed", type=count_option(0), default=d.seed,
                       help="the first repeat's seed; repeat r uses seed + r (default 0)")
    world.add_argument("--repeats", type=count_option(1), default=5,
                       help="worlds to run, each with every arm (default 5)")
    world.add_argument("--world", choices=[*FAMILIES, "all"], default="default",
                       help="the world family (README), or all of them in turn "
                            "(default: default)")
    world.add_argument("--json", action="store_true",
                       help="print one JSON object (with --world all: one line per family, "
                            "then a summary)")
    world.add_argument("--chart", type=chart_file, metavar="FILE.png|svg", help=(
        "also draw the arms side by side, one panel per figure (needs the charts extra: "
        "pip install 'lessonledger[charts]')"))
    world.set_defaults(run=_cmd_bench_trapworld)


#: The benches with count options only, in the order ``bench --help`` lists them (recall
#: and trapworld print their own way: parsers of their own, see :func:`register`).
_TABLE: dict[str, _Bench] = {
    "append": _Bench("durable appends and replay vs raw LMDB, eventsourcing SQLite and POPO", (
        _Option("--events", 100, 20_000, "events per append run (default 20,000)"),
        _Option("--replay-events", 100, 100_000, "events to replay (default 100,000)"))),
    "lifecycle": _Bench(
        "agent commands through the Python API on a durable home, and the lesson view "
        "rebuilt from a long log vs replaying it", (
            _Option("--commands", 100, 5_000, "queries, outcomes, proposals and "
                    "reconciles per run (default 5,000)"),
            _Option("--log-events", 1_000, 100_000, "events in the log the view is "
                    "rebuilt from (default 100,000)"))),
    "scale": _Bench(
        "a home of agents' outcomes and lessons built to --events, then an agent on it: "
        "open and first recall, peak RSS, bytes written per event in steady state against "
        "the events' stored size, data.mdb over its live data", (
            _Option("--events", 1_000, 2_000_000, "events the home holds before the agent "
                    "opens it (default 2,000,000; 50,000 for a quick run)"),
            _Option("--steady", 10, 14_000, "durable calls the agent makes in steady state "
                    "(default 14,000: about 20,000 events)"))),
    "deltas": _Bench(
        "200 skill deltas on 10 skills: the budget, resolve latency cold and cached, and "
        "the delta view's fold vs raw replay", (
            _Option("--sessions", 1, 2_000, "agent sessions of traffic in the log "
                    "(default 2,000)"),
            _Option("--latency-sessions", 1, 100, "sessions whose resolutions are timed "
                    "(default 100)"))),
    "sync": _Bench(
        "clone over ZeroMQ vs a raw chunked transfer of the same bytes, bytes moved by a "
        "pull, and how long an erasure takes to reach two replicas", (
            _Option("--events", 1_000, 100_000, "events in the hub that is cloned "
                    "(default 100,000)"),
            _Option("--pull-events", 10, 1_000, "new events the measured pull moves "
                    "(default 1,000)"))),
    "hub": _Bench(
        "16 publisher processes through a hub vs one in-process ledger, and 16 event "
        "writers through the hub vs 16 into eventsourcing's SQLite", (
            _Option("--commands", 10, 250, "observe_outcome commands per publisher "
                    "(default 250)"),
            _Option("--events", 10, 500, "single events per writer process (default 500)"),
            _Option("--local1-commands", 10, 1000, "commands the durable one-at-a-time "
                    "baseline runs (default 1,000)"))),
}


def _table_parser(which: Any, name: str) -> None:
    bench = _TABLE[name]
    parser = which.add_parser(name, help=bench.help)
    for option in bench.options:
        parser.add_argument(option.flag, type=count_option(option.minimum),
                            default=option.default, help=option.help)
    if name == "scale":
        parser.add_argument("--keep-home", metavar="DIR", help=(
            "build the home in DIR and keep it (its build figures in DIR.build.json); "
            "with a DIR built so before, skip the build and measure on a copy of it"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=_cmd_table_bench)


def _recall_parser(which: Any) -> None:
    recall = which.add_parser("recall", help=(
        "plan-time recall latency, and the vector index vs exact numpy search"))
    recall.add_argument("--sizes", type=count_option(100), nargs="+", default=[10_000, 100_000],
                        metavar="N", help="lesson counts (default 10000 100000)")
    recall.add_argument("--projects", type=count_option(1), default=500, help="projects (500)")
    recall.add_argument("--queries", type=count_option(10), default=2000,
                        help="queries per size (default 2,000: enough for a p99)")
    recall.add_argument("--json", action="store_true", help="print one JSON object")
    recall.set_defaults(run=_cmd_bench_recall)


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add demo and the benches to the CLI's sub-parsers."""
    sub.add_parser("demo", help=(
        "a scripted agent learns, stops repeating a mistake, unlearns (memory on vs off); "
        "in a home of its own (~/.lessonledger-demo) unless one is named"
    )).set_defaults(run=_cmd_demo, demo=True)
    bench = sub.add_parser("bench", help="measure against baselines in the same run")
    which = bench.add_subparsers(dest="bench", required=True, metavar="BENCH",
                                 parser_class=parser_class)
    _table_parser(which, "append")
    _recall_parser(which)
    for name in ("lifecycle", "scale", "deltas", "sync", "hub"):
        _table_parser(which, name)
    _trapworld_parser(which)
