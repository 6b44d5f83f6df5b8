"""The lesson view is a fold: rebuilt, replayed or reopened, it is the same view.

Hypothesis drives a ledger with random *valid* command sequences — outcomes whose
operations come from a small pool of operation keys and targets (so failed-then-succeeded
pairs, attributions, promotions and flips really happen), recalls that put lessons in
play for a session, proposals citing outcomes that support them (or nothing: claims),
edits and retirements, environment changes, reconcile passes at an advancing clock,
retries of earlier commands, and erasures of a whole session. Refused commands (typed
``CommandError``) may occur; they must write nothing. Then:

(a) the view kept incrementally — with the policies running while it catches up — dumps
    the same bytes as a fresh :class:`LessonView` folding the log from position 0, which
    runs no policy at all (what a policy decided is in the log, so folding is enough);
(b) folding the log twice gives the same bytes, and so does folding half of it, saving,
    loading and folding the rest (what reopening a home does);
(c) closing the home and opening it again (load the saved view, catch up) gives that same
    view and writes nothing — also when the saved view is behind the log or missing, so
    that catching up re-runs the policies on triggers they already handled.

Every command is stamped with a simulated clock (``occurred_at``) so reconcile passes can
decay and expire lessons within one example.

The plain tests at the end pin down, one by one, what the properties found.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from lessonledger.commands import (
    AnyCommand,
    CommandError,
    DeclareEnvironmentChange,
    EditLesson,
    Ledger,
    ObserveOutcome,
    Operation,
    ProposeLesson,
    Receipt,
    Reconcile,
    RetireLesson,
    UnknownLessonError,
    open_ledger,
)
from lessonledger.commands.erasure import NothingToEraseError
from lessonledger.commands.handlers import command_id
from lessonledger.commands.ledger import VIEW_NAME
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog
from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.store import ViewStore

#: The third is seldom used: a global lesson contradicted there is demoted.
PROJECTS = ("a" * 32, "b" * 32, "c" * 32)
#: Two operation keys per target, so a failed-then-succeeded pair is likely.
OPS = ("pytest:tests/", "pytest:root", "make", "ninja")
TARGETS = ("tests", "build")
#: The last one looks transient: it makes tentative lessons.
ERRORS = ("no conftest", "exit status 2", "connection timed out")
SESSIONS = ("s0", "s1", "s2", "s3")
#: The last one looks like a credential: a command carrying it is refused.
TEXTS = ("Run pytest from the repo root", "Build with ninja", "password=hunter2 works")
FINGERPRINTS: tuple[dict[str, str], ...] = ({}, {"python": "3.11"}, {"python": "3.12"})
PYTHONS = ("3.11", "3.12", "3.13")
START = datetime(2030, 1, 1, tzinfo=UTC)
Candidate = tuple[Literal["prefer", "avoid", "do"], str, str, str]


# -- steps: what a random run does, resolved against the ledger as it stands --------------


@dataclass(frozen=True)
class Observe:
    project: int
    session: int
    passed: bool
    #: (operation, target, ok, error) in the order tried.
    ops: tuple[tuple[int, int, bool, int], ...]
    fingerprint: int
    #: Lessons the agent lists as in play, as indices into the lessons so far.
    in_play: tuple[int, ...]


@dataclass(frozen=True)
class Recall:
    project: int
    session: int


@dataclass(frozen=True)
class Propose:
    session: int
    #: Index into the outcomes so far; None proposes without evidence (a claim).
    outcome: int | None
    #: Which of the lessons the outcome supports (or of the pool, for a claim).
    pick: int
    #: Cite the outcome from the other project (refused: evidence from elsewhere).
    elsewhere: bool
    source: Literal["extractor", "model", "user"]
    longevity: Literal["tentative", "ongoing", "durable"]
    text: int


@dataclass(frozen=True)
class Edit:
    lesson: int
    #: Name any lesson, not only a current one (editing history is refused).
    any_status: bool
    text: int
    stale: bool


@dataclass(frozen=True)
class Retire:
    lesson: int
    any_status: bool
    stale: bool


@dataclass(frozen=True)
class Unknown:
    """Edit or retire a lesson that does not exist."""

    retire: bool


@dataclass(frozen=True)
class Environment:
    project: int
    python: int


@dataclass(frozen=True)
class Pass:
    """A reconcile pass ``days`` after the previous step."""

    days: int


@dataclass(frozen=True)
class Retry:
    """Send an earlier accepted command again, same key."""

    which: int


@dataclass(frozen=True)
class EraseSession:
    """Erase everything of one session (its outcomes and what was learned from them)."""

    session: int


Step = (Observe | Recall | Propose | Edit | Retire | Unknown | Environment | Pass | Retry
        | EraseSession)

_index = st.integers(0, 30)
_seldom = st.sampled_from([False, False, False, True])
_text = st.sampled_from([0, 0, 1, 1, 2])  # now and then, a credential
_op = st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, len(TARGETS) - 1), st.booleans(),
                st.integers(0, len(ERRORS) - 1))


@st.composite
def _pair(draw: st.DrawFn) -> tuple[tuple[int, int, bool, int], ...]:
    """A failed-then-succeeded pair on one target, maybe with noise around it."""
    target = draw(st.integers(0, len(TARGETS) - 1))
    first = draw(st.sampled_from([0, 0, 0, 1]))  # mostly one way round: promotions
    failed = 2 * target + first
    worked = 2 * target + 1 - first
    error = draw(st.integers(0, len(ERRORS) - 1))
    before = draw(st.lists(_op, max_size=1))
    after = draw(st.lists(_op, max_size=1))
    return (*before, (failed, target, False, error), (worked, target, True, 0), *after)


observes = st.builds(
    Observe, project=st.sampled_from([0, 0, 1, 1, 2]), session=st.integers(0, len(SESSIONS) - 1),
    passed=st.sampled_from([True, True, True, False]),
    ops=st.one_of(_pair(), _pair(), _pair(), st.lists(_op, max_size=3).map(tuple)),
    fingerprint=st.integers(0, len(FINGERPRINTS) - 1),
    in_play=st.lists(_index, max_size=2).map(tuple),
)
recalls = st.builds(Recall, project=st.sampled_from([0, 0, 1, 1, 2]),
                    session=st.integers(0, len(SESSIONS) - 1))
proposals = st.builds(
    Propose, session=st.integers(0, len(SESSIONS) - 1), outcome=st.none() | _index,
    pick=_index, elsewhere=_seldom,
    source=st.sampled_from(["extractor", "model", "user"]),
    longevity=st.sampled_from(["tentative", "ongoing", "durable"]),
    text=_text,
)
_kinds: dict[str, st.SearchStrategy[Step]] = {
    "observe": observes,
    "recall": recalls,
    "propose": proposals,
    "edit": st.builds(Edit, lesson=_index, any_status=_seldom, text=_text, stale=_seldom),
    "retire": st.builds(Retire, lesson=_index, any_status=_seldom, stale=_seldom),
    "unknown": st.builds(Unknown, retire=st.booleans()),
    "environment": st.builds(Environment, project=st.integers(0, len(PROJECTS) - 1),
                             python=st.integers(0, len(PYTHONS) - 1)),
    "pass": st.builds(Pass, days=st.integers(0, 45)),
    "retry": st.builds(Retry, which=_index),
    "erase": st.builds(EraseSession, session=st.integers(0, len(SESSIONS) - 1)),
}
#: Weighted by repetition (``one_of`` would weigh every kind alike): mostly outcomes.
_mix = ["observe"] * 6 + ["recall"] * 3 + ["propose"] * 3 + [k for k in _kinds if k not in
                                                               ("observe", "recall", "propose")]
steps: st.SearchStrategy[list[Step]] = st.lists(
    st.sampled_from(_mix).flatmap(_kinds.__getitem__), min_size=8, max_size=30)


def supported(operations: list[Operation]) -> list[Candidate]:
    """The lessons an outcome's operations show: what a faithful extractor would propose."""
    found: list[Candidate] = []
    for i, op in enumerate(operations):
        found.append(("do", "", op.op, op.target) if op.ok else ("avoid", op.op, "", op.target))
        if not op.ok:
            found += [("prefer", op.op, later.op, op.target) for later in operations[i + 1:]
                      if later.ok and later.target == op.target and later.op != op.op]
    return found


