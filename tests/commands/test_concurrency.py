"""Agent processes publishing into one home at once lose nothing and agree with a serial run.

Each agent is a fresh interpreter (``sys.executable`` running this file, never a fork: an
LMDB environment must not be inherited across fork). All open the home, wait at a
barrier, then execute their own plan as fast as they can: outcomes with failed-then-
succeeded pairs on targets the agents share, recalls followed by outcomes that exercise
what was recalled, and extractor proposals citing their own outcomes. The same plans are
then run one agent after another in a fresh home, and the two homes are compared.

What must be equal, and what may legitimately differ
----------------------------------------------------
The interleaving decides *which* of several equivalent events comes first, so:

- positions, recorded times, ``created_at``/``last_evidence_at``/``last_used_at`` and
  the moves (which carry positions) differ;
- a loop lesson's id derives from the outcome that taught it first, so ids differ, and
  so does which lesson of an equivalent set survives (the direction of a promotion, the
  ``origin`` of the global lesson), and which project-scoped copies are left superseded;
- list orders (``projects``, ``sessions``, ``evidence``) follow arrival order.

What the agents did is not order-dependent, and neither is what it means, so for every
*active* lesson these must be equal, compared as a multiset over both homes: kind,
operation keys, target, scope, source, derivation, longevity, text, status, confidence,
and the *sets* of evidence, projects and sessions; as must the set of outcomes (id,
project, session, passed) and the sessions that recalled. The plans are built so that
this holds whatever the interleaving: every lesson on a target agrees with every other
(no contradictions), no two texts for equivalent lessons differ, a proposal is sent in the
session of the outcome it cites, and an agent recalls only after its own outcome has made
the lesson it will exercise exist. Confirmations add up whatever their order; a promotion
or a merge absorbs a lesson that has just been proposed (at its start confidence), so the
survivor's confidence is the start plus one step per confirmation, however it got there.

Lose nothing: every receipt's positions hold that command's events, each command's
events are in the log exactly once, every recall is there, no outcome confirms a lesson
twice, and the hash chain verifies.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from uuid import UUID

import msgspec
import pytest
from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.commands import ledger as ledger_module
from lessonledger.commands.handlers import command_id
from lessonledger.ledger.events import (
    AnyEvent,
    LessonConfirmed,
    LessonContradicted,
    LessonRecalled,
    OutcomeObserved,
    decode_event,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.verify import verify

AGENTS = 4
PROJECT_A = "a" * 32
PROJECT_B = "b" * 32
#: target → (the form that fails, the form that works, the failure's signature)
FORMS = {
    "tests": ("pytest:tests/", "pytest:root", "no conftest"),
    "build": ("make", "ninja", "no Makefile"),
    "docs": ("sphinx:old", "sphinx:new", "unknown directive"),
}
#: How long an agent waits at the barrier, and the whole test for its agents.
BARRIER_TIMEOUT = 20.0
RUN_TIMEOUT = 25.0
#: An agent's think time between steps: long enough for the others to get a word in.
THINK = 0.002


# -- the plans ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Observe:
    key: str
    project: str
    session: str
    #: (target, ok) in order; the operation is the target's failing or working form.
    tried: tuple[tuple[str, bool], ...]
    passed: bool = True


@dataclass(frozen=True)
class Recall:
    project: str
    session: str


@dataclass(frozen=True)
class Propose:
    key: str
    project: str
    kind: Literal["do", "avoid"]
    target: str
    #: The key of this agent's own outcome it cites; sent in that outcome's session.
    cites: str


Step = Observe | Recall | Propose


def plan(agent: int) -> list[Step]:
    """What agent ``agent`` does; every agent does the same things under its own names.

    - tests: every agent learns the pair in both projects → one global lesson;
    - build: only project A → one project lesson confirmed by every agent;
    - docs: the pair in B (a project lesson), ``do sphinx:new`` proposed in both projects
      (one global extractor lesson), ``avoid sphinx:old`` proposed in B only;
    - recalls in A and in B, each followed in the same session by an outcome that runs
      only the working forms: the recalled loop lessons are in play and confirmed;
    - a failed task that teaches nothing.
    """
    s = f"agent{agent}"

    def observe(n: int, project: str, *tried: tuple[str, bool], passed: bool = True) -> Observe:
        return Observe(f"{s}-o{n}", project, f"{s}-s{n}", tried, passed)

    return [
        observe(1, PROJECT_A, ("tests", False), ("tests", True)),
        observe(2, PROJECT_A, ("build", False), ("build", True)),
        observe(3, PROJECT_B, ("tests", False), ("tests", True)),
        observe(4, PROJECT_B, ("docs", False), ("docs", True)),
        Propose(f"{s}-p4do", PROJECT_B, "do", "docs", cites=f"{s}-o4"),
        Recall(PROJECT_A, f"{s}-s5"),
        observe(5, PROJECT_A, ("tests", True), ("build", True)),
        observe(6, PROJECT_A, ("docs", True)),
        Propose(f"{s}-p6do", PROJECT_A, "do", "docs", cites=f"{s}-o6"),
        Propose(f"{s}-p4avoid", PROJECT_B, "avoid", "docs", cites=f"{s}-o4"),
        Recall(PROJECT_B, f"{s}-s7"),
        observe(7, PROJECT_B, ("tests", True)),
        observe(8, PROJECT_A, ("tests", False), passed=False),
    ]


def operations(tried: tuple[tuple[str, bool], ...]) -> list[Operation]:
    ops: list[Operation] = []
    for target, ok in tried:
        failing, working, error = FORMS[target]
        ops.append(Operation(op=working if ok else failing, target=target, ok=ok,
                             error="" if ok else error, order=len(ops)))
    return ops


class Report(msgspec.Struct):
    """What one agent saw: each command's receipt positions, and its recalls."""

    positions: dict[str, list[int]] = {}
    #: Recalls that put at least one lesson in front of the agent (each writes an event).
    recalls: dict[str, int] = {}


