"""The trap world, its agents and its scoring; seed 000's scenario 2; issue 5's figures.

The world is checked for what the benchmark's figures mean to rest on (determinism,
shared and local traps, flips, blips that look like blips); the scoring on worlds built
by hand, where the right figure is known; and the default world with ``--repeats 5``
against the figures issue 5 names. The last is a behavioural check of a deterministic
simulation (the same seeds give the same run), not a timing.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lessonledger.commands import open_ledger
from lessonledger.ledger.verify import verify
from lessonledger.ops.bench.trapworld import (
    BROKEN_ERROR,
    FAMILIES,
    FORMS,
    TRANSIENT_ERRORS,
    Truth,
    World,
    WorldConfig,
    family_config,
)
from lessonledger.ops.bench.trapworld_agents import Advice, Agent, MemoryAgent, Tried
from lessonledger.ops.bench.trapworld_bench import (
    FAMILY_TARGETS,
    METRICS,
    START,
    Tally,
    run,
    run_arm,
    work_task,
)
from lessonledger.ops.cli import main
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.rules import looks_transient

PROJECT_A = "a" * 32


def hand_made(truths: dict[str, Truth], *, sessions: int = 6, noise: float = 0.0,
              projects: tuple[str, ...] = (PROJECT_A,)) -> World:
    """A world with the given targets in every project, every task touching all of them."""
    config = WorldConfig(projects=len(projects), targets=len(truths), sessions=sessions,
                         steps=len(truths), noise=noise)
    world = World(config, list(projects), {p: tuple(sorted(truths)) for p in projects})
    world.truth = {(p, kind): truth for p in projects for kind, truth in truths.items()}
    return world


# -- the world -----------------------------------------------------------------------------


def test_a_seed_fixes_the_world_and_its_luck() -> None:
    one, two = World.generate(WorldConfig(seed=3)), World.generate(WorldConfig(seed=3))
    assert (one.projects, one.kinds, one.truth) == (two.projects, two.kinds, two.truth)
    project, kind = next(iter(one.truth))
    good = min(one.works(project, kind, 0))
    luck = [one.attempt(project, kind, good, 0, nth) for nth in range(400)]
    assert luck == [two.attempt(project, kind, good, 0, nth) for nth in range(400)]
    assert 5 < sum(not ok for ok, _ in luck) < 40, "about 5% of working attempts blip"
    other = World.generate(WorldConfig(seed=4))
    assert (other.projects, other.truth) != (one.projects, one.truth)


def test_shared_traps_are_the_same_everywhere_and_local_ways_out_are_never_shared() -> None:
    world = World.generate(WorldConfig(projects=30))
    for kind in FORMS:
        truths = [t for (p, k), t in world.truth.items() if k == kind]
        if kind in world.shared:
            assert len(set(truths)) == 1, kind
            assert truths[0].trap, kind
        else:
            ways_out = [min(t.before) for t in truths if t.trap]
            assert len(ways_out) == len(set(ways_out)), kind
    flipped = [t for t in world.truth.values() if t.flips]
    assert flipped, "some traps flip"
    for truth in flipped:
        assert truth.trap
        assert 0 in truth.after
        assert not (truth.before - {0}) <= truth.after


def test_blips_look_transient_to_the_ledger_and_traps_do_not() -> None:
    assert all(looks_transient(error) for error in TRANSIENT_ERRORS)
    structural = [error for forms in FORMS.values() for _, error in forms]
    assert not [error for error in structural if looks_transient(error)]


def test_the_default_family_is_the_default_world() -> None:
    assert World.generate(family_config(WorldConfig(seed=2), "default")).truth == \
        World.generate(WorldConfig(seed=2)).truth


def test_each_world_family_has_what_it_is_named_for() -> None:
    def world(family: str) -> World:
        return World.generate(family_config(WorldConfig(seed=1, projects=20), family))

    staggered = world("per-project-flips")
    for kind in staggered.shared:
        truths = [t for (p, k), t in staggered.truth.items() if k == kind]
        assert {t.flips for t in truths} == {False, True}, kind  # one project at a time
        assert len({t.day for t in truths if t.flips}) > 1 or sum(t.flips for t in truths) == 1

    failing = world("failing-tasks")
    project = failing.projects[0]
    broken = [(day, failing.broken(project, day)) for day in range(40)]
    days = [(day, kind) for day, kind in broken if kind]
    assert 8 < len(days) < 28
    for day, kind in days:
        assert kind in failing.task(project, day).kinds
        assert {failing.attempt(project, kind, f, day, f)[1] for f in range(len(FORMS[kind]))
                } == {BROKEN_ERROR}
    assert not looks_transient(BROKEN_ERROR)

    blips = world("transient-then-lasting")
    assert blips.config.retry_blips
    traps = [(p, k) for (p, k), t in blips.truth.items() if t.trap]
    firsts = [blips.attempt(p, k, 0, 0, 0)[1] for p, k in traps]
    assert 0.2 < sum(looks_transient(e) for e in firsts) / len(firsts) < 0.8
    assert not any(looks_transient(blips.attempt(p, k, 0, 0, 1, again=1)[1]) for p, k in traps)

    dead = world("dead-ends")
    assert [key for key, t in dead.truth.items() if not t.before and not t.after]

    prints = world("fingerprints")
    assert prints.upgraded
    for project, day in prints.upgraded.items():
        assert prints.fingerprint(project, day - 1) == {"toolchain": "1"}
        assert prints.fingerprint(project, day) == {"toolchain": "2"}
        shared = [t for (p, k), t in prints.truth.items() if p == project
                  and k in prints.shared]
        assert all(t.flips and t.day == day for t in shared)
    calm = [p for p in prints.projects if p not in prints.upgraded]
    assert not [t for (p, k), t in prints.truth.items() if p in calm and k in prints.shared
                and t.flips]


def test_an_agent_leaves_a_dead_end_it_knows_and_a_target_whose_forms_fail_alike(
        tmp_path: Path) -> None:
    world = hand_made({"deploy": Truth(frozenset(), frozenset())}, sessions=3)
    figures = run_arm(world, "memory", tmp_path / "memory")
    # The first session tries every form twice; after that the avoid lessons say leave it.
    assert figures["steps_per_task"] == pytest.approx(2 * len(FORMS["deploy"]) / 3)
    assert figures["repeat_error_rate"] == 0.0
    tried = [Tried(1, False, BROKEN_ERROR), Tried(2, False, BROKEN_ERROR)]
    with open_ledger(tmp_path / "off", sync=False) as ledger:
        assert Agent(ledger).next("tests", tried) == (-1, [])


# -- seed 000, scenario 2 -----------------------------------------------------------------


def test_scenario_2_a_non_obvious_route_learned_in_a_is_used_first_in_b(tmp_path: Path) -> None:
    """Session A finds the helper script after the usual ways fail; session B, a
    different task touching the same target, runs the script on its first attempt.
    Without memory, B starts from habit again."""
    script = len(FORMS["build"]) - 1
    assert FORMS["build"][script][0] == "scripts/build.sh"
    world = hand_made({"build": Truth(frozenset({script}), frozenset({script}))})
    assert world.task(PROJECT_A, 0).title != world.task(PROJECT_A, 1).title
    with open_ledger(tmp_path / "memory", sync=False) as ledger:
        agent = MemoryAgent(ledger)
        a, _ = work_task(world, agent, PROJECT_A, 0, "A")
        assert [o.ok for o in a] == [False] * script + [True]
        agent.end(world.task(PROJECT_A, 0), a, True, _when(0))
        b, passed = work_task(world, agent, PROJECT_A, 1, "B")
        assert passed
        assert [(o.op, o.ok) for o in b] == [("scripts/build.sh", True)]
        # The lesson came to B through recall, and B's outcome confirmed it.
        agent.end(world.task(PROJECT_A, 1), b, True, _when(1))
        (lesson, *_) = ledger.lessons(PROJECT_A, record=False)
        assert lesson.prefer_op == "scripts/build.sh"
        assert len(lesson.evidence) >= 2
    with open_ledger(tmp_path / "off", sync=False) as ledger:
        off = Agent(ledger)
        work_task(world, off, PROJECT_A, 0, "A")
        b, _ = work_task(world, off, PROJECT_A, 1, "B")
        assert b[0].op == FORMS["build"][0][0]
        assert not b[0].ok


def _when(day: int) -> datetime:
    return START + timedelta(days=day)


# -- the scoring -----------------------------------------------------------------------------


def test_without_memory_every_seen_trap_is_hit_again_and_with_it_none_is(
        tmp_path: Path) -> None:
    world = hand_made({"tests": Truth(frozenset({1}), frozenset({1})),
                       "lint": Truth(frozenset({0}), frozenset({0}))})
    off = run_arm(world, "off", tmp_path / "off")
    memory = run_arm(world, "memory", tmp_path / "memory")
    # Six sessions on a trap: the first sees it, the five after are chances to repeat it.
    assert off["repeat_error_rate"] == 1.0
    assert off["steps_per_task"] == pytest.approx(3.0)
    assert off["first_attempt_success"] == pytest.approx(6 / 12)
    assert memory["repeat_error_rate"] == 0.0
    assert memory["steps_per_task"] == pytest.approx((3 + 5 * 2) / 6)
    assert memory["first_attempt_success"] == pytest.approx(11 / 12)
    assert (off["leakage_rate"], memory["leakage_rate"]) == (None, 0.0)


def test_a_flip_is_recovered_from_and_the_stale_lesson_is_not_carried(tmp_path: Path) -> None:
    world = hand_made({"tests": Truth(frozenset({1}), frozenset({0}))}, sessions=8)
    figures = run_arm(world, "memory", tmp_path / "memory")
    # Day 4 follows the lesson into the flipped trap once; from day 5 the new one holds.
    assert figures["sessions_to_recover"] == 1.0
    assert figures["stale_carry_rate"] == 0.0
    assert figures["repeat_error_rate"] == 0.0


def test_advice_learned_elsewhere_and_wrong_here_counts_as_leakage() -> None:
    world = hand_made({"tests": Truth(frozenset({1}), frozenset({1}))},
                      projects=(PROJECT_A, "b" * 32))
    world.truth["b" * 32, "tests"] = Truth(frozenset({2}), frozenset({2}))
    tally = Tally(world)
    elsewhere = Advice("lesson", (PROJECT_A,), 1, 0)
    tally.step("b" * 32, "tests", 0, [Tried(1, False, "x"), Tried(2, True, "")], [elsewhere])
    tally.step(PROJECT_A, "tests", 0, [Tried(1, True, "")], [elsewhere])
    assert tally.figures()["leakage_rate"] == 0.5


# -- the benchmark ---------------------------------------------------------------------------


def test_the_default_world_meets_issue_5s_figures() -> None:
    result = run(WorldConfig(), repeats=5)
    arms = result["arms"]
    assert arms["memory"]["repeat_error_rate"] <= 0.05
    assert arms["off"]["repeat_error_rate"] >= 0.6
    assert arms["memory"]["stale_carry_rate"] <= 0.05
    assert arms["memory"]["leakage_rate"] <= 0.01
    assert arms["memory"]["transient_lessons_active_rate"] <= 0.05
    assert arms["memory"]["steps_per_task"] < arms["last_error"]["steps_per_task"]
    assert all(result["met"].values()), result["met"]
    # The runs exercised what the figures are about.
    assert arms["memory"]["transient_lessons"] > 0
    assert arms["memory"]["lessons_global"] > 0
    assert arms["last_error"]["transient_lessons"] > 0


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "default"])
def test_every_world_family_meets_issue_12s_figures(family: str) -> None:
    result = run(WorldConfig(), repeats=5, world=family)
    assert result["world"] == family
    assert set(result["met"]) == {*FAMILY_TARGETS,
                                  "memory.steps_per_task < last_error.steps_per_task"}
    assert all(result["met"].values()), (family, result["met"])


def test_cli_world_all_prints_one_object_per_family_and_a_summary(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "trapworld", "--world", "all", "--projects", "3", "--sessions",
                 "4", "--repeats", "1", "--json"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line.get("world") for line in lines] == [*FAMILIES, None]
    assert set(lines[-1]["summary"]) == set(FAMILIES)
    assert isinstance(lines[-1]["met"], bool)


def test_cli_prints_one_json_object_with_every_arm_and_figure(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "trapworld", "--projects", "3", "--sessions", "4", "--repeats",
                 "2", "--seed", "7", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["arms"]) == {"memory", "off", "last_error"}
    for arm, figures in result["arms"].items():
        assert set(METRICS) <= set(figures), arm
    assert result["config"]["repeats"] == 2
    assert result["config"]["seed"] == 7


@pytest.mark.parametrize("args", [["--noise", "1.5"], ["--repeats", "0"], ["--seed", "x"]])
def test_cli_refuses_bad_options_with_exit_code_2(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "trapworld", *args])
    assert exit_.value.code == 2
    assert "--help" in capsys.readouterr().err


# -- the homes it leaves ----------------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), projects=st.integers(2, 4),
       noise=st.sampled_from([0.0, 0.1, 0.3]), flip_rate=st.sampled_from([0.0, 0.5, 1.0]))
def test_a_trap_world_home_rebuilds_to_the_view_kept_while_it_ran(
        seed: int, projects: int, noise: float, flip_rate: float) -> None:
    """Every rule the policies apply (blips, refutations, flips, promotion, demotion,
    reconcile) leaves a log that folds from position 0 to the view kept incrementally."""
    config = WorldConfig(seed=seed, projects=projects, targets=4, sessions=10, steps=2,
                         noise=noise, flip_rate=flip_rate)
    with tempfile.TemporaryDirectory() as home:
        run_arm(World.generate(config), "memory", Path(home))
        with open_ledger(home, sync=False) as ledger:
            kept = ledger.view.dump()
            rebuilt = LessonView()
            for record in ledger.log.scan():
                rebuilt.apply(record)
            assert rebuilt.dump() == kept
            assert verify(ledger.log).ok
