"""Lesson lifecycle benchmark: agent commands through the Python API, and the view rebuilt.

Two measurements in one process, on one seeded story: a fleet of agents working on 50
projects that share a pool of traps (a target where one operation fails and another
works). Each task asks for its project's lessons (which records a recall), then reports
an outcome of five operations; some hold a failed-then-succeeded pair on one target, so
the loop learns lessons, recalls put them in play and later outcomes confirm or
contradict them; an extractor proposes lessons citing the outcomes that show them; a
reconcile runs once a simulated day; a lesson learned in a second project is promoted.

- **Commands.** The first ``commands`` calls of the story go through :class:`Ledger` on
  a durable home (an fsync per commit, the default), each repetition in a fresh home.
- **Rebuild.** The story then goes on past ``commands`` in the last repetition's home,
  through the same API without fsync, until the log holds ``log_events`` events, so the
  ledger's own policies wrote all of it; ``story_matches_view`` reports whether the
  rebuilt view ends with the incrementally kept view's active lessons and confidences.
  The log is then folded into a fresh
  :class:`LessonView` from position 0, as ``lessonledger rebuild`` does, and set against
  two replays of the same log: :meth:`EventLog.scan` decoding every body, and a raw LMDB
  cursor walk over the log tree decoding the same bodies, the ceiling of any fold.

Every rate is the median of :data:`_REPEATS` runs. Run it with
``python -c "from lessonledger.ops.bench.lifecycle import run; print(run())"``.
"""

from __future__ import annotations

