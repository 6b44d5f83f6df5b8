"""DESIGN §4, one test per rule, each driven through the public API.

Every test opens a fresh ledger, sends commands (outcomes, proposals, edits, retirements,
environment changes, reconcile passes) and checks the state the rule promises: status,
confidence, clocks, evidence, scope, the supersede chain and the moves that explain them.
Commands carry an explicit ``occurred_at`` and reconcile passes an explicit ``now``, so
nothing depends on the wall clock; recall has no clock of its own and stamps the usage
clock with the ledger's, which is always later than the fixed dates used here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import pytest
from lesson_agent import AVOID, P1, P2, P3, PREFER, T0, TARGET, Agent, day, fail, ns, ok
from lessonledger.commands import (
    CommandError,
    CredentialError,
    EvidenceError,
    RetiredEvidenceError,
    StaleVersionError,
    open_ledger,
)
from lessonledger.projections.lessons import LessonRow
from lessonledger.projections.rules import Rules

# -- helpers ---------------------------------------------------------------------------

def near(value: float) -> Any:
    """``pytest.approx``, typed so it can stand inside a tuple compared with floats."""
    return pytest.approx(value)


def ids(rows: Iterable[LessonRow]) -> list[UUID]:
    return [row.lesson_id for row in rows]



@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    with open_ledger(tmp_path, sync=False) as ledger:
        yield Agent(ledger)


# -- evidence or it is a claim -----------------------------------------------------------


def test_without_evidence_a_lesson_is_a_claim_never_recalled_until_confirmed(
        agent: Agent) -> None:
    led = agent.ledger
    claim = agent.propose(P1, source="extractor")
    row = led.lesson(claim)
    assert (row.status, row.confidence, row.derivation, row.evidence) == (
        "claimed", near(0.3), "hypothesis", [])

    # The model's own lesson is a claim even when it cites a real, supporting outcome.
    witness = agent.outcome(P1, "s0", [ok()], when=T0)
    model = agent.propose(P1, source="model", kind="do", avoid_op="", evidence=[witness])
    assert (led.lesson(model).status, led.lesson(model).confidence,
            led.lesson(model).evidence) == ("claimed", near(0.3), [])
    assert led.lessons(P1, session="s1") == []

    # Exercised while nobody had it in front of them: still a claim.
    agent.outcome(P1, "s2", [ok()], when=day(1))
    assert led.lesson(claim).status == "claimed"
    assert led.lessons(P1, session="s2") == []

    # An attributed confirmation gives it evidence, and from then on it is recalled.
    confirming = agent.outcome(P1, "s3", [ok()], when=day(2), in_play=[claim])
    row = led.lesson(claim)
    assert (row.status, row.evidence, row.last_evidence_at) == (
        "trial", [confirming], ns(day(2)))
    assert row.confidence == near(0.45)
    assert ids(led.lessons(P1, session="s4")) == [claim]


# -- where lessons come from -------------------------------------------------------------


def test_lessons_come_from_the_loop_an_extractor_or_a_claim_in_that_order_of_trust(
        agent: Agent) -> None:
    led = agent.ledger
    outcome = agent.outcome(P1, "s1", [fail(error="no conftest"), ok()], when=T0)
    loop = led.lesson(agent.learned_from(outcome))
    assert (loop.kind, loop.avoid_op, loop.prefer_op, loop.target) == (
        "prefer", AVOID, PREFER, TARGET)
    assert (loop.source, loop.status, loop.derivation, loop.longevity) == (
        "loop", "trial", "direct", "ongoing")
    assert (loop.confidence, loop.evidence, loop.scope) == (near(0.5), [outcome], P1)
    assert PREFER in loop.text
    assert AVOID in loop.text

    # No mechanical preference without the whole signal on one target.
    for operations, passed in (
        ([ok(), fail()], True),                    # the success came first
        ([fail(), ok(target="docs")], True),       # on another target
        ([fail(), ok(AVOID)], True),               # the same operation, retried
        ([fail(), fail(PREFER)], True),            # nothing succeeded
    ):
        made = agent.loop_lessons(agent.outcome(P2, "s2", operations, when=T0, passed=passed))
        assert [i for i in made if led.lesson(i).kind == "prefer"] == []

    trace = agent.outcome(P1, "s1", [fail("make:test", "no rule")], when=T0, passed=False)
    extracted = agent.propose(P1, text="Avoid make:test", kind="avoid", avoid_op="make:test",
                              prefer_op="", evidence=[trace])
    claimed = agent.propose(P1, text="Avoid make:test", kind="avoid", avoid_op="make:test",
                            prefer_op="", evidence=[trace], source="model")
    ranked = [(led.lesson(i).source, led.lesson(i).status, led.lesson(i).confidence)
              for i in (loop.lesson_id, extracted, claimed)]
    assert ranked == [("loop", "trial", near(0.5)),
                      ("extractor", "trial", near(0.4)),
                      ("model", "claimed", near(0.3))]


# -- confidence ----------------------------------------------------------------------------


def test_confidence_rises_015_per_confirmation_falls_025_per_contradiction_within_0_1(
        agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    agent.confirm(P1, "s1", lid, when=day(1))
    agent.contradict(P1, "s1", lid, when=day(1))
    for i in range(5):
        agent.confirm(P1, "s1", lid, when=day(2 + i))
    for i in range(3):
        agent.contradict(P1, "s1", lid, when=day(8 + i))
    row = led.lesson(lid)
    steps = [(m.type, m.confidence) for m in row.moves]
    assert steps == [
        ("lesson.proposed", 0.5), ("lesson.confirmed", 0.65), ("lesson.contradicted", 0.4),
        ("lesson.confirmed", 0.55), ("lesson.confirmed", 0.7), ("lesson.confirmed", 0.85),
        ("lesson.confirmed", 1.0), ("lesson.confirmed", 1.0),       # clamped at 1
        ("lesson.contradicted", 0.75), ("lesson.contradicted", 0.5),
        ("lesson.contradicted", 0.25),
    ]
    # The figure is explained by its moves: every move names its outcome.
    assert all(m.outcome is not None for m in row.moves)

    # Two passes (the first is the one it was in play in) bring it to 0.23; a
    # contradiction then takes it to 0, not below, and out of the active set.
    agent.reconcile(day(12))
    agent.reconcile(day(13))
    assert led.lesson(lid).confidence == near(0.23)
    agent.contradict(P1, "s1", lid, when=day(14))
    row = led.lesson(lid)
    assert row.confidence == 0.0
    assert (row.status, row.reason) == ("superseded", "decayed")


def test_below_the_floor_a_lesson_is_superseded_by_decayed_and_kept_in_history(
        agent: Agent) -> None:
    led = agent.ledger
    trace = agent.outcome(P1, "s1", [fail("make:test", "no rule")], when=T0, passed=False)
    lid = agent.propose(P1, text="Avoid make:test", kind="avoid", avoid_op="make:test",
                        prefer_op="", evidence=[trace], longevity="durable")
    agent.reconcile(day(1))  # the pass it was proposed in: it was new, so in play
    for i in range(10):
        agent.reconcile(day(2 + i))
    row = led.lesson(lid)
    assert row.confidence == near(0.2)
    assert row.status == "trial", "at the floor is not below it"
    assert ids(led.lessons(P1, record=False)) == [lid]

    agent.reconcile(day(12))
    row = led.lesson(lid)
    assert (row.status, row.reason, row.confidence) == (
        "superseded", "decayed", near(0.18))
    assert row.evidence == [trace]
    assert (row.moves[-1].type, row.moves[-1].note) == ("lesson.superseded", "decayed")
    assert led.lessons(P1, record=False) == []
    assert ids(led.history(lid)) == [lid]

    # A contradiction that takes it under the floor supersedes it there and then.
    other = agent.propose(P1, text="Avoid make:lint", kind="avoid", avoid_op="make:test",
                          prefer_op="", target="lint",
                          evidence=[agent.outcome(P1, "s1", [fail("make:test", target="lint")],
                                                  when=day(13), passed=False)])
    agent.contradict(P1, "s2", other, when=day(14))
    row = led.lesson(other)
    assert (row.status, row.reason, row.confidence) == (
        "superseded", "decayed", near(0.15))
    assert led.lessons(P1, record=False) == []


# -- attribution ---------------------------------------------------------------------------


def test_attribution_is_scoped_by_operation_key_and_target(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s0")
    assert ids(led.lessons(P1, session="s1")) == [lid]  # in play for session s1 from now

    def moves() -> int:
        return len(led.lesson(lid).moves)

    untouched = moves()
    # In play, but never exercised: a failed web fetch, the same operations on another
    # target, a passing task made of other operations, a passing task with none at all.
    agent.outcome(P1, "s1", [fail("http:get", "HTTP 404", "web")], when=day(1), passed=False)
    agent.outcome(P1, "s1", [ok(AVOID, "docs"), fail(PREFER, target="docs")], when=day(1))
    agent.outcome(P1, "s1", [ok("ruff:check")], when=day(1))
    agent.outcome(P1, "s1", [], when=day(1))
    # Exercised, but not in play: another session never recalled it and nobody listed it,
    # and another project listing it cannot touch a project lesson that is not its own.
    agent.outcome(P1, "s2", [ok(AVOID)], when=day(1))
    agent.outcome(P2, "s1", [ok(AVOID)], when=day(1), in_play=[lid])
    assert moves() == untouched
    assert led.lesson(lid).confidence == near(0.5)

    recalled = agent.outcome(P1, "s1", [ok()], when=day(2))
    listed = agent.outcome(P1, "s3", [fail()], when=day(3), passed=False, in_play=[lid])
    row = led.lesson(lid)
    assert [(m.type, m.outcome) for m in row.moves[untouched:]] == [
        ("lesson.confirmed", recalled), ("lesson.confirmed", listed)]
    assert row.confidence == near(0.8)


# -- transient failures --------------------------------------------------------------------


def test_a_transient_failure_makes_a_tentative_lesson_only_the_avoided_operation_tests(
        agent: Agent) -> None:
    led = agent.ledger
    for i, error in enumerate(("read timed out", "connection reset by peer",
                               "connection refused", "rate limit exceeded",
                               "HTTP 503 Service Unavailable", "502 Bad Gateway")):
        row = led.lesson(agent.learn(P3, "s0", target=f"svc{i}", error=error))
        assert (row.longevity, row.derivation) == ("tentative", "hypothesis"), error
    assert led.lesson(agent.learn(P3, "s0", target="svc", error="404 not found")
                      ).longevity == "ongoing"

    lid = agent.learn(P1, "s1", error="connection reset by peer")
    # The detour succeeding, even with the lesson in front of the agent, proves nothing.
    led.lessons(P1, session="s2")
    agent.outcome(P1, "s2", [ok()], when=day(1))
    assert (led.lesson(lid).confidence, len(led.lesson(lid).moves)) == (near(0.5), 1)
    # The avoided operation failing again is evidence for it, in play or not.
    again = agent.outcome(P1, "s3", [fail(error="connection reset by peer")], when=day(2),
                          passed=False)
    row = led.lesson(lid)
    assert (row.confidence, row.evidence, row.last_evidence_at) == (
        near(0.65), [row.evidence[0], again], ns(day(2)))
    # Never promoted: a second project learning the same blip keeps its own lesson.
    twin = agent.learn(P2, "s5", error="timed out", when=day(2.5))
    assert (led.lesson(lid).scope, led.lesson(twin).scope) == (P1, P2)
    assert led.lesson(lid).status == led.lesson(twin).status == "trial"

    # Any later success of the avoided operation contradicts it, in play or not, and
    # refutes it: the failure it came from was a blip.
    agent.outcome(P1, "s4", [ok(AVOID)], when=day(3))
    row = led.lesson(lid)
    assert (row.confidence, row.status, row.reason) == (near(0.4), "superseded", "refuted")
    assert not [r for r in led.lessons(P1, record=False) if r.lesson_id == lid]

    # Never refuted, it ages out by its longevity: 30 days after its last evidence.
    agent.reconcile(day(32.4))
    assert led.lesson(twin).status == "trial"
    agent.reconcile(day(32.6))
    assert (led.lesson(twin).status, led.lesson(twin).reason) == ("expired", "expired")


def test_a_transient_looking_failure_is_no_evidence_about_a_settled_lesson(
        agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    led.lessons(P1, session="s2")
    # The preferred operation timing out, then working on a retry: neither wrong nor right.
    agent.outcome(P1, "s2", [fail(PREFER, "read timed out"), ok()], when=day(1))
    row = led.lesson(lid)
    assert (row.confidence, row.status, len(row.moves)) == (near(0.65), "trial", 2)
    # ... and a timeout of the avoided operation is not a confirmation either.
    led.lessons(P1, session="s3")
    agent.outcome(P1, "s3", [fail(AVOID, "connection reset by peer")], when=day(2),
                  passed=False)
    assert led.lesson(lid).confidence == near(0.65)


def test_a_blip_on_the_way_to_what_is_known_to_work_teaches_nothing(agent: Agent) -> None:
    led = agent.ledger
    # In one outcome: the trap fails for real, a third form blips, the way out works.
    met = agent.outcome(P1, "s1", [fail(), fail("tox", "503 Service Unavailable"), ok()])
    assert [led.lesson(i).avoid_op for i in agent.loop_lessons(met)] == [AVOID]
    # Later: a form blips and the form a settled lesson vouches for then works.
    later = agent.outcome(P1, "s2", [fail("tox", "ETIMEDOUT"), ok()], when=day(1))
    assert agent.loop_lessons(later) == []


def test_a_refuted_lesson_is_superseded_once(agent: Agent) -> None:
    led = agent.ledger
    blip = agent.learn(P1, "s1", error="read timed out")   # prefer PREFER over AVOID
    # The avoided operation works and the preferred one fails for good: the blip lesson is
    # refuted, and the outcome teaches the reverse; one supersede, not two.
    flipped = agent.outcome(P1, "s2", [fail(PREFER, "no tests ran"), ok(AVOID)], when=day(1))
    new = agent.learned_from(flipped)
    row = led.lesson(blip)
    assert (row.status, row.reason) == ("superseded", "refuted")
    assert [m.type for m in row.moves].count("lesson.superseded") == 1
    assert led.lesson(new).supersedes is None
    assert ids(led.lessons(P1, record=False)) == [new]


def test_a_tentative_lesson_the_same_structural_failure_then_shows_is_made_settled(
        agent: Agent) -> None:
    led = agent.ledger
    tentative = agent.learn(P1, "s1", error="connection refused")
    settled = agent.learn(P1, "s2", when=day(1))
    assert settled != tentative
    old, new = led.lesson(tentative), led.lesson(settled)
    assert (old.status, old.reason, old.superseded_by) == ("superseded", "replaced", settled)
    assert (new.longevity, new.derivation, new.supersedes) == ("ongoing", "direct", tentative)
    assert ids(led.lessons(P1, record=False)) == [settled]


# -- trial and trusted ---------------------------------------------------------------------


def test_a_lesson_is_trial_until_supported_in_three_distinct_sessions_then_trusted(
        agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")  # its own outcome is its first session's support
    agent.confirm(P1, "s1", lid, when=day(1))
    agent.confirm(P1, "s1", lid, when=day(2))
    assert (led.lesson(lid).status, led.lesson(lid).sessions) == ("trial", ["s1"])
    agent.confirm(P1, "s2", lid, when=day(3))
    # Recall shows what is on trial as such.
    assert [(r.lesson_id, r.status) for r in led.lessons(P1, session="s3")] == [(lid, "trial")]
    agent.confirm(P1, "s3", lid, when=day(4))
    row = led.lesson(lid)
    assert (row.status, sorted(row.sessions)) == ("trusted", ["s1", "s2", "s3"])
    assert [(r.lesson_id, r.status) for r in led.lessons(P1, session="s4")] == [
        (lid, "trusted")]


def test_clustered_contradictions_send_a_trusted_lesson_back_to_trial(agent: Agent) -> None:
    led = agent.ledger
    clustered = agent.learn(P1, "s1", target="tests")
    spaced = agent.learn(P1, "s1", target="lib")
    for lid in (clustered, spaced):
        agent.trusted(P1, lid, ["s2", "s3"], when=day(1))

    # clustered: contradicted, confirmed, contradicted: 2 of its last 3 attributions.
    agent.contradict(P1, "s4", clustered, when=day(2))
    assert led.lesson(clustered).status == "trusted"
    agent.confirm(P1, "s5", clustered, when=day(3))
    agent.contradict(P1, "s6", clustered, when=day(4))
    assert led.lesson(clustered).status == "trial"
    # Back on trial it needs three fresh sessions again.
    agent.confirm(P1, "s7", clustered, when=day(5))
    assert led.lesson(clustered).status == "trial"

    # spaced: contradicted, confirmed twice, contradicted: never 2 in the last 3.
    agent.contradict(P1, "s4", spaced, when=day(2))
    agent.confirm(P1, "s5", spaced, when=day(3))
    agent.confirm(P1, "s6", spaced, when=day(4))
    agent.contradict(P1, "s7", spaced, when=day(5))
    row = led.lesson(spaced)
    assert (row.status, row.confidence) == ("trusted", near(0.6))


# -- scopes ----------------------------------------------------------------------------------


def test_recall_never_returns_another_projects_lessons(agent: Agent) -> None:
    led = agent.ledger
    mine = agent.learn(P1, "s1", target="tests")
    theirs = agent.learn(P2, "s2", target="docs")
    assert ids(led.lessons(P1, session="s3")) == [mine]
    assert ids(led.lessons(P2, session="s3")) == [theirs]
    assert led.lessons(P3, session="s3") == []
    # Recalled in P1's session, it is in play there, yet an outcome of P2 never moves it.
    agent.outcome(P2, "s3", [ok(AVOID)], when=day(1))
    assert len(led.lesson(mine).moves) == 1


def test_an_equivalent_lesson_in_the_same_project_is_the_same_lesson(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    taught = led.lesson(lid).evidence[0]
    seen = agent.outcome(P1, "s2", [ok()], when=day(1))   # not in play: confirms nothing
    again = agent.propose(P1, text="Run pytest from the root, not tests/", evidence=[seen],
                          when=day(1))
    assert (led.lesson(again).status, led.lesson(again).superseded_by) == (
        "superseded", lid)
    row = led.lesson(lid)
    assert (row.evidence, sorted(row.sessions)) == ([taught, seen], ["s1", "s2"])
    assert row.confidence == near(0.65)
    assert ids(led.lessons(P1, record=False)) == [lid]


def test_a_second_project_learning_an_equivalent_lesson_promotes_it_to_global(
        agent: Agent) -> None:
    led = agent.ledger
    first = agent.learn(P1, "s1")
    unrelated = agent.learn(P1, "s1", target="docs")
    second = agent.learn(P2, "s2", when=day(1))
    one, two = led.lesson(first), led.lesson(second)
    assert (one.scope, one.status) == ("global", "trial")
    assert sorted(one.projects) == sorted([P1, P2])
    assert set(one.evidence) == set(two.evidence) | {one.evidence[0]}
    assert len(one.evidence) == 2
    assert (two.status, two.reason, two.superseded_by) == ("superseded", "replaced", first)
    assert ids(led.history(second)) == [second, first]
    assert led.lesson(unrelated).scope == P1

    # Recall: the global lesson in every project, never the superseded copy.
    assert ids(led.lessons(P2, session="r2")) == [first]
    assert ids(led.lessons(P3, session="r3")) == [first]
    assert set(ids(led.lessons(P1, session="r1"))) == {first, unrelated}

    # A third project meeting it confirms the global lesson instead of copying it, and
    # a lesson proposed there is absorbed into it: evidence and sessions merge.
    met = agent.outcome(P3, "s3", [fail(), ok()], when=day(2))
    assert agent.loop_lessons(met) == []
    row = led.lesson(first)
    assert (row.evidence[-1], row.scope, row.status) == (met, "global", "trusted")
    seen = agent.outcome(P3, "r3", [ok()], when=day(3))   # recalled in r3: confirms it
    confidence = led.lesson(first).confidence
    proposed = agent.propose(P3, evidence=[seen], when=day(3))
    assert (led.lesson(proposed).status, led.lesson(proposed).superseded_by) == (
        "superseded", first)
    row = led.lesson(first)
    assert row.evidence.count(seen) == 1
    assert row.confidence == confidence, "one outcome is one attribution"


def test_a_second_project_confirming_an_equivalent_claim_promotes_it_to_global(
        agent: Agent) -> None:
    led = agent.ledger
    first = agent.learn(P1, "s1")
    claim = agent.propose(P2, source="model", when=day(1))
    assert (led.lesson(first).scope, led.lesson(claim).status) == (P1, "claimed")
    agent.confirm(P2, "s2", claim, when=day(2))
    assert led.lesson(first).scope == "global"
    assert (led.lesson(claim).status, led.lesson(claim).superseded_by) == (
        "superseded", first)
    assert ids(led.lessons(P2, session="r2")) == [first]


def test_a_global_lesson_contradicted_from_a_third_project_returns_to_its_last_confirmer(
        agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    agent.learn(P2, "s2", when=day(1))
    assert led.lesson(lid).scope == "global"
    agent.confirm(P1, "s3", lid, when=day(2))
    agent.confirm(P2, "s4", lid, when=day(3))
    agent.contradict(P2, "s5", lid, when=day(4))   # from a project that knows it: stays
    assert led.lesson(lid).scope == "global"
    agent.confirm(P1, "s6", lid, when=day(5))      # P1 confirmed it last
    agent.contradict(P3, "s7", lid, when=day(6))
    row = led.lesson(lid)
    assert (row.scope, row.confidence) == (P1, near(0.45))
    assert [m.type for m in row.moves[-2:]] == ["lesson.contradicted", "lesson.demoted"]
    assert ids(led.lessons(P1, record=False)) == [lid]
    # P2, which supported it too, keeps a lesson of its own (issue 12, rule 2).
    kept = led.lessons(P2, record=False)
    assert [(r.scope, r.same_as, r.evidence[0]) for r in kept] == [
        (P2, row.same_as, row.evidence[1])]
    assert led.lessons(P3, record=False) == []


def test_a_demoted_lesson_is_never_promoted_again(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    agent.learn(P2, "s2", when=day(1))
    agent.contradict(P3, "s3", lid, when=day(2))
    assert led.lesson(lid).scope == P2
    # Another project learning it again: it is known not to hold everywhere.
    again = agent.learn(P3, "s4", when=day(3))
    assert (led.lesson(again).scope, led.lesson(again).active) == (P3, True)
    assert led.lesson(lid).scope == P2


def test_a_lesson_some_project_found_the_opposite_of_is_not_promoted(agent: Agent) -> None:
    led = agent.ledger
    # P3's own lesson says the opposite: in P3 the root is the wrong place to run from.
    opposite = agent.learn(P3, "s0", avoid=PREFER, prefer=AVOID, error="no tests ran")
    first = agent.learn(P1, "s1", when=day(1))
    second = agent.learn(P2, "s2", when=day(2))
    assert [led.lesson(i).scope for i in (first, second, opposite)] == [P1, P2, P3]


def test_a_projects_own_lesson_outranks_a_global_one_it_contradicts(agent: Agent) -> None:
    led = agent.ledger
    glob = agent.learn(P1, "s1")
    agent.learn(P2, "s2", when=day(1))
    for i in range(3):
        agent.confirm(P1, f"c{i}", glob, when=day(2 + i))
    own = agent.learn(P3, "s3", avoid=PREFER, prefer=AVOID, error="no tests ran",
                      when=day(6))
    assert led.lesson(glob).confidence > led.lesson(own).confidence
    shown = led.recall(P3, "run the tests", record=False)
    assert [(r.lesson_id, r.label) for r in shown.lessons] == [
        (own, "trial"), (glob, "contradicting")]
    check = led.check(P3, AVOID, TARGET, record=False)
    assert (check.supporting, check.opposing, check.overruled) == ([own], [], [glob])
    assert "overruled" in check.line
    # Elsewhere the global lesson is the belief, as before.
    assert led.check(P2, AVOID, TARGET, record=False).opposing == [glob]


# -- environment binding ---------------------------------------------------------------------


def test_a_changed_environment_component_drops_bound_lessons_to_trial(agent: Agent) -> None:
    led = agent.ledger
    bound = agent.learn(P1, "s1", fingerprint={"pytest": "7"})
    unbound = agent.learn(P1, "s1", target="lib")
    elsewhere = agent.learn(P2, "s1", target="docs", fingerprint={"pytest": "7"})
    assert led.lesson(bound).fingerprint == {"pytest": "7"}
    agent.trusted(P1, bound, ["s2", "s3"], when=day(1))
    agent.trusted(P1, unbound, ["s2", "s3"], when=day(1))
    agent.trusted(P2, elsewhere, ["s2", "s3"], when=day(1))

    head = led.log.head()
    led.declare_environment_change(key=agent.key(), scope=P1, component="pytest", new="7",
                                   occurred_at=day(2))
    assert led.lesson(bound).status == "trusted", "the same value is not a change"
    assert led.log.head() == head + 1

    led.declare_environment_change(key=agent.key(), scope=P1, component="pytest", new="8",
                                   occurred_at=day(2))
    row = led.lesson(bound)
    assert row.status == "trial"
    assert (row.moves[-1].type, row.moves[-1].note) == ("environment.changed", "pytest: 7 -> 8")
    assert led.lesson(unbound).status == "trusted"
    assert led.lesson(elsewhere).status == "trusted"

    # Trusted again under pytest 8, a repeated declaration of 8 changes nothing.
    agent.trusted(P1, bound, ["s4", "s5", "s6"], when=day(3))
    led.declare_environment_change(key=agent.key(), scope=P1, component="pytest", new="8",
                                   occurred_at=day(4))
    assert led.lesson(bound).status == "trusted"


# -- clocks ------------------------------------------------------------------------------------


def test_recall_moves_only_the_usage_clock_evidence_moves_the_evidence_clock(
        agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1", when=T0)
    before = led.lesson(lid)
    assert (before.last_evidence_at, before.last_used_at) == (ns(T0), 0)

    led.lessons(P1, session="s2")
    after = led.lesson(lid)
    assert after.last_used_at > ns(T0)
    assert before.last_used_at == 0, "a row a caller holds is a snapshot, not the view's"
    assert (after.last_evidence_at, after.confidence, after.evidence, len(after.moves)) == (
        before.last_evidence_at, before.confidence, before.evidence, len(before.moves))

    agent.confirm(P1, "s2", lid, when=day(5))
    confirmed = led.lesson(lid)
    assert confirmed.last_evidence_at == ns(day(5))
    assert confirmed.last_used_at == after.last_used_at
    agent.contradict(P1, "s3", lid, when=day(6))
    assert led.lesson(lid).last_evidence_at == ns(day(5))

    # A human correction is fresh evidence too.
    edited = led.edit_lesson(key=agent.key(), lesson_id=lid, text="Run pytest from the root",
                             occurred_at=day(7)).ids["lesson_id"]
    assert led.lesson(edited).last_evidence_at == ns(day(7))


def test_lessons_expire_by_longevity_without_fresh_evidence(agent: Agent) -> None:
    led = agent.ledger
    tentative = agent.learn(P1, "s1", target="net", error="timed out")
    ongoing = agent.learn(P1, "s1", target="a")
    refreshed = agent.learn(P1, "s1", target="b")
    trace = agent.outcome(P1, "s1", [fail("make:c", target="c"), fail("make:d", target="d")],
                          when=T0, passed=False)
    durable = agent.propose(P1, text="Avoid make:c", kind="avoid", avoid_op="make:c",
                            prefer_op="", target="c", longevity="durable", evidence=[trace])
    explicit = agent.propose(P1, text="Avoid make:d", kind="avoid", avoid_op="make:d",
                             prefer_op="", target="d", source="user", evidence=[trace])
    assert led.lesson(explicit).longevity == "explicit"
    agent.confirm(P1, "s2", refreshed, when=day(60))

    def active_after(when: datetime) -> set[UUID]:
        led.lessons(P1, session="recall")  # recall never extends expiry
        agent.reconcile(when)
        return set(ids(led.lessons(P1, record=False)))

    everything = {tentative, ongoing, refreshed, durable, explicit}
    assert active_after(day(29)) == everything
    assert active_after(day(31)) == everything - {tentative}
    assert (led.lesson(tentative).status, led.lesson(tentative).reason) == (
        "expired", "expired")
    assert active_after(day(89)) == everything - {tentative}
    assert active_after(day(91)) == {refreshed, durable, explicit}
    assert active_after(day(151)) == {durable, explicit}
    assert active_after(day(3650)) == {durable, explicit}


def test_an_unused_lesson_decays_002_per_pass_but_not_when_in_play(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    agent.reconcile(day(1))
    start = led.lesson(lid).confidence

    def after_pass(n: int) -> float:
        agent.reconcile(day(n))
        return led.lesson(lid).confidence

    assert after_pass(2) == near(start - 0.02)
    led.lessons(P1, session="s2")                            # recalled in between
    assert after_pass(3) == near(start - 0.02)
    assert after_pass(4) == near(start - 0.04)
    agent.outcome(P1, "s3", [ok("ruff:check")], when=day(4), in_play=[lid])   # listed
    assert after_pass(5) == near(start - 0.04)
    assert after_pass(6) == near(start - 0.06)
    decays = [m.note for m in led.lesson(lid).moves if m.type == "reconcile.passed"]
    assert decays == ["-0.02"] * 3


# -- caps --------------------------------------------------------------------------------------


def test_reconcile_supersedes_the_weakest_beyond_the_cap_per_project_and_global(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False, rules=Rules(cap=3)) as led:
        agent = Agent(led)
        local = [agent.learn(P1, "s1", target=f"t{i}", when=day(i)) for i in range(5)]
        agent.confirm(P1, "s2", local[0], when=day(6))  # the oldest, now the strongest
        shared = [agent.learn(P1, "s1", target=f"g{i}", when=day(i)) for i in range(4)]
        for i, lid in enumerate(shared):
            agent.learn(P2, "s3", target=f"g{i}", when=day(i))
            assert led.lesson(lid).scope == "global"
        mine = agent.learn(P2, "s3", target="own", when=day(1))
        claims = [agent.propose(P1, text=f"claim {i}", target=f"c{i}") for i in range(4)]

        led.lessons(P1, session="r")        # recalled: all in play, so no decay
        agent.reconcile(day(10))

        kept = {local[0], local[4], local[3]}
        for lid in local:
            row = led.lesson(lid)
            assert (row.status, row.reason) == (("trial", "") if lid in kept
                                                else ("superseded", "cap")), lid
        assert [led.lesson(g).reason for g in shared] == ["cap", "", "", ""]
        assert led.lesson(mine).status == "trial"            # P2's own scope is not full
        assert {led.lesson(c).status for c in claims} == {"claimed"}   # claims don't count
        assert set(ids(led.lessons(P1, record=False))) == kept | set(shared[1:])


def test_at_most_200_active_lessons_per_project_by_default(agent: Agent) -> None:
    led = agent.ledger
    lessons = [agent.learn(P1, "s1", target=f"t{i}", when=T0 + timedelta(minutes=i))
               for i in range(201)]
    led.lessons(P1, session="r")
    agent.reconcile(day(1))
    assert len(led.lessons(P1, record=False)) == 200
    assert (led.lesson(lessons[0]).status, led.lesson(lessons[0]).reason) == (
        "superseded", "cap")


# -- supersede, never delete -------------------------------------------------------------------


def test_an_edit_supersedes_the_old_lesson_and_history_walks_the_chain(agent: Agent) -> None:
    led = agent.ledger
    first = agent.learn(P1, "s1")
    agent.confirm(P1, "s2", first, when=day(1))
    original = led.lesson(first)
    second = led.edit_lesson(key=agent.key(), lesson_id=first, text="Run pytest from root",
                             expected_version=original.version,
                             occurred_at=day(2)).ids["lesson_id"]
    third = led.edit_lesson(key=agent.key(), lesson_id=second, text="pytest: use the root",
                            occurred_at=day(3)).ids["lesson_id"]

    old, new = led.lesson(first), led.lesson(third)
    assert (old.status, old.reason, old.superseded_by, old.text) == (
        "superseded", "replaced", second, original.text)
    assert (led.lesson(second).supersedes, led.lesson(second).superseded_by) == (first, third)
    assert (new.text, new.supersedes, new.evidence, new.confidence) == (
        "pytest: use the root", second, original.evidence, original.confidence)
    for lid in (first, second, third):
        assert ids(led.history(lid)) == [first, second, third]
    assert ids(led.lessons(P1, record=False)) == [third]

    # The chain never forks: a superseded lesson cannot be edited or retired again.
    head = led.log.head()
    with pytest.raises(CommandError):
        led.edit_lesson(key=agent.key(), lesson_id=first, text="a fork")
    with pytest.raises(CommandError):
        led.retire_lesson(key=agent.key(), lesson_id=second)
    assert led.log.head() == head
    assert ids(led.history(first)) == [first, second, third]


def test_a_retired_lesson_is_never_relearned_from_its_own_evidence(agent: Agent) -> None:
    led = agent.ledger
    observed = {"key": "outcome-1", "project": P1, "session": "s1", "passed": True,
                "operations": [fail(), msgspec.structs.replace(ok(), order=1)],
                "occurred_at": T0}
    outcome = led.observe_outcome(**observed).ids["outcome_id"]
    lid = agent.learned_from(outcome)
    later = agent.confirm(P1, "s2", lid, when=day(1))
    edited = led.edit_lesson(key=agent.key(), lesson_id=lid, text="Run pytest from root",
                             occurred_at=day(2)).ids["lesson_id"]
    led.retire_lesson(key=agent.key(), lesson_id=edited, reason="not how we work",
                      occurred_at=day(3))
    row = led.lesson(edited)
    assert (row.status, row.reason) == ("retired", "retired:user")
    assert led.lessons(P1, record=False) == []

    head = led.log.head()
    for evidence in ([outcome], [later], [outcome, later]):
        with pytest.raises(RetiredEvidenceError) as refused:
            agent.propose(P1, evidence=evidence)
        assert refused.value.retired == edited
    # The same outcome sent again writes nothing, so the loop cannot learn it twice.
    led.observe_outcome(**observed)
    assert led.log.head() == head
    # Listed and exercised, a retired lesson is not revived either.
    agent.outcome(P1, "s3", [ok()], when=day(4), in_play=[edited, lid])
    assert led.lesson(edited).moves == row.moves
    # Evidence beyond the retired lesson's is a new lesson.
    fresh = agent.outcome(P1, "s4", [ok()], when=day(5))
    assert led.lesson(agent.propose(P1, evidence=[outcome, fresh])).status == "trial"


def test_when_the_world_flips_every_lesson_the_outcome_refuted_is_replaced(
        agent: Agent) -> None:
    led = agent.ledger
    over_subdir = agent.learn(P1, "s1")
    over_tox = agent.learn(P1, "s2", avoid="tox", when=day(1))
    unrelated = agent.learn(P1, "s3", target="docs", when=day(2))
    led.lessons(P1, session="s4")
    # The root stops working and the subdirectory starts to: both lessons preferring the
    # root are contradicted by the same outcome, and both are replaced by what it shows.
    flipped = agent.outcome(P1, "s4", [fail(PREFER, "no tests ran"), ok(AVOID)], when=day(3))
    new = agent.learned_from(flipped)
    for old in (over_subdir, over_tox):
        row = led.lesson(old)
        assert (row.status, row.reason, row.superseded_by) == ("superseded", "replaced", new)
    assert led.lesson(new).supersedes == over_subdir
    assert set(ids(led.lessons(P1, record=False))) == {new, unrelated}


# -- refusals and retries ----------------------------------------------------------------------


def test_refused_commands_write_nothing_and_say_why(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    outcome = led.lesson(lid).evidence[0]
    version = led.lesson(lid).version
    led.edit_lesson(key=agent.key(), lesson_id=lid, text="Run pytest from root",
                    expected_version=version)
    current = led.lessons(P1, record=False)[0].lesson_id
    head = led.log.head()

    credentials = [
        ("Secret Keyword", "password=hunter2"),
        ("AWS Access Key", "use AKIAIOSFODNN7EXAMPLE for the bucket"),
        ("Private Key", "-----BEGIN RSA PRIVATE KEY-----"),
    ]
    for pattern, secret in credentials:
        attempts: list[Any] = [
            lambda s=secret: agent.propose(P1, text=s),
            lambda s=secret: agent.propose(P1, text="Prefer the root", avoid_op=f"curl {s}"),
            lambda s=secret: agent.outcome(P1, "s2", [fail(error=s)], when=T0),
            lambda s=secret: led.observe_outcome(key=agent.key(), project=P1, passed=True,
                                                 task=f"deploy with {s}"),
            lambda s=secret: led.edit_lesson(key=agent.key(), lesson_id=current, text=s),
            lambda s=secret: led.retire_lesson(key=agent.key(), lesson_id=current, reason=s),
        ]
        for attempt in attempts:
            with pytest.raises(CredentialError, match=pattern) as refused:
                attempt()
            assert refused.value.pattern == pattern

    with pytest.raises(EvidenceError, match="not an observed outcome"):
        agent.propose(P1, evidence=[UUID(int=42)])
    with pytest.raises(EvidenceError, match="does not show"):
        agent.propose(P1, kind="do", avoid_op="", prefer_op=AVOID, evidence=[outcome])
    with pytest.raises(EvidenceError):
        agent.propose(P2, evidence=[outcome])       # observed in another project
    # Read at ``version``, since edited by someone else: the reader's version is stale.
    with pytest.raises(StaleVersionError):
        led.edit_lesson(key=agent.key(), lesson_id=lid, text="x", expected_version=version)
    with pytest.raises(StaleVersionError):
        led.retire_lesson(key=agent.key(), lesson_id=lid, expected_version=version)

    assert led.log.head() == head
    assert led.lesson(current).status == "trial"


def test_a_command_retried_with_the_same_key_writes_nothing_new(agent: Agent) -> None:
    led = agent.ledger
    sent: list[tuple[Any, dict[str, Any]]] = [
        (led.observe_outcome, {"project": P1, "session": "s1", "passed": True,
                               "operations": [fail(), msgspec.structs.replace(ok(), order=1)],
                               "occurred_at": T0}),
        (led.propose_lesson, {"project": P1, "text": "Avoid make", "kind": "avoid",
                              "avoid_op": "make", "target": TARGET, "occurred_at": T0}),
        (led.declare_environment_change, {"scope": P1, "component": "pytest", "new": "8"}),
        (led.reconcile, {"now": day(1)}),
        (led.reconcile, {"now": day(2)}),
    ]
    for i, (command, fields) in enumerate(sent):
        first = command(key=f"retry-{i}", **fields)
        head, state = led.log.head(), led.view.dump()
        assert command(key=f"retry-{i}", **fields) == first
        assert (led.log.head(), led.view.dump()) == (head, state)

    lid = led.lessons(P1, record=False)[0].lesson_id
    decayed = led.lesson(lid).confidence
    assert decayed == near(0.48)    # one decaying pass, though reconcile ran twice per key
    edit = {"lesson_id": lid, "text": "Run pytest from root", "expected_version": 0}
    first = led.edit_lesson(key="retry-edit", **edit)
    assert led.edit_lesson(key="retry-edit", **edit) == first   # not a stale version


# -- issue 12: rules that hold on worlds the benchmark has not seen ------------------------


def test_a_target_that_went_fail_then_succeed_teaches_even_when_the_task_failed_elsewhere(
        agent: Agent) -> None:
    led = agent.ledger
    outcome = agent.outcome(P1, "s1", [fail(), ok(), fail("make", "no rule", "build")],
                            when=T0, passed=False)
    row = led.lesson(agent.learned_from(outcome))
    assert (row.kind, row.avoid_op, row.prefer_op, row.longevity) == (
        "prefer", AVOID, PREFER, "ongoing")
    assert led.check(P1, AVOID, TARGET, record=False).opposing == [row.lesson_id]
    # A target not finished teaches no preference, whatever went before on it.
    unfinished = agent.outcome(P2, "s2", [fail(), ok(), fail(PREFER, "no tests ran")],
                               when=T0, passed=False)
    assert [led.lesson(i).kind for i in agent.loop_lessons(unfinished)] == []


def test_a_flip_inside_a_failed_task_replaces_the_stale_lesson(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    agent.confirm(P1, "s2", lid, when=day(1))
    agent.confirm(P1, "s3", lid, when=day(2))
    assert led.lesson(lid).confidence == near(0.8)
    led.lessons(P1, session="s4")
    flipped = agent.outcome(P1, "s4", [fail(PREFER, "no tests ran"), ok(AVOID),
                                       fail("make", "no rule", "build")],
                            when=day(3), passed=False)
    new = agent.learned_from(flipped)
    old = led.lesson(lid)
    assert (old.status, old.reason, old.superseded_by) == ("superseded", "replaced", new)
    check = led.check(P1, AVOID, TARGET, record=False)
    assert (check.supporting, check.opposing) == ([new], [])


def test_a_global_lesson_contradicted_in_one_project_still_holds_where_it_was_learned(
        agent: Agent) -> None:
    led = agent.ledger
    glob = agent.learn(P1, "s1")
    agent.learn(P2, "s2", when=day(1))
    assert led.lesson(glob).scope == "global"
    assert led.check(P3, PREFER, TARGET, session="s3").supporting == [glob]
    flipped = agent.outcome(P3, "s3", [fail(PREFER, "no tests ran"), ok(AVOID)], when=day(2))
    new = led.lesson(agent.learned_from(flipped))
    assert (new.scope, new.avoid_op, new.prefer_op) == (P3, PREFER, AVOID)
    for project in (P1, P2):
        kept = [r for r in led.lessons(project, record=False) if r.target == TARGET]
        assert [(r.scope, r.avoid_op, r.prefer_op) for r in kept] == [
            (project, AVOID, PREFER)], project
    assert [r.lesson_id for r in led.lessons(P3, record=False)] == [new.lesson_id]
    # ... and when a project that supported it sees the flip, it stays global, overruled
    # there by the project's own lesson.
    other = agent.learn(P1, "t1", target="docs", when=day(3))
    agent.learn(P2, "t2", target="docs", when=day(4))
    assert led.lesson(other).scope == "global"
    led.lessons(P1, session="t3")
    turned = agent.outcome(P1, "t3", [fail(PREFER, "no docs", "docs"), ok(AVOID, "docs")],
                           when=day(5))
    own = agent.learned_from(turned)
    assert (led.lesson(other).scope, led.lesson(other).active) == ("global", True)
    assert led.check(P1, AVOID, "docs", record=False).overruled == [other]
    assert led.check(P1, AVOID, "docs", record=False).supporting == [own]
    assert led.check(P2, AVOID, "docs", record=False).opposing == [other]


def test_a_blip_then_a_lasting_failure_of_the_same_operation_makes_a_settled_lesson(
        agent: Agent) -> None:
    led = agent.ledger
    outcome = agent.outcome(P1, "s1", [
        fail("make", "ReadTimeout: read timed out", "build"),
        fail("make", "exit 2: no rule to make target", "build"),
        ok("ninja", "build")])
    row = led.lesson(agent.learned_from(outcome))
    assert (row.avoid_op, row.prefer_op, row.longevity, row.derivation) == (
        "make", "ninja", "ongoing", "direct")
    assert "no rule to make target" in row.text


def test_a_dead_end_teaches_an_avoid_lesson_that_one_success_takes_away(agent: Agent) -> None:
    led = agent.ledger
    outcome = agent.outcome(P1, "s1", [
        fail("deploy.sh", "missing env file", "deploy"),
        fail("helm", "chart.yaml missing", "deploy"),
        fail("helm", "503 Service Unavailable", "deploy")], passed=False)
    learned = [led.lesson(i) for i in agent.loop_lessons(outcome)]
    assert [(r.kind, r.avoid_op, r.prefer_op, r.confidence) for r in learned] == [
        ("avoid", "deploy.sh", "", near(0.4)), ("avoid", "helm", "", near(0.4))]
    assert led.check(P1, "helm", "deploy", record=False).opposing == [learned[1].lesson_id]
    # Never global: a second project's dead end stays its own.
    twin = agent.outcome(P2, "s2", [fail("kubectl", "no k8s/", "deploy"),
                                    fail("helm", "chart.yaml missing", "deploy")],
                         passed=False)
    assert {led.lesson(i).scope for i in agent.loop_lessons(twin)} == {P2}
    # A lone failure is no dead end: no alternative was tried.
    lone = agent.outcome(P3, "s2", [fail("helm", "chart.yaml missing", "deploy")],
                         passed=False)
    assert agent.loop_lessons(lone) == []
    # Every form failing alike says the target failed (a broken test), not the form.
    broken = agent.outcome(P1, "s3", [fail(AVOID, "FAILED test_cart - AssertionError"),
                                      fail(PREFER, "FAILED test_cart - AssertionError")],
                           passed=False)
    assert agent.loop_lessons(broken) == []
    # The operation working once is enough to take it away.
    led.lessons(P1, session="s4")
    agent.outcome(P1, "s4", [ok("helm", "deploy")], when=day(1))
    row = led.lesson(learned[1].lesson_id)
    assert (row.status, row.reason) == ("superseded", "decayed")


def test_a_user_stated_lesson_never_decays_and_leaves_only_when_contradicted_or_retired(
        agent: Agent) -> None:
    led = agent.ledger
    trace = agent.outcome(P1, "s1", [fail("make:test", "no rule")], when=T0, passed=False)
    lid = agent.propose(P1, text="Avoid make:test", kind="avoid", avoid_op="make:test",
                        prefer_op="", evidence=[trace], source="user")
    assert (led.lesson(lid).longevity, led.lesson(lid).confidence) == ("explicit", near(0.4))
    for i in range(12):
        agent.reconcile(day(1 + 7 * i))
    row = led.lesson(lid)
    assert (row.status, row.confidence) == ("trial", near(0.4))
    assert not [m for m in row.moves if m.type == "reconcile.passed"]
    # A contradiction still counts, and under the floor it leaves.
    agent.contradict(P1, "s2", lid, when=day(90))
    assert (led.lesson(lid).status, led.lesson(lid).reason) == ("superseded", "decayed")


class _FlakyEmbedder:
    """The default embedder behind a switch: down, every call raises ConnectionError."""

    def __init__(self) -> None:
        from lessonledger.projections.embedder import default_embedder
        self.inner = default_embedder()
        self.name, self.dim, self.down = self.inner.name, self.inner.dim, True

    def embed(self, texts: Any) -> Any:
        if self.down:
            msg = "embedding server refused the connection"
            raise ConnectionError(msg)
        return self.inner.embed(texts)


def test_a_failing_embedder_never_fails_a_committed_command_and_the_index_catches_up(
        tmp_path: Path) -> None:
    from lessonledger.commands import Ledger
    embedder = _FlakyEmbedder()
    led = Ledger(tmp_path, sync=False, embedder=embedder)
    try:
        agent = Agent(led)
        lid = agent.learn(P1, "s1")          # returns its receipt: written, and known to be
        assert led.lesson(lid).active
        shown = led.recall(P1, "run the tests", session="s2")
        assert [r.lesson_id for r in shown.lessons] == [lid]    # BM25 alone
        assert led.check(P1, AVOID, TARGET, record=False).opposing == [lid]
        assert lid not in led.recaller.index
        embedder.down = False
        led.recall(P1, "run the tests", session="s3")
        assert lid in led.recaller.index
        assert led.recaller.degraded == ""
    finally:
        led.close()


def test_every_form_failing_alike_is_no_evidence_about_which_form_is_right(
        agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    led.lessons(P1, session="s2")
    broken = "FAILED tests/test_cart.py::test_total - AssertionError: 41 != 42"
    agent.outcome(P1, "s2", [fail(PREFER, broken), fail(AVOID, broken), fail("tox", broken)],
                  when=day(1), passed=False)
    row = led.lesson(lid)
    assert (row.confidence, row.status, len(row.moves)) == (near(0.5), "trial", 1)


def test_a_blip_of_what_a_settled_lesson_vouches_for_teaches_nothing(agent: Agent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")                    # prefer PREFER over AVOID, settled
    led.lessons(P1, session="s2")
    later = agent.outcome(P1, "s2", [fail(PREFER, "HTTP 429 Too Many Requests"),
                                     ok("tox")], when=day(1))
    assert agent.loop_lessons(later) == []
    assert led.lesson(lid).confidence == near(0.5)


def test_an_outcome_under_another_fingerprint_drops_the_lessons_bound_to_the_old_one(
        agent: Agent) -> None:
    led = agent.ledger
    bound = agent.learn(P1, "s1", fingerprint={"tool": "1.0"})
    other = agent.learn(P2, "s1", target="docs", fingerprint={"tool": "1.0"})
    agent.trusted(P1, bound, ["s2", "s3"], when=day(1))
    agent.trusted(P2, other, ["s2", "s3"], when=day(1))
    # Not a change: the same value, or a fingerprint that does not name the component.
    agent.outcome(P1, "s4", [ok("ruff", "lint")], when=day(2), fingerprint={"tool": "1.0"})
    agent.outcome(P1, "s4", [ok("ruff", "lint")], when=day(2), fingerprint={"os": "linux"})
    assert led.lesson(bound).status == "trusted"
    agent.outcome(P1, "s5", [ok("ruff", "lint")], when=day(3), fingerprint={"tool": "2.0"})
    row = led.lesson(bound)
    assert (row.status, row.fingerprint) == ("trial", {"tool": "2.0"})
    assert (row.moves[-1].type, row.moves[-1].note) == ("environment.changed",
                                                        "tool: 1.0 -> 2.0")
    assert led.lesson(other).status == "trusted"     # another project's is its own
    head = led.log.head()
    agent.outcome(P1, "s6", [ok("ruff", "lint")], when=day(4), fingerprint={"tool": "2.0"})
    assert led.log.head() == head + 1, "bound to 2.0 now: nothing more to declare"


def test_the_rules_in_force_are_in_the_log_and_every_fold_uses_them(tmp_path: Path) -> None:
    from lessonledger.projections.lessons import LessonView
    from lessonledger.projections.rules import RULES_VERSION
    with open_ledger(tmp_path, sync=False, rules=Rules(confirm=0.3)) as led:
        agent = Agent(led)
        lid = agent.learn(P1, "s1")
        agent.confirm(P1, "s2", lid, when=day(1))
        assert led.lesson(lid).confidence == near(0.8)
        adopted = [r for r in led.log.scan() if r.envelope.type == "rules.adopted"]
        assert len(adopted) == 1
        assert adopted[0].envelope.position < led.lesson(lid).moves[0].position
        # Rebuilt by a view that knows nothing of the figures: the same view.
        rebuilt = LessonView()
        for record in led.log.scan():
            rebuilt.apply(record)
        assert rebuilt.dump() == led.view.dump()
        why = led.why(lid)
        assert [r.figures["confirm"] for r in why.rules] == [0.3]
        assert {s.rules_version for s in why.steps} == {RULES_VERSION}
        sent = agent._sent
    # Opened without rules: what the log says is in force stays in force.
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led, sent=sent)
        agent.confirm(P1, "s3", lid, when=day(2))
        assert led.lesson(lid).confidence == near(1.0)
        sent = agent._sent
    # Opened with other rules: adopted at the next write, recorded again.
    with open_ledger(tmp_path, sync=False, rules=Rules()) as led:
        agent = Agent(led, sent=sent)
        agent.contradict(P1, "s4", lid, when=day(3))
        assert led.lesson(lid).confidence == near(0.75)
        assert [r.figures["confirm"] for r in led.view.adoptions] == [0.3, 0.15]


def test_a_lasting_failure_of_what_a_lesson_prefers_puts_it_in_doubt_until_confirmed(
        agent: Agent) -> None:
    led = agent.ledger
    no_conf, no_rule = "Sphinx error: no conf.py (docs)", "make: *** No rule to make target"
    lid = agent.learn(P1, "s1", target="docs", avoid="sphinx", prefer="make:docs",
                      error=no_conf)
    agent.trusted(P1, lid, ["s2", "s3"], when=day(1))
    assert led.check(P1, "make:docs", "docs", record=False).supporting == [lid]
    # The flip, met while the form that now works only blipped: no pair to learn from.
    led.check(P1, "make:docs", "docs", session="s4")
    agent.outcome(P1, "s4", [fail("make:docs", no_rule, "docs"),
                             fail("sphinx", "503 Service Unavailable", "docs")],
                  when=day(3), passed=False)
    row = led.lesson(lid)
    assert (row.active, row.doubted) == (True, [P1])
    for op in ("make:docs", "sphinx"):
        check = led.check(P1, op, "docs", record=False)
        assert (check.supporting, check.opposing, check.doubted) == ([], [], [lid]), op
    assert "in doubt here" in led.check(P1, "make:docs", "docs", record=False).line
    # A dead end seen next is the belief there; the doubted lesson contradicts it.
    end = agent.outcome(P1, "s5", [fail("make:docs", no_rule, "docs"),
                                   fail("mkdocs", "no mkdocs.yml", "docs")],
                        when=day(4), passed=False)
    avoid = next(i for i in agent.loop_lessons(end) if led.lesson(i).avoid_op == "make:docs")
    assert led.lesson(avoid).confidence < led.lesson(lid).confidence
    shown = {r.lesson_id: r.label for r in led.recall(P1, "build the docs", record=False).lessons}
    assert (shown[avoid], shown[lid]) == ("trial", "contradicting")   # the belief, on trial
    # Another project's view of it is untouched. What it avoids failing confirms it here,
    # but the doubt stands until what it prefers works here again.
    assert led.check(P2, "make:docs", "docs", record=False).doubted == []
    led.check(P1, "make:docs", "docs", session="s6")
    agent.outcome(P1, "s6", [fail("sphinx", no_conf, "docs"),
                             fail("make:docs", "503 Service Unavailable", "docs")], when=day(5))
    assert (led.lesson(lid).doubted, led.lesson(lid).moves[-1].type) == (
        [P1], "lesson.confirmed")
    led.check(P1, "make:docs", "docs", session="s6")
    agent.outcome(P1, "s6", [ok("make:docs", "docs")], when=day(5))
    assert led.lesson(lid).doubted == []
    assert led.check(P1, "make:docs", "docs", record=False).supporting == [lid]


def test_a_global_lesson_decaying_under_its_supporters_stays_where_it_still_holds(
        agent: Agent) -> None:
    led = agent.ledger
    p4 = "d" * 32
    old = {"toolchain": "1"}
    glob = agent.learn(P1, "s1", fingerprint=old)
    agent.learn(P2, "s2", when=day(0.1), fingerprint=old)
    for i, project in enumerate((P3, p4)):      # the same pair, confirming the global one
        agent.outcome(project, f"s{i + 3}", [fail(), ok()], when=day(0.2 + 0.1 * i),
                      fingerprint=old)
    assert led.lesson(glob).scope == "global"
    p5 = "f" * 32
    agent.outcome(p5, "s5", [fail(), ok()], when=day(0.4), fingerprint=old)
    for n, project in enumerate((P1, P2, P3, p4, p5)):
        led.check(project, PREFER, TARGET, session=f"t{n}")
        agent.outcome(project, f"t{n}", [ok(PREFER)], when=day(1), fingerprint=old)
    # Three projects flip (what it prefers fails there, the other form works) while p4,
    # which nothing changed for, keeps confirming it: contradicted under the floor.
    for d in range(2, 6):
        for n, project in enumerate((P1, P2, P3)):
            led.check(project, PREFER, TARGET, session=f"u{d}{n}")
            agent.outcome(project, f"u{d}{n}", [ok(AVOID)], when=day(d))
        led.check(p4, PREFER, TARGET, session=f"v{d}")
        agent.outcome(p4, f"v{d}", [ok(PREFER)], when=day(d + 0.5), fingerprint=old)
        if not led.lesson(glob).active:
            break
    row = led.lesson(glob)
    assert (row.status, row.reason) == ("superseded", "decayed")
    kept = [r for r in led.lessons(p4, record=False) if r.target == TARGET]
    assert [(r.scope, r.avoid_op, r.prefer_op) for r in kept] == [(p4, AVOID, PREFER)]
    assert {led.view.outcomes[o].project for o in kept[0].evidence} == {p4}
    assert led.check(p4, PREFER, TARGET, record=False).supporting == [kept[0].lesson_id]
    # p5 supported it too but has not used it since the contradictions began: the change
    # may reach it as well, so it keeps nothing.
    assert [r for r in led.lessons(p5, record=False) if r.target == TARGET] == []
    # Known not to hold everywhere now: a second project learning it again stays local.
    again = agent.learn(P1, "w1", when=day(9), fingerprint=old)
    assert led.lesson(again).scope == P1


def test_a_global_lesson_learned_under_another_fingerprint_says_nothing_there(
        agent: Agent) -> None:
    led = agent.ledger
    new, old = {"toolchain": "2"}, {"toolchain": "1"}
    glob = agent.learn(P1, "s1", fingerprint=new)
    agent.learn(P2, "s2", when=day(1), fingerprint=new)
    assert led.lesson(glob).scope == "global"
    assert led.check(P3, PREFER, TARGET, record=False).supporting == [glob]
    agent.outcome(P3, "s3", [ok("ruff", "lint")], when=day(2), fingerprint=old)
    check = led.check(P3, PREFER, TARGET, record=False)
    assert (check.supporting, check.opposing, check.overruled) == ([], [], [])
    assert led.recall(P3, "run the tests", record=False).lessons == []
    # Where it was learned, and where the project reports the same or nothing: it holds.
    assert led.check(P1, PREFER, TARGET, record=False).supporting == [glob]
    assert led.check("e" * 32, PREFER, TARGET, record=False).supporting == [glob]
    agent.outcome(P3, "s4", [ok("ruff", "lint")], when=day(3), fingerprint=new)
    assert led.check(P3, PREFER, TARGET, record=False).supporting == [glob]


def test_a_transient_looking_error_that_recurs_word_for_word_in_three_sessions_is_lasting(
        agent: Agent) -> None:
    led = agent.ledger
    timed_out = "tox: py: FAIL code 1 (commands timed out after 600s)"
    lid = agent.learn(P1, "s1", prefer="tox")
    agent.trusted(P1, lid, ["s2", "s3"], when=day(1))
    for n in range(2):                    # a blip, twice: no evidence
        led.check(P1, "tox", TARGET, session=f"t{n}")
        agent.outcome(P1, f"t{n}", [fail("tox", timed_out), fail("tox", timed_out)],
                      when=day(2 + n), passed=False)
        assert (led.lesson(lid).confidence, led.lesson(lid).doubted) == (near(0.8), [])
    # The third session running with that error, and tox never working: it is lasting.
    led.check(P1, "tox", TARGET, session="t2")
    agent.outcome(P1, "t2", [fail("tox", timed_out), fail("tox", timed_out)],
                  when=day(4), passed=False)
    row = led.lesson(lid)
    assert (row.confidence, row.doubted) == (near(0.55), [P1])
    # ... and teaches a settled lesson, not a tentative one.
    led.check(P1, "tox", TARGET, session="t3")
    turned = agent.outcome(P1, "t3", [fail("tox", timed_out), ok(AVOID)], when=day(5))
    new = led.lesson(agent.learned_from(turned))
    assert (new.avoid_op, new.prefer_op, new.longevity) == ("tox", AVOID, "ongoing")
    # Once it works, the run is over: the same error next time is a blip again.
    other = agent.learn(P2, "u1", prefer="tox")
    for n, ops in enumerate([[fail("tox", timed_out)], [fail("tox", timed_out)],
                             [ok("tox")], [fail("tox", timed_out)]]):
        led.check(P2, "tox", TARGET, session=f"u{n + 2}")
        agent.outcome(P2, f"u{n + 2}", ops, when=day(6 + n), passed=ops[0].ok)
    assert led.lesson(other).doubted == []