#: What a claim (no evidence) may say.
CLAIMS: tuple[Candidate, ...] = (
    ("prefer", "pytest:tests/", "pytest:root", "tests"), ("avoid", "make", "", "build"),
    ("do", "", "ninja", "build"), ("prefer", "pytest:root", "pytest:tests/", "tests"),
)


class Driver:
    """Runs steps against one ledger and checks each command's write on the way."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.clock = START
        self.outcomes: list[tuple[UUID, str]] = []
        self.accepted: list[tuple[AnyCommand, Receipt]] = []
        self.refused = 0
        self.erasures = 0
        self.why: set[str] = set()
        self._keys = 0

    def key(self) -> str:
        self._keys += 1
        return f"cmd-{self._keys}"

    def lesson_at(self, index: int, *, any_status: bool = True) -> LessonRow | None:
        rows = [r for r in self.ledger.view.lessons.values()
                if any_status or r.active or r.status == "claimed"]
        return rows[index % len(rows)] if rows else None

    def build(self, step: Step) -> AnyCommand | None:
        """The command a step sends, or None when it sends none (or has nothing to name)."""
        when = self.clock
        match step:
            case Observe():
                operations = [Operation(op=OPS[o], target=TARGETS[t], ok=ok,
                                        error="" if ok else ERRORS[e], order=i)
                              for i, (o, t, ok, e) in enumerate(step.ops)]
                named = [row.lesson_id for i in step.in_play
                         if (row := self.lesson_at(i)) is not None]
                return ObserveOutcome(
                    key=self.key(), session=SESSIONS[step.session], occurred_at=when,
                    project=PROJECTS[step.project], passed=step.passed, operations=operations,
                    in_play=list(dict.fromkeys(named)),
                    fingerprint=FINGERPRINTS[step.fingerprint])
            case Propose():
                return self._proposal(step, when)
            case Edit():
                row = self.lesson_at(step.lesson, any_status=step.any_status)
                if row is None:
                    return None
                return EditLesson(key=self.key(), occurred_at=when, actor="person",
                                  lesson_id=row.lesson_id, text=TEXTS[step.text],
                                  expected_version=row.version + 1 if step.stale else row.version)
            case Retire():
                row = self.lesson_at(step.lesson, any_status=step.any_status)
                if row is None:
                    return None
                return RetireLesson(key=self.key(), occurred_at=when, actor="person",
                                    lesson_id=row.lesson_id, reason="wrong for this repo",
                                    expected_version=row.version + 1 if step.stale else None)
            case Unknown():
                nobody = UUID(int=7)
                if step.retire:
                    return RetireLesson(key=self.key(), occurred_at=when, lesson_id=nobody)
                return EditLesson(key=self.key(), occurred_at=when, lesson_id=nobody,
                                  text="no such lesson")
            case Environment():
                return DeclareEnvironmentChange(
                    key=self.key(), occurred_at=when, scope=PROJECTS[step.project],
                    component="python", new=PYTHONS[step.python])
            case Pass():
                self.clock += timedelta(days=step.days)
                return Reconcile(key=self.key(), occurred_at=self.clock, now=self.clock)
            case Retry():
                if not self.accepted:
                    return None
                return self.accepted[step.which % len(self.accepted)][0]
            case Recall() | EraseSession():
                return None

    def _proposal(self, step: Propose, when: datetime) -> ProposeLesson:
        evidence: list[UUID] = []
        project = PROJECTS[0]
        choices: list[Candidate] = list(CLAIMS)
        outcomes = [(o, p) for o, p in self.outcomes if o in self.ledger.view.outcomes]
        if step.outcome is not None and outcomes:
            outcome_id, project = outcomes[step.outcome % len(outcomes)]
            choices = supported(self.ledger.view.outcomes[outcome_id].operations) or choices
            evidence = [outcome_id]
            if step.elsewhere:
                project = next(p for p in PROJECTS if p != project)
        kind, avoid, prefer, target = choices[step.pick % len(choices)]
        return ProposeLesson(
            key=self.key(), session=SESSIONS[step.session], occurred_at=when,
            actor="extractor", project=project, text=TEXTS[step.text], kind=kind,
            avoid_op=avoid, prefer_op=prefer, target=target, source=step.source,
            longevity=step.longevity, evidence=evidence)

    def run(self, step: Step) -> None:
        self.clock += timedelta(hours=1)
        if isinstance(step, Recall):
            project = PROJECTS[step.project]
            rows = self.ledger.lessons(project, session=SESSIONS[step.session])
            assert len({r.lesson_id for r in rows}) == len(rows)
            assert all(r.active and r.scope in (project, "global") for r in rows), rows
            return
        if isinstance(step, EraseSession):
            self.erase(SESSIONS[step.session])
            return
        command = self.build(step)
        if command is None:
            return
        ledger, log = self.ledger, self.ledger.log
        settle(ledger)  # whatever the call appends from here on is the command's own
        head, before = log.head(), ledger.view.dump()
        retry = isinstance(step, Retry)
        try:
            receipt = ledger.execute(command)
        except CommandError as error:
            self.why.add(type(error).__name__)
            assert not retry, "a command accepted once is accepted again"
            assert log.head() == head, f"refused {type(command).__name__} wrote events"
            assert ledger.view.dump() == before
            assert log.position_of(derived_id(command_id(command.key), "0").bytes) is None
            self.refused += 1
            return
        if retry:
            original = next(r for c, r in self.accepted if c.key == command.key)
            assert receipt == original, "a retry returns the original receipt"
            assert log.head() == head, "a retry writes nothing"
            return
        assert receipt.positions == list(range(head + 1, head + 1 + len(receipt.positions)))
        for i, position in enumerate(receipt.positions):
            record = log.read(position, limit=1)[0]
            assert record.envelope.event_id == derived_id(command_id(command.key), str(i)).bytes
        self.accepted.append((command, receipt))
        if isinstance(command, ObserveOutcome):
            self.outcomes.append((receipt.ids["outcome_id"], command.project))


    def erase(self, session: str) -> None:
        """Erase a session; its commands' bodies are gone, so they are not retried."""
        ledger, log = self.ledger, self.ledger.log
        settle(ledger)
        head = log.head()
        try:
            erasure = ledger.erase(key=self.key(), what="session", subject=session)
        except NothingToEraseError:
            assert log.head() == head, "a refused erasure wrote events"
            return
        assert erasure.position == head + 1, "an erasure appends its record and nothing else"
        assert all(log.read(p, limit=1)[0].envelope.session == session for p in erasure.erased)
        assert not [r for r in log.scan() if r.envelope.session == session and r.payload
                    and r.envelope.type != "erasure.erased"]
        self.erasures += 1
        gone = set(erasure.erased)
        self.accepted = [(c, r) for c, r in self.accepted if not gone & set(r.positions)]