import collections
import itertools
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from lessonledger.commands.handlers import command_id
from lessonledger.commands.ledger import Ledger, open_ledger
from lessonledger.ledger.envelope import SALT_BYTES
from lessonledger.ledger.events import (
    Operation,
    decode_event,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.rules import looks_transient
from lessonledger.projections.runner import Runner
from lessonledger.projections.views import VIEW_NAME, lesson_view, registry

__all__ = ["call", "run", "story"]

_REPEATS = 3
_SEED = 20_240_603
_PROJECTS = 50
#: Distinct traps across the fleet; each project runs into a few, some shared.
_TRAP_POOL = 600
_TRAPS_PER_PROJECT = 8
_OPERATIONS = 5
#: Tasks an agent session runs before the next session of that project starts.
_SESSION_TASKS = 6
_TASKS_PER_DAY = 150
_TASK_GAP = timedelta(seconds=86_400 // _TASKS_PER_DAY)
_START = datetime(2024, 6, 3, 8, tzinfo=UTC)
#: Share of outcomes an extractor turns into a proposal, when the outcome shows one.
_PROPOSE = 0.25
#: An extractor proposes the same lesson in a project again only after this long.
_REPROPOSE = timedelta(days=14)
#: Events per append while the story is written straight to the log.
_APPEND_BATCH = 1_000
#: Most lessons one recall lists, as :meth:`Ledger.lessons` records them.
_RECALL_MAX = 1_000
_TRANSIENT_ERRORS = ("connection reset by peer", "read timed out after 30s",
                     "503 service unavailable")
_WORDS = (
    "pytest", "run", "failed", "import", "module", "fixture", "retry", "cache", "lockfile",
    "migration", "schema", "config", "timeout", "flaky", "network", "mock", "patch", "deploy",
    "rollback", "branch", "rebase", "merge", "conflict", "lint", "format", "type", "check",
    "build", "wheel", "install", "venv", "path", "symlink", "permission", "docker", "compose",
    "port", "socket", "encoding", "unicode", "json", "yaml", "toml", "parser", "index",
    "vacuum", "transaction", "deadlock", "commit", "stale", "snapshot", "replay", "cursor",
)
_FINGERPRINT = {"python": "3.11.7", "pytest": "8.2.1", "node": "20.12.2"}

Kind = Literal["query", "outcome", "proposal", "reconcile"]
_KINDS: tuple[Kind, ...] = ("query", "outcome", "proposal", "reconcile")
Rates = dict[str, float | int | str]


# -- the story ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Trap:
    """A target where ``bad`` fails with ``error`` and ``good`` works."""

    target: str
    bad: str
    good: str
    error: str


@dataclass
class _Project:
    """A project's digest, the traps its tasks run into, and its agent sessions."""

    digest: str
    traps: list[_Trap]
    session: int = 0
    tasks: int = 0

    def next_session(self) -> str:
        """Return the session label of the project's next task."""
        if self.tasks % _SESSION_TASKS == 0:
            self.session += 1
        self.tasks += 1
        return f"{self.digest[:6]}-s{self.session}"


@dataclass(frozen=True)
class _Step:
    """One call on the ledger: its kind, when it happens, and its keyword arguments."""

    kind: Kind
    at: datetime
    fields: dict[str, Any] = field(default_factory=dict)


def _words(rng: random.Random, count: int) -> str:
    """Return ``count`` vocabulary words."""
    return " ".join(rng.choices(_WORDS, k=count))


def _trap(rng: random.Random, index: int) -> _Trap:
    """Return a trap; one in ten fails transiently, so the loop learns a tentative lesson."""
    tool = rng.choice(_WORDS)
    error = (rng.choice(_TRANSIENT_ERRORS) if rng.random() < 0.1
             else f"{rng.choice(_WORDS)} error: {_words(rng, 3)}")
    return _Trap(target=f"tests/{rng.choice(_WORDS)}_{index}", bad=f"{tool}:{rng.choice(_WORDS)}",
                 good=f"{tool}:{rng.choice(_WORDS)}-{index}", error=error)


def _noise(rng: random.Random) -> tuple[str, str, bool, str]:
    """Return an everyday operation: (op, target, ok, error)."""
    ok = rng.random() < 0.85
    return (f"{rng.choice(_WORDS)}:{rng.choice(_WORDS)}",
            f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py", ok,
            "" if ok else _words(rng, 3))


def _operations(rng: random.Random, trap: _Trap) -> tuple[list[Operation], bool, str]:
    """Return a task's operations, whether it hit the trap's pair, and what it shows.

    What it shows is ``avoid`` (the bad operation failed), ``do`` (the good one worked)
    or empty: what an extractor could propose from it.
    """
    roll = rng.random()
    hits: list[tuple[str, str, bool, str]]
    if roll < 0.35:  # the trap, then the way round it: the loop learns or confirms
        hits = [(trap.bad, trap.target, False, trap.error), (trap.good, trap.target, True, "")]
        shows = rng.choice(("avoid", "do"))
    elif roll < 0.55:  # the lesson followed
        hits, shows = [(trap.good, trap.target, True, "")], "do"
    elif roll < 0.68:  # the trap alone
        hits, shows = [(trap.bad, trap.target, False, trap.error)], "avoid"
    elif roll < 0.73:  # the trap is gone: lessons about it are contradicted
        hits, shows = [(trap.bad, trap.target, True, "")], ""
    else:
        hits, shows = [], ""
    places = sorted(rng.sample(range(_OPERATIONS), len(hits)))
    ops = [_noise(rng) for _ in range(_OPERATIONS)]
    for place, hit in zip(places, hits, strict=True):
        ops[place] = hit
    operations = [Operation(op=op, target=target, ok=ok, error=error, order=order)
                  for order, (op, target, ok, error) in enumerate(ops)]
    return operations, len(hits) == 2, shows


def _outcome_id(key: str) -> UUID:
    """The id the ledger gives the outcome of the command with this key."""
    return derived_id(command_id(key), "outcome")


def _proposal(key: str, project: str, session: str, trap: _Trap, shows: str,
              outcome: str, at: datetime) -> _Step:
    """Return an extractor's proposal citing the outcome of command ``outcome``."""
    lesson: dict[str, str]
    if shows == "avoid":
        lesson = {"kind": "avoid", "avoid_op": trap.bad,
                  "text": f"Do not run `{trap.bad}` on {trap.target}: {trap.error}"}
        if looks_transient(trap.error):  # a blip shows nothing more than a hypothesis
            lesson["longevity"] = "tentative"
    else:
        lesson = {"kind": "do", "prefer_op": trap.good,
                  "text": f"Run `{trap.good}` for {trap.target}"}
    return _Step("proposal", at, {
        "key": key, "project": project, "session": session, "target": trap.target,
        "source": "extractor", "evidence": [_outcome_id(outcome)], "occurred_at": at,
        "fingerprint": _FINGERPRINT, **lesson})


def story() -> Iterator[_Step]:
    """Yield the fleet's calls on the ledger, in order, reproducibly and without end."""
    rng = random.Random(_SEED)
    pool = [_trap(rng, i) for i in range(_TRAP_POOL)]
    projects = [_Project(f"{rng.getrandbits(64):016x}", rng.sample(pool, _TRAPS_PER_PROJECT))
                for _ in range(_PROJECTS)]
    # Some projects are busier than others, as in any fleet.
    weights = [1.0 / (1 + i % 10) for i in range(_PROJECTS)]
    proposed: dict[tuple[str, str, str], datetime] = {}
    at = _START
    for task in itertools.count():
        if task and task % _TASKS_PER_DAY == 0:
            yield _Step("reconcile", at, {"key": f"reconcile-{task}", "now": at})
        project = rng.choices(projects, weights)[0]
        session = project.next_session()
        yield _Step("query", at, {"project": project.digest, "session": session})
        # The first traps on a project's list come up most: the ones that bite.
        trap = project.traps[min(int(rng.expovariate(0.5)), _TRAPS_PER_PROJECT - 1)]
        operations, pair, shows = _operations(rng, trap)
        key = f"outcome-{task}"
        yield _Step("outcome", at, {
            "key": key, "project": project.digest, "session": session,
            "task": f"task {task}: {_words(rng, rng.randint(4, 8))}",
            "passed": pair or rng.random() < 0.75, "operations": operations,
            "fingerprint": _FINGERPRINT, "occurred_at": at})
        last = proposed.get((project.digest, shows, trap.target), _START - _REPROPOSE)
        if shows and at - last >= _REPROPOSE and rng.random() < _PROPOSE:
            proposed[project.digest, shows, trap.target] = at
            yield _proposal(f"proposal-{task}", project.digest, session, trap, shows, key, at)
        at += _TASK_GAP


# -- commands through the API ------------------------------------------------------------


def call(ledger: Ledger, step: _Step) -> None:
    """Make one call on the ledger."""
    if step.kind == "query":
        ledger.lessons(step.fields["project"], session=step.fields["session"])
    elif step.kind == "outcome":
        ledger.observe_outcome(**step.fields)
    elif step.kind == "proposal":
        ledger.propose_lesson(**step.fields)
    else:
        ledger.reconcile(**step.fields)


@dataclass
class _Run:
    """One run of the commands: wall seconds in all, seconds and calls by kind."""

    seconds: float
    by_kind: dict[str, float]
    calls: collections.Counter[str]


def _drive(path: str, steps: list[_Step]) -> _Run:
    """Run ``steps`` through a durable ledger at ``path``, timing each call."""
    by_kind: dict[str, float] = dict.fromkeys(_KINDS, 0.0)
    calls: collections.Counter[str] = collections.Counter()
    clock = time.perf_counter
    ledger = Ledger(path, sync=True)
    try:
        began = clock()
        for step in steps:
            started = clock()
            call(ledger, step)
            by_kind[step.kind] += clock() - started
            calls[step.kind] += 1
        seconds = clock() - began
    finally:
        ledger.close()
    return _Run(seconds, by_kind, calls)


def _commands(workdir: str, steps: list[_Step], say: Callable[[str], None]) -> tuple[Rates, str]:
    """Run the commands :data:`_REPEATS` times, each in a fresh durable home.

    Returns the median rates and the home of the last run, which is kept for the rebuild.
    """
    totals: list[float] = []
    kinds: dict[str, list[float]] = {kind: [] for kind in _KINDS}
    path = ""
    for repeat in range(1, _REPEATS + 1):
        if path:
            shutil.rmtree(path, ignore_errors=True)
        path = tempfile.mkdtemp(prefix="commands-", dir=workdir)
        done = _drive(path, steps)
        totals.append(len(steps) / done.seconds)
        for kind in _KINDS:
            if done.calls[kind]:
                kinds[kind].append(done.calls[kind] / done.by_kind[kind])
        say(f"commands ({repeat}/{_REPEATS}): {totals[-1]:,.0f} commands/s")
    rates: Rates = {"commands_per_s": round(statistics.median(totals), 1)}
    for label, samples in kinds.items():
        # 0.0 for a kind the commands did not include (too few for a reconcile, say).
        rates[f"{label}_per_s"] = round(statistics.median(samples), 1) if samples else 0.0
    return rates, path


# -- the story goes on, through the same API ---------------------------------------------


def _extend(path: str, story: Iterator[_Step], events: int) -> tuple[int, int, dict[UUID, float]]:
    """Go on with ``story`` in the home at ``path`` until its log holds ``events`` events.

    The same commands through the same API (without fsync, which the rebuild does not
    measure), so the policies that wrote the log are the ledger's own. Returns how many
    events the log held before and after, and the active lessons of the view kept
    incrementally meanwhile, with their confidence, to check the rebuilt view against.
    """
    with open_ledger(path, sync=False) as ledger:
        before = ledger.head()
        while ledger.head() < events:
            call(ledger, next(story))
        kept = {row.lesson_id: row.confidence for row in ledger.catalogue(everything=True)
                if row.active}
        return before, ledger.head(), kept


# -- rebuild and replays -----------------------------------------------------------------


def _rebuild(log: EventLog, events: int) -> tuple[float, LessonView]:
    """Fold the whole log into a fresh lesson view; return events per second and the view."""
    started = time.perf_counter()
    view = lesson_view(Runner(registry()).fresh(log, None, [VIEW_NAME]))
    return events / (time.perf_counter() - started), view


def _replay(log: EventLog, events: int) -> float:
    """Read the whole log through :meth:`EventLog.scan` and decode every body."""
    started = time.perf_counter()
    for record in log.scan():
        decode_event(record.payload or b"")
    return events / (time.perf_counter() - started)


def _raw_replay(log: EventLog, events: int) -> float:
    """Walk the log tree with one raw LMDB cursor and decode every body: the ceiling."""
    tree = log.home.db(f"{LOG_NAME}.log")
    started = time.perf_counter()
    with log.home.env.begin(db=tree) as txn:
        for key, value in txn.cursor().iternext():
            if key[8]:  # position ‖ 1: the body, salt ‖ payload
                decode_event(value[SALT_BYTES:])
    return events / (time.perf_counter() - started)


def _folds(path: str, kept: dict[UUID, float], say: Callable[[str], None]) -> Rates:
    """Measure rebuild and both replays of the log at ``path``, taking turns each round.

    Also describes the log, and says whether the view rebuilt from it holds the active
    lessons, with the confidences, of the view kept while the log was written.
    """
    home = acquire(path, sync=False)
    try:
        log = EventLog(home, LOG_NAME)
        events = log.head()
        views: list[LessonView] = []

        def rebuild() -> float:
            rate, view = _rebuild(log, events)
            views[:] = [view]
            return rate

        contenders: dict[str, Callable[[], float]] = {
            "rebuild": rebuild, "replay": lambda: _replay(log, events),
            "raw_replay": lambda: _raw_replay(log, events)}
        samples: dict[str, list[float]] = {label: [] for label in contenders}
        for repeat in range(1, _REPEATS + 1):
            for label, measure in contenders.items():
                samples[label].append(measure())
                say(f"{label} ({repeat}/{_REPEATS}): {samples[label][-1]:,.0f} events/s")
        types = collections.Counter(record.envelope.type for record in log.scan())
    finally:
        release(home)
    rates: Rates = {f"{label}_eps": round(statistics.median(values), 1)
                    for label, values in samples.items()}
    active = [row for row in views[0].lessons.values() if row.active]
    evidence = statistics.fmean(len(row.evidence) for row in active) if active else 0.0
    return rates | {
        "log_lessons": len(views[0].lessons),
        "log_active_lessons": len(active),
        "log_global_lessons": sum(row.scope == "global" for row in active),
        "log_mean_active_evidence": round(evidence, 1),
        **{f"log_{kind.replace('.', '_')}": count for kind, count in sorted(types.items())},
        "story_matches_view": "yes" if kept == {
            row.lesson_id: row.confidence for row in active} else "no",
    }


def _ratios(rates: Rates) -> Rates:
    """The rebuild set against the replays of the same log, and the target."""
    def ratio(top: str, bottom: str) -> float:
        return round(float(rates[f"{top}_eps"]) / float(rates[f"{bottom}_eps"]), 3)

    return {"rebuild_vs_raw_replay": ratio("rebuild", "raw_replay"),
            "target_rebuild_vs_raw_replay": 0.25,
            "rebuild_vs_replay": ratio("rebuild", "replay"),
            "replay_vs_raw_replay": ratio("replay", "raw_replay")}


def run(
    commands: int = 5_000,
    log_events: int = 100_000,
    workdir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, float | int | str]:
    """Measure agent commands through the API and the lesson view's rebuild; return flat.

    Args:
        commands: calls through the API per run: queries, outcomes, proposals and
            reconciles, as the story makes them.
        log_events: events the log holds when the rebuild is measured (at least the
            ones the commands wrote; the story goes on, appended straight to the log).
        workdir: where to make the temporary homes; the system default when None.
        progress: called with one line per finished repetition of a measurement.

    Returns:
        A JSON-able dict: ``commands_per_s`` and the rate of each kind of call, the
        ``*_eps`` rates of rebuild and replays with their ``*_vs_*`` ratios and the
        target, counts describing the workload and the log, and ``story_matches_view``:
        ``yes`` when the view rebuilt from the log holds exactly the active lessons, at
        the same confidences, as the view kept incrementally while it was written.
    """
    def say(line: str) -> None:
        if progress is not None:
            progress(line)

    story_steps = story()
    steps = list(itertools.islice(story_steps, max(commands, 1)))
    kinds = collections.Counter(step.kind for step in steps)
    tmp = tempfile.mkdtemp(prefix="ll-bench-", dir=workdir)
    try:
        result: Rates = {"commands": len(steps), "projects": _PROJECTS,
                         **{f"{kind}_calls": kinds[kind] for kind in _KINDS}}
        rates, home = _commands(tmp, steps, say)
        result |= rates
        started = time.perf_counter()
        before, after, kept = _extend(home, story_steps, log_events)
        say(f"log: {before:,} events from the commands, {after - before:,} more appended "
            f"in {time.perf_counter() - started:.1f} s")
        result |= {"command_events": before, "log_events": after}
        result |= _folds(home, kept, say)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return result | _ratios(result)