def execute(ledger: Ledger, steps: list[Step], pause: float = 0.0) -> Report:
    """Run ``steps``; ``pause`` is an agent's think time between them."""
    report = Report()
    outcomes: dict[str, tuple[UUID, str]] = {}
    for step in steps:
        time.sleep(pause)
        match step:
            case Observe():
                receipt = ledger.observe_outcome(
                    key=step.key, project=step.project, session=step.session,
                    passed=step.passed, operations=operations(step.tried))
                outcomes[step.key] = (receipt.ids["outcome_id"], step.session)
            case Recall():
                rows = ledger.lessons(step.project, session=step.session)
                report.recalls[step.session] = report.recalls.get(step.session, 0) + bool(rows)
                continue
            case Propose():
                outcome_id, session = outcomes[step.cites]
                failing, working, _ = FORMS[step.target]
                receipt = ledger.propose_lesson(
                    key=step.key, project=step.project, session=session, actor="extractor",
                    text=(f"Build the docs with `{working}`" if step.kind == "do"
                          else f"Do not build the docs with `{failing}`"),
                    kind=step.kind, target=step.target, evidence=[outcome_id],
                    avoid_op=failing if step.kind == "avoid" else "",
                    prefer_op=working if step.kind == "do" else "")
        report.positions[step.key] = [int(p) for p in receipt.positions]
    return report


# -- an agent process ---------------------------------------------------------------------


def agent_main(home: str, agent: int, ready: str, barrier: str, out: str) -> None:
    with open_ledger(home, sync=False) as ledger:
        Path(ready).touch()
        deadline = time.monotonic() + BARRIER_TIMEOUT
        while not os.path.exists(barrier):
            if time.monotonic() > deadline:
                sys.exit("the barrier never opened")
            time.sleep(0.001)
        report = execute(ledger, plan(agent), pause=THINK)
    Path(out).write_bytes(msgspec.json.encode(report))