def settle(ledger: Ledger) -> None:
    """Catch up until the view has folded everything, the policies' own events included."""
    for _ in range(100):
        ledger.catch_up()
        if ledger.view.position == ledger.log.head():
            return
    pytest.fail("the view never caught up with the log")


def fold(log: EventLog, start: int = 1, stop: int | None = None,
         view: LessonView | None = None) -> LessonView:
    """Fold records into ``view`` (a fresh one by default) — no policy runs."""
    view = view if view is not None else LessonView()
    for record in log.scan(start, stop):
        view.apply(record)
    return view




def describe(driver: Driver) -> None:
    """Label the example, so ``--hypothesis-show-statistics`` shows what runs exercised."""
    view = driver.ledger.view
    statuses = sorted({row.status for row in view.lessons.values()})
    event(f"lesson statuses: {', '.join(statuses) or 'no lessons'}")
    event(f"global lesson: {any(row.scope == 'global' for row in view.lessons.values())}")
    event(f"refused: {min(driver.refused, 3)}{'+' if driver.refused >= 3 else ''}")
    event(f"erasures: {driver.erasures}")
    for why in driver.why:
        event(f"refused with {why}")


def keep_saved_view(home: str, view: LessonView | None) -> None:
    """Replace the home's saved lesson view with ``view`` (None: no saved view at all)."""
    lmdb_home = acquire(home, sync=False)
    try:
        store = ViewStore(lmdb_home)
        store.drop(VIEW_NAME)
        if view is not None:
            assert store.save(VIEW_NAME, view.position, view.dump())
    finally:
        release(lmdb_home)


