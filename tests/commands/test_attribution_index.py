"""Attribution reads the lessons on an outcome's targets, and judges exactly as before.

Attribution walked every lesson the outcome's session was shown (each through the chain
of lessons that replaced it), and every active lesson of the project for the tentative
ones: some 200 lessons an outcome on a big home, a quarter of its build time. Now the
view indexes lessons by scope and target, and ``policies._in_play`` reads the few an
outcome can judge. The property below keeps the old walk as the oracle: on every
outcome of random runs (edits and merges make replacement chains, recalls and
``in_play`` make lessons shown), the index gives the old walk's lessons, in its order,
less those no verdict could come from (another target, another project's scope).

Likewise an outcome's fingerprint was compared with every active lesson of its project
(``policies._observed_environment``); now the view counts the values each component is
bound to, and only a change walks the lessons: the old walk is the oracle again.
"""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st
from lessonledger.commands import ObserveOutcome, Operation, open_ledger
from lessonledger.commands.policies import _in_play, _observed_environment
from lessonledger.ledger.events import (
    OUTCOME_OBSERVED,
    AnyEvent,
    EnvironmentChanged,
    OutcomeObserved,
    decode_event,
)
from lessonledger.projections.lessons import LessonRow, LessonView
from test_properties import (
    _FLIP,
    _PROMOTION,
    PROJECTS,
    Driver,
    Edit,
    Observe,
    Recall,
    Step,
    _kinds,
    fresh_home,
)


def _walked_survivor(view: LessonView, lesson_id: UUID) -> UUID:
    """The old ``policies._survivor``, as it was."""
    row = view.lessons[lesson_id]
    for _ in range(64):
        if row.active or row.reason != "replaced" or row.superseded_by is None \
                or row.superseded_by not in view.lessons:
            break
        row = view.lessons[row.superseded_by]
    return row.lesson_id


def _walked(view: LessonView, event: OutcomeObserved, session: str) -> list[LessonRow]:
    """The old ``policies._in_play``: every lesson shown, then every tentative one."""
    ids = dict.fromkeys(_walked_survivor(view, i)
                        for i in [*event.in_play, *view.recalled_in(session)]
                        if i in view.lessons)
    rows = [view.lessons[i] for i in ids]
    rows += [r for r in view.active_for(event.project)
             if r.longevity == "tentative" and r.lesson_id not in ids]
    return [r for r in rows if r.active or r.status == "claimed"]


def _walked_environment(view: LessonView, event: OutcomeObserved) -> list[AnyEvent]:
    """The old ``policies._observed_environment``: every active lesson of the project."""
    changed: dict[str, str] = {}
    for row in view.active_for(event.project, history=False):
        if row.scope != event.project:
            continue
        for component, value in event.fingerprint.items():
            bound = row.fingerprint.get(component)
            if bound is not None and bound != value:
                changed.setdefault(component, bound)
    return [EnvironmentChanged(scope=event.project, component=component, old=old,
                               new=event.fingerprint[component])
            for component, old in sorted(changed.items())]


def _compare_on_every_outcome(home: str, run: list[Step]) -> int:
    """Drive a ledger through ``run``, then fold its log afresh checking every outcome."""
    compared = 0
    with open_ledger(home, sync=False) as ledger:
        driver = Driver(ledger)
        for step in run:
            driver.run(step)
        ledger.catch_up()
        view = LessonView()
        for record in ledger.log.scan():
            view.apply(record)
            if record.payload is None or record.envelope.type != OUTCOME_OBSERVED:
                continue
            event = decode_event(record.payload)
            assert isinstance(event, OutcomeObserved)
            targets = {op.target for op in event.operations}
            scopes = (event.project, "global")
            expected = [r.lesson_id for r in _walked(view, event, record.envelope.session)
                        if r.target in targets and r.scope in scopes]
            assert [r.lesson_id for r in _in_play(view, event, record.envelope.session)] \
                == expected
            assert _observed_environment(view, event) == _walked_environment(view, event)
            for project in PROJECTS:
                for component, value in (("python", "3.11"), ("python", "3.12")):
                    assert view.bound_otherwise(project, component, value) == any(
                        r.scope == project and r.fingerprint.get(component, value) != value
                        for r in view.active_for(project, history=False))
                assert view.active_for(project, targets=targets) == [
                    r for r in view.active_for(project) if r.target in targets]
            compared += 1
    return compared


#: A lesson shown in a session, edited (replaced) twice, then an outcome in that session:
#: the outcome judges the survivor, found three lessons down the chain.
_CHAIN: list[Step] = [
    Observe(project=0, session=0, passed=True, ops=((0, 0, False, 0), (1, 0, True, 0)),
            fingerprint=0, in_play=()),
    Recall(project=0, session=1),
    Edit(lesson=0, any_status=False, text=0, stale=False),
    Edit(lesson=0, any_status=False, text=1, stale=False),
    Observe(project=0, session=1, passed=True, ops=((0, 0, False, 0), (1, 0, True, 0)),
            fingerprint=0, in_play=(0,)),
    Observe(project=1, session=1, passed=True, ops=((1, 0, False, 0), (0, 0, True, 0)),
            fingerprint=0, in_play=(1, 0)),
]


def test_an_outcome_judges_the_survivor_of_a_lesson_shown_then_replaced(tmp_path: str) -> None:
    assert _compare_on_every_outcome(f"{tmp_path}/home", _CHAIN) >= 3
    assert _compare_on_every_outcome(f"{tmp_path}/flip", _FLIP) >= 2
    assert _compare_on_every_outcome(f"{tmp_path}/promo", _PROMOTION) >= 2


def test_a_replaced_lesson_shown_earlier_confirms_its_survivor(tmp_path: str) -> None:
    """The survivor of an edited lesson the session saw is confirmed by its outcome."""
    p = PROJECTS[0]
    ops = [Operation(op="pytest:tests/", target="tests", ok=False, error="no conftest",
                     order=0), Operation(op="pytest:root", target="tests", ok=True, order=1)]
    with open_ledger(f"{tmp_path}/home", sync=False) as ledger:
        ledger.execute(ObserveOutcome(key="o1", project=p, session="s1", passed=True,
                                      operations=ops))
        shown = ledger.lessons(p, session="s2")[0]
        edited = ledger.edit_lesson(key="e1", lesson_id=shown.lesson_id, actor="person",
                                    text="Run pytest from the root")
        new_id = edited.ids["lesson_id"]
        ledger.execute(ObserveOutcome(key="o2", project=p, session="s2", passed=True,
                                      operations=[ops[1]]))  # only what it prefers: ok
        row = ledger.lesson(new_id)
        assert row.active
        assert len(row.evidence) == 2  # its original's, and this session's outcome
        assert ledger.lesson(shown.lesson_id).reason == "replaced"


#: Runs with more edits and recalls than the view property's: lessons shown, then replaced.
_MIX = ["observe"] * 5 + ["recall"] * 3 + ["edit"] * 2 + ["propose"] * 2 + [
    "retire", "pass", "environment"]
_steps = st.lists(st.sampled_from(_MIX).flatmap(_kinds.__getitem__), min_size=8, max_size=30)


@settings(max_examples=20, deadline=None)
@given(_steps)
def test_the_index_gives_the_old_walks_lessons_in_its_order(run: list[Step]) -> None:
    with fresh_home() as home:
        _compare_on_every_outcome(home, run)