@contextmanager
def agents(home: str, work: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen([sys.executable, __file__, home, str(i), str(work / f"{i}.ready"),
                               str(work / "go"), str(work / f"{i}.json")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(AGENTS)]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def run_concurrently(home: str, work: Path) -> dict[int, Report]:
    with agents(home, work) as procs:
        deadline = time.monotonic() + RUN_TIMEOUT
        while not all((work / f"{i}.ready").exists() for i in range(AGENTS)):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            assert not failed, failed[0].communicate()[1].decode()
            assert time.monotonic() < deadline, "agents did not open the home in time"
            time.sleep(0.005)
        (work / "go").touch()
        for proc in procs:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert proc.returncode == 0, err.decode()
    return {i: msgspec.json.decode((work / f"{i}.json").read_bytes(), type=Report)
            for i in range(AGENTS)}


# -- comparing homes ----------------------------------------------------------------------


LessonKey = tuple[str, str, str, str, str, str, str, str, str, str, float,
                  frozenset[UUID], frozenset[str], frozenset[str]]


@dataclass(frozen=True)
class Meaning:
    """What a home means, whatever order its events arrived in (see the module doc)."""

    lessons: Counter[LessonKey]
    outcomes: frozenset[tuple[UUID, str, str, bool]]
    recalled_in: frozenset[str]


def meaning(ledger: Ledger) -> Meaning:
    view = ledger.view
    lessons: Counter[LessonKey] = Counter(
        (r.kind, r.avoid_op, r.prefer_op, r.target, r.scope, r.source, r.derivation,
         r.longevity, r.text, r.status, round(r.confidence, 9), frozenset(r.evidence),
         frozenset(r.projects), frozenset(r.sessions))
        for r in view.lessons.values() if r.active)
    outcomes = frozenset((o.outcome_id, o.project, o.session, o.passed)
                         for o in view.outcomes.values())
    recalled = frozenset(r.envelope.session for r in ledger.log.scan()
                         if r.envelope.type == "lesson.recalled")
    return Meaning(lessons, outcomes, recalled)


def events(ledger: Ledger) -> list[tuple[bytes, str, str, AnyEvent]]:
    """(event id, actor, session, event) of every stored event, in position order."""
    return [(r.envelope.event_id, r.envelope.actor, r.envelope.session,
             decode_event(r.payload)) for r in ledger.log.scan() if r.payload is not None]


@contextmanager
def settled(home: str) -> Iterator[Ledger]:
    """Open a home and let it finish reacting, as any later reader would."""
    with open_ledger(home, sync=False) as ledger:
        ledger.catch_up()
        yield ledger


# -- the tests ----------------------------------------------------------------------------


def check_nothing_lost(ledger: Ledger, reports: dict[int, Report]) -> None:
    log = ledger.log
    stored = events(ledger)
    assert len(stored) == log.head(), "an event has no body"
    ids = Counter(event_id for event_id, _, _, _ in stored)
    assert not [i for i, n in ids.items() if n > 1], "an event id is stored twice"
    # What the agents sent, and nothing else, besides recalls and the policies' events.
    sent = [e for _, actor, _, e in stored
            if actor != "policy" and not isinstance(e, LessonRecalled)]
    assert len(sent) == sum(len(ps) for r in reports.values() for ps in r.positions.values())
    observed = [e for e in sent if isinstance(e, OutcomeObserved)]
    assert len(observed) == len({e.outcome_id for e in observed}) == sum(
        isinstance(s, Observe) for agent in reports for s in plan(agent))
    for agent, report in reports.items():
        assert set(report.positions) == {s.key for s in plan(agent) if not isinstance(s, Recall)}
        for key, positions in report.positions.items():
            parent = command_id(key)
            for i, position in enumerate(positions):
                assert log.position_of(derived_id(parent, str(i)).bytes) == position, (
                    f"{key}'s event {i} is not where its receipt says")
            assert log.position_of(derived_id(parent, str(len(positions))).bytes) is None
    recalls = Counter(session for _, _, session, event in stored
                      if isinstance(event, LessonRecalled))
    expected = Counter({s: n for r in reports.values() for s, n in r.recalls.items() if n})
    assert recalls == expected, "a recall is missing or doubled"
    attributed = Counter((type(e).__name__, e.lesson_id, e.outcome_id) for _, _, _, e in stored
                         if isinstance(e, LessonConfirmed | LessonContradicted))
    twice = [k for k, n in attributed.items() if n > 1]
    assert not twice, f"an outcome was attributed to a lesson twice: {twice}"
    chain = verify(log)
    assert chain.ok, chain.problems[:5]


def interleaved(reports: dict[int, Report]) -> bool:
    """True when some agent's commands landed between two commands of another agent."""
    spans = [(min(p for ps in r.positions.values() for p in ps),
              max(p for ps in r.positions.values() for p in ps)) for r in reports.values()]
    spans.sort()
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def _both_runs(tmp_path: Path) -> tuple[Meaning, Meaning]:
    """Run the plans concurrently and serially; check nothing was lost in either."""
    concurrent_home, serial_home = str(tmp_path / "concurrent"), str(tmp_path / "serial")
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    reports = run_concurrently(concurrent_home, work)
    assert interleaved(reports), "the agents ran one after another: nothing was tested"

    with open_ledger(serial_home, sync=False) as ledger:
        serial_reports = {i: execute(ledger, plan(i)) for i in range(AGENTS)}

    with settled(concurrent_home) as ledger:
        check_nothing_lost(ledger, reports)
        concurrent = meaning(ledger)
    with settled(serial_home) as ledger:
        check_nothing_lost(ledger, serial_reports)
        serial = meaning(ledger)
    assert time.monotonic() - started < 30
    return concurrent, serial


def test_agent_processes_lose_nothing(tmp_path: Path) -> None:
    concurrent, serial = _both_runs(tmp_path)
    assert concurrent.outcomes == serial.outcomes
    assert concurrent.recalled_in == serial.recalled_in


def test_agent_processes_agree_with_a_serial_run(tmp_path: Path) -> None:
    concurrent, serial = _both_runs(tmp_path)
    only_concurrent = sorted((concurrent.lessons - serial.lessons).elements())
    only_serial = sorted((serial.lessons - concurrent.lessons).elements())
    assert (only_concurrent, only_serial) == ([], []), (
        "active lessons differ (only in the concurrent run, only in the serial run)")
    # The plans' intent, spelled out: one global lesson per shared target, the rest local.
    scopes = Counter((key[3], key[0], key[4]) for key in serial.lessons.elements())
    assert scopes == Counter({("tests", "prefer", "global"): 1,
                              ("build", "prefer", PROJECT_A): 1,
                              ("docs", "prefer", PROJECT_B): 1,
                              ("docs", "do", "global"): 1,
                              ("docs", "avoid", PROJECT_B): 1}), scopes


def test_outcomes_appended_before_the_policies_ran_teach_one_lesson(
    home: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two outcomes showing the same pair reach the log before any policy has run on them.

    A command runs its policies in its own transaction, so through the API this cannot
    happen; a writer that appends events without the policies (an older version, an
    eventsourcing process writing into the log) can. The next reader to fold the log runs
    the policies for the first outcome after the second is already in, and must still end
    with one lesson holding both outcomes as evidence, as a serial run has, not two copies
    of the same lesson in one project.
    """
    pair = operations((("tests", False), ("tests", True)))
    with open_ledger(home, sync=False) as first, open_ledger(home, sync=False) as second:
        with monkeypatch.context() as patch:
            patch.setattr(ledger_module, "react", lambda *_: [])  # a writer without policies
            for ledger, key in ((first, "one"), (second, "two")):
                ledger.observe_outcome(key=key, project=PROJECT_A, session=key, passed=True,
                                       operations=pair)
            assert first.log.head() == 2, "the writer ran policies after all"
        # Both views folded the outcomes already; a fresh reader runs their policies.
        with open_ledger(home, sync=False) as reader:
            rows = reader.lessons(PROJECT_A, record=False)
            dump = reader.view.dump()
    with open_ledger(home, sync=False) as again:
        assert again.view.dump() == dump
    assert [(r.kind, r.avoid_op, r.prefer_op, r.target) for r in rows] == [
        ("prefer", "pytest:tests/", "pytest:root", "tests")], rows
    (lesson,) = rows
    assert len(lesson.evidence) == 2
    assert lesson.confidence == pytest.approx(0.65)


if __name__ == "__main__":
    agent_main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:6])