@contextmanager
def fresh_home() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="ll-prop-") as top:
        yield f"{top}/home"


#: Two projects learn the same pair: the second lesson is promoted as it is folded.
_PAIR = ((0, 0, False, 0), (1, 0, True, 0))
_PROMOTION: list[Step] = [
    Observe(project=0, session=0, passed=True, ops=_PAIR, fingerprint=0, in_play=()),
    Observe(project=1, session=1, passed=True, ops=_PAIR, fingerprint=0, in_play=()),
]
#: The world flips after a recall: the lesson is contradicted and replaced.
_FLIP: list[Step] = [
    Observe(project=0, session=0, passed=True, ops=_PAIR, fingerprint=1, in_play=()),
    Recall(project=0, session=1),
    Observe(project=0, session=1, passed=True, ops=((1, 0, False, 0), (0, 0, True, 0)),
            fingerprint=1, in_play=()),
    Environment(project=0, python=2),
    Pass(days=31),
]

#: Found by this property: dropping the saved view in the helper left data.mdb one page
#: short of the pages its meta counts (a page freed in the transaction that allocated
#: it is never written), which opening took for a damaged home.
_LOOSE_TAIL: list[Step] = [
    Retry(which=0), Retry(which=0), Recall(project=0, session=0),
    Propose(session=0, outcome=None, pick=0, elsewhere=False, source="extractor",
            longevity="tentative", text=0),
    Observe(project=0, session=0, passed=True, ops=((0, 0, False, 2), (1, 0, True, 0)),
            fingerprint=0, in_play=()),
    Observe(project=0, session=0, passed=True, ops=((2, 1, False, 0), (3, 1, True, 0)),
            fingerprint=1, in_play=()),
    Observe(project=0, session=0, passed=True,
            ops=((2, 0, False, 0), (1, 0, False, 0), (0, 0, True, 0)), fingerprint=0,
            in_play=()),
    Observe(project=0, session=1, passed=True, ops=((0, 0, False, 0), (1, 0, True, 0)),
            fingerprint=0, in_play=()),
]


