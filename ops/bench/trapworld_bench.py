"""``lessonledger bench trapworld``: do agents with the ledger stop repeating mistakes?

Runs the trap world (:mod:`lessonledger.ops.bench.trapworld`) once per arm
(:mod:`lessonledger.ops.bench.trapworld_agents`) per repeat, each arm in a fresh home, every
project working one task a day, with a reconcile pass once a simulated week. The world
is scored from its own truth, which no agent and no ledger ever reads:

- ``repeat_error_rate``: of the steps on a target where the agent had already seen a form
  fail structurally (since the last flip), the share where it hit one of those again. A
  step on a target broken that day (``failing-tasks``: every form fails alike) shows no
  form's own failure and is left out.
- ``steps_per_task``: attempts per task. ``first_attempt_success``: share of steps whose
  first attempt worked.
- ``sessions_to_recover``: after a flip, the sessions on that target whose first attempt
  still failed structurally before one did not (mean over flipped targets worked on).
- ``stale_carry_rate``: of the flipped targets where memory steered the agent into the
  now-failing form, the share where it did so again after that first contradiction.
- ``leakage_rate``: of the steps where memory changed the agent's first choice, the share
  where it followed advice learned only in other projects, right there and wrong here.
- ``transient_lessons_active_rate``: of the lessons (or remembered errors) that came from
  a transient failure, the share still active at the end (pooled over the repeats).

Metrics about what memory did are ``null`` for the ``off`` arm, which has none.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from lessonledger.commands.ledger import open_ledger
from lessonledger.commands.messages import Operation
from lessonledger.ops.bench.trapworld import FAMILIES, FORMS, World, WorldConfig, family_config
from lessonledger.ops.bench.trapworld_agents import (
    ARMS,
    Advice,
    Agent,
    LastErrorAgent,
    MemoryAgent,
    Tried,
)

__all__ = ["FAMILY_TARGETS", "METRICS", "TARGETS", "Tally", "run", "run_all", "run_arm",
           "work_task"]

METRICS = ("repeat_error_rate", "steps_per_task", "first_attempt_success",
           "sessions_to_recover", "stale_carry_rate", "leakage_rate",
           "transient_lessons_active_rate")
#: Issue 5's targets for the default world with ``--repeats 5``.
TARGETS = {"memory.repeat_error_rate": ("<=", 0.05), "off.repeat_error_rate": (">=", 0.6),
           "memory.stale_carry_rate": ("<=", 0.05), "memory.leakage_rate": ("<=", 0.01),
           "memory.transient_lessons_active_rate": ("<=", 0.05)}
#: Issue 12's targets, on every world family (the default's ``off`` target stays).
FAMILY_TARGETS = {"memory.repeat_error_rate": ("<=", 0.03),
                  "memory.stale_carry_rate": ("<=", 0.05), "memory.leakage_rate": ("<=", 0.01),
                  "memory.transient_lessons_active_rate": ("<=", 0.05)}
_MEMORYLESS = ("stale_carry_rate", "leakage_rate", "transient_lessons_active_rate")
START = datetime(2026, 1, 5, 9, tzinfo=UTC)
#: A reconcile pass (decay, expiry, caps) after every this many days.
RECONCILE_EVERY = 7


@dataclass
class Tally:
    """What the world saw one arm do, scored against the truth."""

    world: World
    steps: int = 0
    tasks: int = 0
    attempts: int = 0
    first_ok: int = 0
    opportunities: int = 0
    repeats: int = 0
    followed: int = 0
    leaked: int = 0
    #: (project, target, epoch) → forms seen failing structurally.
    seen: dict[tuple[str, str, int], set[int]] = field(default_factory=lambda: defaultdict(set))
    #: flipped (project, target) → after the flip, per session: (first attempt right, stale).
    after_flip: dict[tuple[str, str], list[tuple[bool, bool]]] = field(
        default_factory=lambda: defaultdict(list))
    #: outcome id → (target, form) pairs that failed transiently in it.
    transient: dict[UUID, set[tuple[str, str]]] = field(default_factory=dict)
    #: (project, the operations that failed transiently) per outcome that had any.
    blips: list[tuple[str, list[Operation]]] = field(default_factory=list)

    def structural(self, project: str, kind: str, day: int, form: int) -> bool:
        """True when the form fails for a reason that lasts (the truth, not the error)."""
        return form not in self.world.works(project, kind, day)

    def step(self, project: str, kind: str, day: int, tried: list[Tried],
             advice: list[Advice]) -> None:
        """Score one target of a task: its attempts, and the advice that chose the first."""
        epoch = int(self.world.flipped(project, kind, day))
        seen = self.seen[project, kind, epoch]
        hits = {t.form for t in tried if not t.ok and self.structural(project, kind, day, t.form)}
        broken = self.world.broken(project, day) == kind
        if broken:
            # Broken today: every form fails alike, so no attempt shows a form's own
            # failure, and none can be a repeat of one (nor a stale carry).
            hits, seen = set(), set()
        if seen:
            self.opportunities += 1
            self.repeats += bool(hits & seen)
        seen |= hits
        self.steps += 1
        self.attempts += len(tried)
        # Nothing tried: the agent left a target it knew to be a dead end, and reported it.
        first_right = (not self.world.works(project, kind, day) if not tried
                       else not self.structural(project, kind, day, tried[0].form))
        self.first_ok += bool(tried) and tried[0].ok
        if advice:
            self.followed += 1
            self.leaked += not first_right and any(
                self._leaked(a, project, kind, day) for a in advice)
        if epoch and not broken:
            self.after_flip[project, kind].append((first_right, bool(advice) and not first_right))

    def _leaked(self, advice: Advice, project: str, kind: str, day: int) -> bool:
        """Advice learned only elsewhere, right where it was learned."""
        if project in advice.projects:
            return False
        for source in advice.projects:
            if (source, kind) not in self.world.truth:
                continue
            works = self.world.works(source, kind, day)
            if (advice.prefer < 0 or advice.prefer in works) and advice.avoid not in works:
                return True
        return False

    def outcome(self, outcome_id: UUID, project: str, day: int,
                operations: list[Operation]) -> None:
        """Score a finished task, noting which of its failures were blips."""
        self.tasks += 1
        broken = self.world.broken(project, day)
        self.transient[outcome_id] = {
            (o.target, o.op) for o in operations if not o.ok and o.target != broken
            and not self.structural(project, o.target, day, self.world.form(o.target, o.op))}
        blips = [o for o in operations if (o.target, o.op) in self.transient[outcome_id]]
        if blips:
            self.blips.append((project, blips))

    def figures(self) -> dict[str, float]:
        """The arm's figures so far (those that need the home are added by the caller)."""
        recover = []
        stale_pairs = carried = 0
        for sessions in self.after_flip.values():
            right = [i for i, (ok, _) in enumerate(sessions) if ok]
            recover.append(right[0] if right else len(sessions))
            stale = sum(s for _, s in sessions)
            stale_pairs += stale > 0
            carried += stale > 1
        return {
            "repeats": self.repeats,
            "repeat_chances": self.opportunities,
            "repeat_error_rate": _ratio(self.repeats, self.opportunities),
            "steps_per_task": _ratio(self.attempts, self.tasks),
            "first_attempt_success": _ratio(self.first_ok, self.steps),
            "sessions_to_recover": statistics.fmean(recover) if recover else 0.0,
            "stale_carry_rate": _ratio(carried, stale_pairs),
            "leakage_rate": _ratio(self.leaked, self.followed),
        }


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _agent(arm: str, ledger: Any, retry_blips: bool = False) -> Agent:
    if arm == "memory":
        return MemoryAgent(ledger, retry_blips=retry_blips)
    if arm == "last_error":
        return LastErrorAgent(ledger, retry_blips=retry_blips)
    return Agent(ledger, retry_blips=retry_blips)


