"""``lessonledger demo``: a small trap world, worked with the ledger and without it.

The agent and the world are the trap-world benchmark's (:mod:`lessonledger.ops.bench.trapworld`,
:mod:`lessonledger.ops.bench.trapworld_agents`), made small: three projects, a dozen sessions
each, one a day. With memory on, the agent works in the ledger home the demo is given
(its recalls, checks and outcomes are real events there); with memory off, in a
throwaway home. Nothing tells the ledger anything but the agent's outcomes: every lesson
comes from its own policies.

A second run in the same home carries on where the first stopped (the next days of the
same world), starting with what the first learned.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from lessonledger.commands.ledger import open_ledger
from lessonledger.ledger.verify import verify
from lessonledger.ops.bench.trapworld import World, WorldConfig
from lessonledger.ops.bench.trapworld_bench import run_arm
from lessonledger.ops.config import LOG_NAME, default_home, open_log, sync_setting
from lessonledger.ops.render import echo, printable
from lessonledger.projections.lessons import LessonRow

__all__ = ["DEMO_WORLD", "run_demo"]

#: Chosen among small seeds for a world with a shared trap, flips and a blip lesson.
DEMO_WORLD = WorldConfig(seed=7, projects=3, targets=4, sessions=12, steps=2)


def _known(home: Path, world: World) -> tuple[list[LessonRow], int]:
    """The lessons the home already holds for the demo's projects, and the runs before."""
    with open_ledger(home, sync=sync_setting()) as ledger:
        rows = [r for p in world.projects for r in ledger.lessons(p, record=False)]
        outcomes = sum(ledger.outcome_stats(p).outcomes for p in world.projects)
    return rows, outcomes // (world.config.projects * world.config.sessions)


def _command(home: Path) -> str:
    """How to name this home on a command line the reader can paste."""
    if home.resolve() == default_home().resolve():
        return "lessonledger"
    return printable(f"lessonledger --home {shlex.quote(str(home))}")


def run_demo(home: Path) -> int:
    """Run the small world with memory on (in ``home``) and off, and tell what happened."""
    with open_log(home, create=True):
        pass  # make (or find) the home, as `lessonledger init` does
    world = World.generate(DEMO_WORLD)
    known, runs = _known(home, world)
    before = {r.lesson_id for r in known}
    started = time.perf_counter()
    # A later run carries on where the last one stopped: the next days, the same world.
    label, first_day = f"demo{runs}-", runs * DEMO_WORLD.sessions
    on = run_arm(world, "memory", home, sync=sync_setting(), label=label, first_day=first_day)
    with tempfile.TemporaryDirectory(prefix="lessonledger-demo-") as scratch:
        off = run_arm(world, "off", Path(scratch), label=label, first_day=first_day)
    config = world.config
    print(f"ledger home: {printable(str(home))}\n")
    print(f"A small trap world: {config.projects} projects, {config.targets} kinds of target "
          f"in each (tests, build, docs, ...),\n{config.sessions} sessions per project, one a "
          "day. In some projects the obvious command fails (a trap)\nand another works; now "
          "and then a command fails by bad luck (a timeout, a rate limit);\nhalf-way, some "
          "traps turn over. The agent learns only from what it tries.")
    if runs:
        print(f"\nThis is run {runs + 1} in this home: it carries on {runs * config.sessions} "
              f"days in, and memory on\nstarted with the {len(before)} lessons the earlier "
              "runs left.")
    _figures(on, off)
    hint = _learned(home, world, before)
    print(f"\n({time.perf_counter() - started:.1f} s. The same world, bigger and repeated, "
          "with a third agent that only remembers its last error: "
          "`lessonledger bench trapworld`.)")
    with open_log(home, name=LOG_NAME) as log:
        report = verify(log)
    print(f"verify: {report.checked} events, chain and bodies "
          f"{'intact' if report.ok else 'DAMAGED'}")
    me = _command(home)
    print(f"next: `{me} lessons list`, `{me} log --json`"
          + (f", `{me} check --project {hint[0]} '{hint[1]}' {hint[2]}`" if hint
             else ""))
    return 0 if report.ok else 1


def _figures(on: dict[str, Any], off: dict[str, Any]) -> None:
    def again(figures: dict[str, Any]) -> str:
        chances = figures["repeat_chances"]
        return f"{figures['repeats']} of {chances}" if chances else "no chance"

    rows = [
        ("a trap hit again after it was seen to fail", again(on), again(off)),
        ("attempts per task", f"{on['steps_per_task']:.1f}", f"{off['steps_per_task']:.1f}"),
        ("first try worked", f"{on['first_attempt_success']:.0%}",
         f"{off['first_attempt_success']:.0%}"),
    ]
    print(f"\n  {'':<44}{'memory on':>12}{'memory off':>12}")
    for name, a, b in rows:
        print(f"  {name:<44}{a:>12}{b:>12}")


def _learned(home: Path, world: World,
             before: set[Any]) -> tuple[str, str, str] | None:
    """Print what the agent knows; return (project, operation, target) worth a check."""
    with open_ledger(home, sync=sync_setting()) as ledger:
        seen: set[Any] = set()
        print("\nWhat the agent knows now (what recall hands it, strongest first):")
        for n, project in enumerate(world.projects, 1):
            rows = [r for r in ledger.lessons(project, record=False) if r.lesson_id not in seen]
            seen.update(r.lesson_id for r in rows)
            print(f"  project {n} ({project[:8]}...):" if rows else
                  f"  project {n}: nothing new beyond the lessons above")
            for row in rows:
                scope = "global, " if row.scope == "global" else ""
                new = "" if row.lesson_id in before else " (new)"
                echo(f"    [{scope}{row.status}, {row.confidence:.2f}] {row.text}{new}")
        every = {r.lesson_id: r for r in ledger.catalogue(everything=True)}
        gone = [r for r in every.values() if not r.active
                and r.scope in {*world.projects, "global"} and r.reason in (
                    "replaced", "refuted") and r.lesson_id not in before]
        flipped = [r for r in gone if r.superseded_by
                   and every[r.superseded_by].avoid_op == r.prefer_op]
        for row in flipped[:2]:
            echo(f"  no longer shown (the world changed): {row.text}")
        blips = [r for r in gone if r.reason == "refuted"]
        for row in blips[:1]:
            echo(f"  no longer shown (a blip, not a trap): {row.text}")
        strongest = max(seen, key=lambda i: every[i].confidence, default=None)
        if strongest is None:
            return None
        row = every[strongest]
        where = row.scope if row.scope != "global" else (row.projects or world.projects)[-1]
        story = ledger.why(strongest)
        print(f"\nWhy the strongest lesson exists (`{_command(home)} why {strongest}`):")
        for step in story.steps[:8]:
            cited = f", outcome {str(step.outcome)[:13]}..." if step.outcome else ""
            echo(f"  @{step.position:<5} {step.type:<22} by {step.actor:<7} -> "
                 f"{step.confidence:.2f}{cited}")
        if len(story.steps) > 8:
            print(f"  ... and {len(story.steps) - 8} more")
        return where, row.avoid_op or row.prefer_op, row.target