@settings(max_examples=30, deadline=None)
@given(steps)
@example(_PROMOTION)
@example(_FLIP)
@example(_LOOSE_TAIL)
def test_rebuilt_replayed_and_reopened_views_equal_the_incremental_one(
    run: list[Step],
) -> None:
    with fresh_home() as home:
        with open_ledger(home, sync=False) as ledger:
            driver = Driver(ledger)
            for step in run:
                driver.run(step)
            ledger.catch_up()
            describe(driver)
            log, kept = ledger.log, ledger.view.dump()
            folded_to = ledger.view.position
            # The fold alone reproduces the view at the position it reflects ...
            assert fold(log, stop=folded_to).dump() == kept, "fold differs from the kept view"
            # ... and catch_up leaves nothing the policies appended unfolded.
            assert folded_to == log.head(), (
                f"catch_up stopped at {folded_to} of {log.head()}: the policies' own "
                "events were appended but not folded")
            # (a) rebuilt from position 0
            rebuilt = fold(log).dump()
            assert rebuilt == kept
            # (b) replayed twice; and saved halfway, loaded, folded on
            assert fold(log).dump() == rebuilt
            head = log.head()
            for middle in sorted({head // 3, head // 2, head - 1}):
                half = fold(log, stop=middle) if middle > 0 else LessonView()
                resumed = fold(log, middle + 1, view=LessonView.load(half.dump()))
                assert resumed.dump() == rebuilt, f"resumed from {middle} differs"
            halfway = fold(log, stop=head // 2)
        # (c) reopened: the saved view, caught up, is the same view, and nothing is written —
        # also when the saved view is behind (a crash after an earlier save) or gone, so
        # that catching up re-runs the policies on triggers they have already handled.
        for saved in ("at close", "halfway", "none"):
            if saved != "at close":
                keep_saved_view(home, halfway if saved == "halfway" else None)
            with open_ledger(home, sync=False) as again:
                assert again.log.head() == head, f"reopening (saved view {saved}) wrote events"
                assert again.view.position == head
                assert again.view.dump() == rebuilt, f"reopened (saved view {saved}) differs"


# -- what the properties found, pinned down ----------------------------------------------

P, Q = PROJECTS[0], PROJECTS[1]
FAILED_THEN_WORKED = [
    Operation(op="pytest:tests/", target="tests", ok=False, error="no conftest", order=0),
    Operation(op="pytest:root", target="tests", ok=True, order=1),
]


def test_catch_up_folds_the_events_its_own_policies_append(home: str) -> None:
    """``catch_up`` returns the head: what a policy appends while folding is folded too.

    The loop lesson an outcome teaches is appended by the policy that reacts to the
    outcome; the promotion a second project's lesson causes, by the policy reacting to
    that lesson. A view left short of them answers queries and decides commands on a
    state the log has already moved past.
    """
    with open_ledger(home, sync=False) as ledger:
        ledger.observe_outcome(key="a", project=P, session="a", passed=True,
                               operations=FAILED_THEN_WORKED)
        assert ledger.view.position == ledger.log.head(), "the loop lesson is not folded"
        ledger.observe_outcome(key="b", project=Q, session="b", passed=True,
                               operations=FAILED_THEN_WORKED)
        assert ledger.catch_up() == ledger.log.head(), "the promotion is not folded"


def test_recall_returns_the_lessons_as_the_log_stands(home: str) -> None:
    """An agent of the second project is handed the global lesson, not the one it absorbed.

    Recall must answer from a view that has folded what the policies decided, or it puts
    a lesson that is already superseded in front of the agent — and records that, instead
    of the global lesson, as in play, so the session's outcome confirms nothing.
    """
    with open_ledger(home, sync=False) as ledger:
        for key, project in (("a", P), ("b", Q)):
            ledger.observe_outcome(key=key, project=project, session=key, passed=True,
                                   operations=FAILED_THEN_WORKED)
        rows = ledger.lessons(Q, session="c")
        got = [(row.scope, row.status) for row in rows]
        assert got == [("global", "trial")], got
        ledger.observe_outcome(key="c", project=Q, session="c", passed=True,
                               operations=FAILED_THEN_WORKED[1:])
        (lesson,) = ledger.lessons(Q, record=False)
        assert lesson.confidence == pytest.approx(0.65), "the recalled lesson was not in play"


def test_a_refused_command_writes_nothing_and_its_key_stays_free(home: str) -> None:
    with open_ledger(home, sync=False) as ledger:
        with pytest.raises(UnknownLessonError):
            ledger.retire_lesson(key="r", lesson_id=UUID(int=7))
        assert ledger.log.head() == 0
        ledger.observe_outcome(key="r", project=P, passed=True, operations=FAILED_THEN_WORKED)
        assert ledger.log.head() >= 1