def work_task(world: World, agent: Agent, project: str, day: int, session: str,
              tally: Tally | None = None) -> tuple[list[Operation], bool]:
    """One session: the agent works the project's task for the day, target by target.

    Returns the operations it ran, in order, and whether every target was done.
    """
    task = world.task(project, day)
    agent.begin(project, session, task)
    operations: list[Operation] = []
    passed = True
    for kind in task.kinds:
        tried: list[Tried] = []
        first: list[Advice] = []
        while len(tried) < 2 * len(FORMS[kind]):
            form, advice = agent.next(kind, tried)
            first = advice if not tried else first
            if form < 0:
                break  # the agent gives the target up as a dead end, and reports it
            ok, error = world.attempt(project, kind, form, day, len(tried),
                                      sum(t.form == form for t in tried))
            tried.append(Tried(form, ok, error))
            agent.saw(kind, tried[-1])
            operations.append(Operation(op=world.op(kind, form), target=kind, ok=ok,
                                        error=error, order=len(operations)))
            if ok:
                break
        passed = passed and bool(tried) and tried[-1].ok
        if tally is not None:
            tally.step(project, kind, day, tried, first)
    return operations, passed


def run_arm(world: World, arm: str, home: Path, *, sync: bool = False, label: str = "",
            first_day: int = 0) -> dict[str, Any]:
    """Run every project's sessions for one arm in ``home``; return its figures.

    ``label`` prefixes the session names, so runs sharing a home stay apart; a run that
    continues an earlier one in the same home starts at ``first_day``.
    """
    config, tally = world.config, Tally(world)
    last = first_day + config.sessions - 1
    with open_ledger(home, sync=sync) as ledger:
        agent = _agent(arm, ledger, config.retry_blips)
        for day in range(first_day, last + 1):
            for i, project in enumerate(world.projects):
                operations, passed = work_task(world, agent, project, day,
                                               f"{label}{arm}-{i}-{day}", tally)
                when = START + timedelta(days=day, minutes=i)
                outcome = agent.end(world.task(project, day), operations, passed, when,
                                    world.fingerprint(project, day))
                tally.outcome(outcome, project, day, operations)
            if arm == "memory" and (day % RECONCILE_EVERY == RECONCILE_EVERY - 1
                                    or day == last):
                ledger.reconcile(key=f"{label}reconcile-{day}",
                                 now=START + timedelta(days=day + 1))
        figures: dict[str, Any] = tally.figures()
        if arm == "memory":
            every = ledger.catalogue(everything=True)
            born = [row for row in every if row.evidence and (
                row.target, row.avoid_op) in tally.transient.get(row.evidence[0], set())]
            figures["transient_lessons_active_rate"] = _ratio(
                sum(row.active for row in born), len(born))
            figures["transient_lessons"] = len(born)
            figures["transient_lessons_still_active"] = sum(row.active for row in born)
            figures["lessons_active"] = sum(r.active for r in every)
            figures["lessons_global"] = sum(r.active and r.scope == "global"
                                            for r in every)
        elif isinstance(agent, LastErrorAgent):
            blips = {(p, o.target, world.form(o.target, o.op)) for p, ops in tally.blips
                     for o in ops}
            still = [(p, kind, form) for p, kind, form in blips if (p, kind, form) in agent.failed
                     and not tally.structural(p, kind, last, form)]
            figures["transient_lessons_active_rate"] = _ratio(len(still), len(blips))
            figures["transient_lessons"] = len(blips)
            figures["transient_lessons_still_active"] = len(still)
        else:
            figures.update(dict.fromkeys(_MEMORYLESS))
        ledger.flush()  # the last recalls' records, still queued, count too
        figures["events"] = ledger.head()
    return figures


def run(config: WorldConfig, repeats: int = 5,
        progress: Callable[[str], None] = lambda _: None,
        world: str | None = None) -> dict[str, Any]:
    """Every arm on ``repeats`` worlds (seeds ``seed``, ``seed + 1``, …).

    ``world`` names a family (:data:`~lessonledger.ops.bench.trapworld.FAMILIES`) whose knobs
    replace ``config``'s; without it ``config`` is run as it is.
    """
    family_run = world is not None
    if world is not None:
        config = family_config(config, world)
    per_arm: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lessonledger-trapworld-") as tmp:
        for r in range(repeats):
            generated = World.generate(WorldConfig(**{**asdict(config),
                                                       "seed": config.seed + r}))
            for arm in ARMS:
                t0 = time.perf_counter()
                figures = run_arm(generated, arm, Path(tmp) / f"{arm}-{r}")
                per_arm[arm].append(figures)
                progress(f"{config.family} repeat {r + 1}/{repeats} {arm:<10} "
                         f"repeat_error_rate={figures['repeat_error_rate']:.3f} "
                         f"steps_per_task={figures['steps_per_task']:.2f} "
                         f"({time.perf_counter() - t0:.1f} s)")
    arms = {arm: _summary(runs) for arm, runs in per_arm.items()}
    result: dict[str, Any] = {"world": config.family, "arms": arms,
                              "config": {**asdict(config), "repeats": repeats}}
    targets = dict(TARGETS)
    if family_run:  # issue 12's targets (and issue 5's for off, on the default world)
        off = "off.repeat_error_rate"
        targets = {**({off: TARGETS[off]} if config.family == "default" else {}),
                   **FAMILY_TARGETS}
    result["targets"] = {name: f"{op} {value}" for name, (op, value) in targets.items()}
    met = {name: _meets(arms, name, op, value) for name, (op, value) in targets.items()}
    met["memory.steps_per_task < last_error.steps_per_task"] = (
        arms["memory"]["steps_per_task"] < arms["last_error"]["steps_per_task"])
    result["met"] = met
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def run_all(config: WorldConfig, repeats: int = 5,
            progress: Callable[[str], None] = lambda _: None,
            names: tuple[str, ...] = tuple(FAMILIES)) -> tuple[list[dict[str, Any]],
                                                               dict[str, Any]]:
    """Every family in turn: one result per family (as :func:`run`'s), and a summary.

    The summary has, per family, memory's figures against issue 12's targets and whether
    each was met, and ``met``: whether every family met every target.
    """
    results = [run(config, repeats, progress, world=name) for name in names]
    summary: dict[str, Any] = {"summary": {}, "repeats": repeats}
    for result in results:
        arms = result["arms"]
        summary["summary"][result["world"]] = {
            **{metric: arms["memory"][metric] for metric in METRICS},
            "last_error.steps_per_task": arms["last_error"]["steps_per_task"],
            "off.repeat_error_rate": arms["off"]["repeat_error_rate"],
            "met": all(result["met"].values()),
        }
    summary["met"] = all(f["met"] for f in summary["summary"].values())
    summary["seconds"] = round(sum(r["seconds"] for r in results), 1)
    return results, summary


def _meets(arms: dict[str, Any], name: str, op: str, value: float) -> bool:
    arm, metric = name.split(".")
    got = arms[arm][metric]
    return got is not None and (got <= value if op == "<=" else got >= value)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's mean over the repeats, and its spread under ``spread``."""
    summary: dict[str, Any] = {}
    spread: dict[str, dict[str, float]] = {}
    for key in runs[0]:
        values = [r[key] for r in runs if r[key] is not None]
        if not values:
            summary[key] = None
            continue
        summary[key] = round(statistics.fmean(values), 4)
        spread[key] = {"sd": round(statistics.pstdev(values), 4),
                       "min": round(min(values), 4), "max": round(max(values), 4)}
    # Blip lessons are few (a handful a run, none in some): the rate is pooled over the
    # repeats, so a run with one such lesson weighs one lesson, not as much as a run
    # with ten. The spread is still that of the runs' own rates.
    born = sum(r.get("transient_lessons") or 0 for r in runs)
    if summary.get("transient_lessons_active_rate") is not None and born:
        still = sum(r.get("transient_lessons_still_active") or 0 for r in runs)
        summary["transient_lessons_active_rate"] = round(still / born, 4)
    summary["spread"] = spread
    return summary
