"""Recall, check and why through the Python API (DESIGN §4 "Recall", §5 ``--as-of``).

One test per rule the issue asks to be shown: no lesson from another project ever;
claimed (and superseded, retired) lessons never recalled; trial labels; the 5-lesson and
300-token caps; contradicting lessons shown together; the usage clock moves on recall
and the evidence clock does not; ``as_of`` answers equal a fresh replay up to that
position — by example, and as a hypothesis property over random command sequences.

Commands carry fixed dates in 2024, so a lesson's evidence recency (``exp(-days/30)``,
weighted 0.1) is below 1e-8 whenever a test asks: an answer given live (now = the wall
clock) and the same answer replayed (now = the ledger time of the position) then agree
to the last rounded digit, and any drift would be a real difference.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from lesson_agent import AVOID, P1, P2, P3, PREFER, T0, TARGET, Agent, day, fail, ok
from lessonledger.commands import (
    CommandError,
    Ledger,
    UnknownLessonError,
    open_ledger,
)
from lessonledger.commands.audit import Why
from lessonledger.commands.recall import Check
from lessonledger.ledger.events import LessonRecalled, decode_event
from lessonledger.ledger.log import EventLog
from lessonledger.projections.embedder import default_embedder
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.recall import MAX_LESSONS, MAX_TOKENS, Recall, count_tokens

# -- helpers ---------------------------------------------------------------------------

def shown(result: Recall) -> list[UUID]:
    return [r.lesson_id for r in result.lessons]


def ranked(result: Recall) -> list[UUID]:
    return [r.lesson_id for r in result.ranked]


class RecallAgent(Agent):
    """The shared agent, plus lessons made in bulk."""

    def do_lessons(self, project: str, texts: Sequence[str], *, when: datetime = T0,
                   tool: str = "tool") -> list[UUID]:
        """One ``do tool-i on t-i`` lesson per text, all backed by one observed outcome."""
        witness = self.outcome(project, "w", [ok(f"{tool}-{i}", f"t-{i}")
                                              for i in range(len(texts))], when=when)
        return [self.propose(project, text=text, kind="do", avoid_op="",
                             prefer_op=f"{tool}-{i}", target=f"t-{i}", evidence=[witness],
                             when=when)
                for i, text in enumerate(texts)]


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[RecallAgent]:
    with open_ledger(tmp_path / "home", sync=False) as ledger:
        yield RecallAgent(ledger)


def fold(log: EventLog, stop: int) -> LessonView:
    """A brand-new view folded from position 1 to ``stop``: a fresh replay, no policies."""
    view = LessonView()
    for record in log.scan(1, stop):
        view.apply(record)
    return view


def recalled_events(led: Ledger, start: int = 1) -> list[tuple[LessonRecalled, str, str]]:
    """Every ``LessonRecalled`` from ``start`` on, with its session and actor.

    Read from the log itself, after committing the records the ledger still has queued.
    """
    led.flush()
    found = []
    for record in led.log.read(start, types=["lesson.recalled"]):
        assert record.payload is not None
        event = decode_event(record.payload)
        assert isinstance(event, LessonRecalled)
        found.append((event, record.envelope.session, record.envelope.actor))
    return found


def answer(result: Recall) -> tuple[Any, ...]:
    """All of a recall answer but the float figures, which :func:`figures` compares."""
    return (result.project, result.query, result.section, result.tokens,
            [(r.lesson_id, r.label, r.contradicts, r.line, r.tokens, r.bm25_rank,
              r.vector_rank, r.relevance, r.confidence) for r in result.lessons],
            [(r.lesson_id, r.label, r.contradicts, r.bm25_rank, r.vector_rank, r.relevance,
              r.confidence) for r in result.ranked])


def figures(result: Recall) -> list[float]:
    return [r.score for r in result.ranked]


def assert_same_recall(got: Recall, expected: Recall) -> None:
    assert answer(got) == answer(expected)
    assert figures(got) == pytest.approx(figures(expected), abs=1e-8)


def story(why: Why) -> tuple[Any, ...]:
    verdict = why.recall
    return (why.lesson, why.steps, None if verdict is None else (
        verdict.project, verdict.query, verdict.shown, verdict.place,
        verdict.reason.split(" with score")[0].split(" (score")[0]))


# -- no lesson from another project, ever ------------------------------------------------


def test_recall_and_check_never_show_another_projects_lessons(agent: RecallAgent) -> None:
    led = agent.ledger
    mine = agent.learn(P1, "s1")
    theirs = agent.learn(P2, "s2", target="docs", avoid="sphinx:html", prefer="mkdocs:build")
    # Both projects learn the same build lesson: it is promoted to one global lesson.
    shared = agent.learn(P1, "s1", target="build", avoid="make", prefer="ninja")
    agent.learn(P2, "s2", target="build", avoid="make", prefer="ninja", when=day(1))
    assert (led.lesson(mine).scope, led.lesson(theirs).scope, led.lesson(shared).scope) == (
        P1, P2, "global")

    mine_or_global = {P1: {mine, shared}, P2: {theirs, shared}, P3: {shared}}
    for query in ("pytest root tests", "sphinx mkdocs docs", "make ninja build",
                  "pytest sphinx mkdocs make ninja", ""):
        for project, allowed in mine_or_global.items():
            result = led.recall(project, query, session=f"{project[:1]}-{query[:5]}")
            assert set(ranked(result)) == allowed, (project, query)
            assert set(shown(result)) <= allowed
    # Asked in words that only another project's lesson matches, recall still keeps out.
    result = led.recall(P2, "Prefer pytest:root over pytest:tests/", record=False)
    assert mine not in ranked(result)

    # check: another project's lessons and failures are not on file here.
    assert led.check(P1, AVOID, TARGET, record=False).opposing == [mine]
    elsewhere = led.check(P2, AVOID, TARGET, record=False)
    assert (elsewhere.opposing, elsewhere.supporting, elsewhere.failures) == ([], [], 0)
    assert elsewhere.line == f"{AVOID} on {TARGET}: nothing on file"

    verdict = led.why(mine, project=P2, query="pytest").recall
    assert verdict is not None
    assert not verdict.shown
    assert "belongs to project" in verdict.reason
    assert "never crosses projects" in verdict.reason


# -- claims and inactive lessons are never recalled ---------------------------------------


def test_claimed_superseded_and_retired_lessons_are_never_recalled(agent: RecallAgent) -> None:
    led = agent.ledger
    query = "pytest from the repository root tests lib docs"
    claim = agent.propose(P1, source="model")
    retired = agent.learn(P1, "s1", target="lib")
    led.retire_lesson(key=agent.key(), lesson_id=retired, reason="wrong here")
    old = agent.learn(P1, "s1", target="docs")
    new = led.edit_lesson(key=agent.key(), lesson_id=old, text="Build docs from the root",
                          occurred_at=day(1)).ids["lesson_id"]
    assert [led.lesson(i).status for i in (claim, retired, old, new)] == [
        "claimed", "retired", "superseded", "trial"]

    result = led.recall(P1, query, session="s2")
    assert ranked(result) == shown(result) == [new]
    for operation, target in ((AVOID, TARGET), (PREFER, TARGET), (AVOID, "lib")):
        on_file = led.check(P1, operation, target, session="s2")
        assert claim not in on_file.supporting + on_file.opposing
        assert retired not in on_file.supporting + on_file.opposing
    assert led.check(P1, AVOID, "docs", record=False).opposing == [new]

    reasons = {}
    for lesson_id in (claim, retired, old, new):
        verdict = led.why(lesson_id, project=P1, query=query).recall
        assert verdict is not None
        reasons[lesson_id] = (verdict.shown, verdict.reason)
    assert reasons[new] == (True, reasons[new][1])
    assert reasons[new][1].startswith("shown at place 1")
    assert not reasons[claim][0]
    assert "claim" in reasons[claim][1]
    assert not reasons[retired][0]
    assert "retired" in reasons[retired][1]
    assert not reasons[old][0]
    assert "superseded" in reasons[old][1]
    assert str(new) in reasons[old][1], "it names what replaced it"

    # An attributed confirmation gives the claim evidence: from then on it is recalled.
    agent.confirm(P1, "s3", claim, when=day(2))
    assert claim in shown(led.recall(P1, query, session="s4"))


# -- trial labels ------------------------------------------------------------------------


def test_trial_lessons_are_labelled_as_such_until_trusted(agent: RecallAgent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    text = led.lesson(lid).text
    result = led.recall(P1, "pytest", record=False)
    assert [(r.lesson_id, r.label) for r in result.lessons] == [(lid, "trial")]
    assert result.section == f"Lessons:\n- [trial] {text} (confidence 0.50)"
    assert f"avoid (trial, 0.50: {text})" in led.check(P1, AVOID, TARGET, record=False).line

    for i, session in enumerate(("s2", "s3")):
        agent.confirm(P1, session, lid, when=day(1 + i))
    assert led.lesson(lid).status == "trusted"
    result = led.recall(P1, "pytest", record=False)
    assert [(r.lesson_id, r.label) for r in result.lessons] == [(lid, "belief")]
    assert result.section == f"Lessons:\n- {text} (confidence 0.80)"
    assert "trial" not in led.check(P1, AVOID, TARGET, record=False).line


# -- the caps --------------------------------------------------------------------------------


def test_at_most_five_lessons_are_shown(agent: RecallAgent) -> None:
    led = agent.ledger
    lessons = agent.do_lessons(P1, [f"Use tool-{i} to build t-{i}" for i in range(8)])
    head = led.log.head()
    result = led.recall(P1, "build", session="s1")
    assert len(result.lessons) == MAX_LESSONS
    assert sorted(ranked(result)) == sorted(lessons)
    assert shown(result) == ranked(result)[:MAX_LESSONS]
    assert result.section.splitlines() == ["Lessons:", *(r.line for r in result.lessons)]
    # Exactly what was shown is recorded, nothing beyond the cap.
    ((event, session, actor),) = recalled_events(led, head + 1)
    assert (event.lesson_ids, event.project, event.query, session, actor) == (
        shown(result), P1, "build", "s1", "agent")

    beyond = ranked(result)[MAX_LESSONS + 1]
    verdict = led.why(beyond, project=P1, query="build").recall
    assert verdict is not None
    assert (verdict.shown, verdict.place) == (False, MAX_LESSONS + 2)
    assert verdict.reason.startswith(f"ranked {MAX_LESSONS + 2} of 8")
    assert f"only {MAX_LESSONS} lessons in {MAX_TOKENS} tokens" in verdict.reason
    first = led.why(ranked(result)[0], project=P1, query="build").recall
    assert first is not None
    assert (first.shown, first.place) == (True, 1)


def test_at_most_300_tokens_and_one_long_lesson_silences_nothing(agent: RecallAgent) -> None:
    led = agent.ledger
    # Each line is ~107 tokens, so two fit in 300 and a third does not.
    texts = [f"Build t-{i} with tool-{i}: " + "carefully " * 38 for i in range(4)]
    lessons = agent.do_lessons(P1, texts)
    result = led.recall(P1, "build carefully", record=False)
    assert len(result.lessons) == 2
    assert result.tokens == count_tokens(result.section) <= MAX_TOKENS
    assert all(r.tokens == count_tokens(r.line) for r in result.lessons)
    assert shown(result) == ranked(result)[:2]
    # The lines are all about as long: a third would break the cap.
    assert count_tokens(result.section + "\n" + result.lessons[0].line) > MAX_TOKENS

    # A lesson too long for the section on its own, ranked first, is left out — and the
    # others are still shown. Its own line breaks never break the section's lines.
    witness = agent.outcome(P1, "w", [ok("tool-x", "t-x")])
    huge = agent.propose(P1, text="Build t-x with tool-x, carefully:\n" + "step " * 390,
                         kind="do", avoid_op="", prefer_op="tool-x", target="t-x",
                         evidence=[witness])
    for i, session in enumerate(("s1", "s2", "s3")):
        agent.confirm(P1, session, huge, when=day(1 + i))
    result = led.recall(P1, "build carefully step tool-x", record=False)
    assert ranked(result)[0] == huge
    assert huge not in shown(result)
    assert len(result.lessons) == 2
    assert set(shown(result)) <= set(lessons)
    assert result.tokens == count_tokens(result.section) <= MAX_TOKENS
    verdict = led.why(huge, project=P1, query="build carefully step tool-x").recall
    assert verdict is not None
    assert (verdict.shown, verdict.place) == (False, 1)
    assert "300 tokens" in verdict.reason

    wrapped = agent.do_lessons(P2, ["Run fmt-0\n\n  twice,\tthen   check"], tool="fmt")[0]
    result = led.recall(P2, "fmt", record=False)
    assert shown(result) == [wrapped]
    assert result.section.splitlines()[1] == (
        "- [trial] Run fmt-0 twice, then check (confidence 0.40)")


def test_a_lesson_bm25_cannot_index_is_still_recalled(agent: RecallAgent) -> None:
    # Nothing but stopwords and one-letter keys: BM25 has no vocabulary to index, so the
    # vector ranking alone decides its relevance.
    led = agent.ledger
    witness = agent.outcome(P1, "w", [ok("x", "t")])
    lid = agent.propose(P1, text="It is as it was", kind="do", avoid_op="", prefer_op="x",
                        target="t", evidence=[witness])
    for query in ("it is", "x", "something else entirely", "?"):
        result = led.recall(P1, query, record=False)
        assert shown(result) == [lid], query
        assert result.ranked[0].bm25_rank is None
        assert_same_recall(led.recall(P1, query, as_of=led.log.head()), result)


# -- contradictions ----------------------------------------------------------------------


def test_contradicting_lessons_are_shown_together_the_strongest_as_belief(
        agent: RecallAgent) -> None:
    led = agent.ledger
    belief = agent.learn(P1, "s1")                                   # root over tests/
    other = agent.learn(P1, "s2", avoid=PREFER, prefer=AVOID)       # tests/ over root
    agent.confirm(P1, "s3", belief, when=day(1))
    avoid = agent.propose(P1, text="Avoid make for the build", kind="avoid", avoid_op="make",
                          prefer_op="", target="build",
                          evidence=[agent.outcome(P1, "s4", [fail("make", target="build")],
                                                  passed=False)])
    do = agent.propose(P1, text="Use make for the build", kind="do", avoid_op="",
                       prefer_op="make", target="build",
                       evidence=[agent.outcome(P1, "s4", [ok("make", "build")])])
    assert all(led.lesson(i).active for i in (belief, other, avoid, do))

    result = led.recall(P1, "pytest root", record=False)
    labels = [(r.lesson_id, r.label, r.contradicts) for r in result.lessons]
    assert labels[:2] == [(belief, "trial", None), (other, "contradicting", belief)]
    lines = result.section.splitlines()
    assert lines[2].startswith("- [trial; contradicts the lesson above] ")

    # The same pair the other way round when the other one is the stronger (and now
    # trusted, so no longer labelled trial).
    agent.confirm(P1, "s5", other, when=day(2))
    agent.confirm(P1, "s6", other, when=day(3))
    assert led.lesson(other).status == "trusted"
    result = led.recall(P1, "pytest root", record=False)
    assert [(r.lesson_id, r.label, r.contradicts) for r in result.lessons][:2] == [
        (other, "belief", None), (belief, "contradicting", other)]
    assert result.section.splitlines()[1].startswith(f"- {led.lesson(other).text}")

    # avoid X and do X disagree too; together, whichever is asked about.
    result = led.recall(P1, "make build", record=False)
    pair = [(r.lesson_id, r.contradicts) for r in result.lessons if r.lesson_id in (avoid, do)]
    assert len(pair) == 2
    assert pair[1][1] == pair[0][0]
    assert [r.lesson_id for r in result.lessons].index(pair[1][0]) == \
        [r.lesson_id for r in result.lessons].index(pair[0][0]) + 1

    # check names both sides.
    on_file = led.check(P1, AVOID, TARGET, record=False)
    assert (on_file.opposing, on_file.supporting) == ([belief], [other])


def test_a_cap_never_keeps_one_side_of_a_disagreement(agent: RecallAgent) -> None:
    led = agent.ledger
    strong = agent.do_lessons(P1, [f"Use tool-{i} for t-{i}" for i in range(4)])
    for lesson_id in strong:
        for i, session in enumerate(("s1", "s2", "s3")):
            agent.confirm(P1, f"{session}-{lesson_id}", lesson_id, when=day(1 + i))
    belief = agent.learn(P1, "s1")
    other = agent.learn(P1, "s2", avoid=PREFER, prefer=AVOID)
    # With no query, confidence decides: the four strong lessons, then the pair, which
    # would make six: both sides are left out, neither is shown alone.
    result = led.recall(P1, "", record=False)
    assert ranked(result)[:4] == shown(result)
    assert set(shown(result)) == set(strong)
    assert {belief, other} == set(ranked(result)[4:])
    for query in ("pytest root", "tool", "pytest tool-0 tool-1 tool-2", "root tests"):
        result = led.recall(P1, query, record=False)
        assert (belief in shown(result)) == (other in shown(result)), query


# -- clocks and attribution -----------------------------------------------------------------


def test_recall_moves_the_usage_clock_never_the_evidence_clock(agent: RecallAgent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1", error="connection reset by peer")   # tentative: 30 days
    before = led.lesson(lid)
    assert before.last_used_at == 0
    started = time.time_ns()
    assert shown(led.recall(P1, "pytest", session="s2")) == [lid]
    after = led.lesson(lid)
    assert after.last_used_at >= started
    assert (after.last_evidence_at, after.confidence, after.evidence, after.status,
            after.moves) == (before.last_evidence_at, before.confidence, before.evidence,
                             before.status, before.moves)
    used = after.last_used_at
    led.check(P1, AVOID, TARGET, session="s3")
    assert led.lesson(lid).last_used_at >= used
    assert led.lesson(lid).last_evidence_at == before.last_evidence_at

    # Browsing (record=False) and replaying (as_of) do not count as use.
    head = led.log.head()
    used = led.lesson(lid).last_used_at
    led.recall(P1, "pytest", session="s4", record=False)
    led.recall(P1, "pytest", session="s4", as_of=head)
    led.check(P1, AVOID, TARGET, session="s4", record=False)
    led.check(P1, AVOID, TARGET, session="s4", as_of=head)
    assert (led.log.head(), led.lesson(lid).last_used_at) == (head, used)

    # Recall never extends expiry: used every day, it still expires 30 days after its
    # last evidence.
    for n in range(1, 30, 7):
        led.reconcile(key=agent.key(), now=day(n))
        led.recall(P1, "pytest", session=f"daily-{n}")
    led.reconcile(key=agent.key(), now=day(30.5))
    assert led.lesson(lid).status == "expired"
    assert led.recall(P1, "pytest", record=False).lessons == []


def test_what_recall_and_check_show_is_in_play_for_the_sessions_outcome(
        agent: RecallAgent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s0")
    moves = len(led.lesson(lid).moves)

    # Browsed, not shown to an agent: an outcome in that session does not touch it.
    led.recall(P1, "pytest", session="browse", record=False)
    led.check(P1, AVOID, TARGET, session="browse", record=False)
    agent.outcome(P1, "browse", [ok()], when=day(1))
    assert len(led.lesson(lid).moves) == moves

    head = led.log.head()
    assert shown(led.recall(P1, "pytest", session="s1")) == [lid]
    ((event, session, _),) = recalled_events(led, head + 1)
    assert (event.lesson_ids, session) == ([lid], "s1")
    recalled = agent.outcome(P1, "s1", [ok()], when=day(2))

    head = led.log.head()
    on_file = led.check(P1, PREFER, TARGET, session="s2", actor="agent-7")
    assert on_file.shown == [lid]
    ((event, session, actor),) = recalled_events(led, head + 1)
    assert (event.lesson_ids, event.query, session, actor) == (
        [lid], f"check {PREFER} {TARGET}", "s2", "agent-7")
    checked = agent.outcome(P1, "s2", [fail()], when=day(3), passed=False)

    row = led.lesson(lid)
    assert [(m.type, m.outcome) for m in row.moves[moves:]] == [
        ("lesson.confirmed", recalled), ("lesson.confirmed", checked)]

    # Nothing shown, nothing recorded.
    head = led.log.head()
    assert led.recall(P2, "pytest", session="s3").lessons == []
    assert led.check(P1, "cargo:build", "crate", session="s3").shown == []
    assert led.log.head() == head


def test_live_recall_follows_changes_that_touch_many_lessons_at_once(
        agent: RecallAgent) -> None:
    # The recaller keeps each project's candidates between queries; an environment change
    # and a reconcile pass change many rows without naming them, and must still show.
    led = agent.ledger
    bound = agent.learn(P1, "s1", fingerprint={"pytest": "7"})
    agent.trusted(P1, bound, ["s2", "s3"], when=day(1))
    other = agent.learn(P2, "s1", target="docs")
    queries = ("pytest root", "docs")

    def same_as_a_replay() -> list[Recall]:
        live = [led.recall(p, q, record=False) for p in (P1, P2) for q in queries]
        head = led.log.head()
        for got, (p, q) in zip(live, [(p, q) for p in (P1, P2) for q in queries],
                               strict=True):
            assert_same_recall(led.recall(p, q, as_of=head), got)
        return live

    before = same_as_a_replay()
    assert before[0].lessons[0].label == "belief"
    led.declare_environment_change(key=agent.key(), scope=P1, component="pytest", new="8",
                                   occurred_at=day(2))
    assert same_as_a_replay()[0].lessons[0].label == "trial"
    for n in (3, 4):  # the first pass spares what is new in its epoch
        led.reconcile(key=agent.key(), now=day(n))
    after = same_as_a_replay()
    assert after[2].lessons[0].lesson_id == other
    assert after[2].lessons[0].confidence < before[2].lessons[0].confidence


# -- when a record is committed --------------------------------------------------------------


@pytest.fixture
def patient(tmp_path: Path) -> Iterator[RecallAgent]:
    """A ledger whose background flush never comes within a test: records wait."""
    with open_ledger(tmp_path / "home", sync=False, record_delay=3600) as ledger:
        yield RecallAgent(ledger)


def test_a_recall_record_rides_in_the_sessions_next_command_before_its_outcome(
        patient: RecallAgent) -> None:
    led = patient.ledger
    lid = patient.learn(P1, "s0")
    head = led.log.head()
    assert shown(led.recall(P1, "pytest", session="s1")) == [lid]
    assert led.log.head() == head, "queued, not committed on its own"
    outcome = patient.outcome(P1, "s1", [ok()], when=day(1))
    # Committed first in the outcome's own transaction, so it was folded before the
    # outcome was attributed: the lesson was in play, and is confirmed by it.
    kinds = [r.envelope.type for r in led.log.read(head + 1, limit=2)]
    assert kinds == ["lesson.recalled", "outcome.observed"]
    assert [(m.type, m.outcome) for m in led.lesson(lid).moves[-1:]] == [
        ("lesson.confirmed", outcome)]


def test_queued_records_commit_on_flush_close_and_a_refused_command(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "home", sync=False, record_delay=3600)
    patient = RecallAgent(led)
    lid = patient.learn(P1, "s0")
    head = led.log.head()
    started = time.time_ns()
    led.recall(P1, "pytest", session="s1")
    assert led.log.head() == head
    # Reading usage commits first: this process always sees its own recalls.
    assert led.lesson(lid).last_used_at >= started
    assert [s for _, s, _ in recalled_events(led, head + 1)] == ["s1"]

    # A refused command writes nothing of its own; the records it carried still commit.
    head = led.log.head()
    led.check(P1, AVOID, TARGET, session="s2")
    with pytest.raises(UnknownLessonError):
        led.retire_lesson(key=patient.key(), lesson_id=UUID(int=7))
    assert [r.envelope.type for r in led.log.read(head + 1)] == ["lesson.recalled"]

    head = led.log.head()
    started = time.time_ns()
    led.recall(P1, "pytest", session="s3")
    (row,) = led.lessons(P1, session="s4")
    assert row.last_used_at >= started, "a listing's usage clocks count earlier recalls"
    led.close()
    with open_ledger(tmp_path / "home", sync=False) as reopened:
        assert [s for _, s, _ in recalled_events(reopened, head + 1)] == ["s3", "s4"]


def test_a_recall_with_no_later_command_lands_within_the_delay(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "home", sync=False, record_delay=0.01) as led:
        lid = RecallAgent(led).learn(P1, "s0")
        head = led.log.head()
        led.recall(P1, "pytest", session="s1")
        deadline = time.monotonic() + 10
        while led.log.head() == head:  # the raw log: nothing here flushes
            assert time.monotonic() < deadline, "the background flush never came"
            time.sleep(0.005)
        ((event, session, _),) = recalled_events(led, head + 1)
        assert (event.lesson_ids, session) == ([lid], "s1")


# -- check ---------------------------------------------------------------------------------


def test_check_is_one_line_naming_lessons_for_and_against_and_past_failures(
        agent: RecallAgent) -> None:
    led = agent.ledger
    lid = agent.learn(P1, "s1")
    text = led.lesson(lid).text
    against = led.check(P1, AVOID, TARGET, record=False)
    assert against == Check(
        P1, AVOID, TARGET, [], [lid], 1, "no conftest",
        f"{AVOID} on {TARGET}: avoid (trial, 0.50: {text}) "
        "failed 1x here before, last: no conftest", [lid])
    supporting = led.check(P1, PREFER, TARGET, record=False)
    assert (supporting.supporting, supporting.opposing, supporting.failures) == ([lid], [], 0)
    assert supporting.line == f"{PREFER} on {TARGET}: prefer (trial, 0.50: {text})"
    nothing = led.check(P1, "cargo:build", "crate", record=False)
    assert nothing.line == "cargo:build on crate: nothing on file"
    assert (nothing.supporting, nothing.opposing, nothing.shown) == ([], [], [])

    # Failures alone are on file; a multi-line error is still one line.
    agent.outcome(P1, "s2", [fail("cargo:build", "error[E0425]:\n  cannot find value",
                                  "crate")], passed=False)
    agent.outcome(P1, "s2", [fail("cargo:build", "linker failed\n", "crate")], passed=False)
    failed = led.check(P1, "cargo:build", "crate", record=False)
    assert failed.line == "cargo:build on crate: failed 2x here before, last: linker failed"
    assert failed.failures == 2

    # Three lessons against one operation: the line names the two strongest, records
    # those two, and the lists hold all three.
    others = [agent.learn(P1, f"s{3 + i}", prefer=f"pytest:dir-{i}") for i in range(2)]
    agent.confirm(P1, "s9", others[1], when=day(1))
    head = led.log.head()
    crowded = led.check(P1, AVOID, TARGET, session="s10")
    assert crowded.opposing[0] == others[1], "strongest first"
    assert set(crowded.opposing) == {lid, *others}
    assert crowded.shown == crowded.opposing[:2]
    assert crowded.line.count("avoid (") == 2
    assert "\n" not in crowded.line
    ((event, _, _),) = recalled_events(led, head + 1)
    assert event.lesson_ids == crowded.shown


# -- why -----------------------------------------------------------------------------------


def test_why_lists_the_events_behind_a_lesson(agent: RecallAgent) -> None:
    led = agent.ledger
    learned_from = agent.outcome(P1, "s1", [fail(), ok()])
    lid = next(r.lesson_id for r in led.view.lessons.values() if r.evidence == [learned_from])
    confirmed_by = agent.confirm(P1, "s2", lid, when=day(1))
    contradicted_by = agent.contradict(P1, "s3", lid, when=day(2))
    led.reconcile(key=agent.key(), now=day(3), actor="cron")
    led.reconcile(key=agent.key(), now=day(4), actor="cron")

    why = led.why(lid)
    assert why.recall is None
    assert why.lesson == led.lesson(lid)
    assert [(s.type, s.outcome, s.confidence) for s in why.steps] == [
        ("lesson.proposed", learned_from, 0.5),
        ("lesson.confirmed", confirmed_by, 0.65),
        ("lesson.contradicted", contradicted_by, 0.4),
        ("reconcile.passed", None, 0.38),
    ]
    assert [s.position for s in why.steps] == [m.position for m in led.lesson(lid).moves]
    for step in why.steps:
        envelope = led.log.read(step.position, limit=1)[0].envelope
        assert (step.type, step.actor, step.session, step.recorded_at) == (
            envelope.type, envelope.actor, envelope.session, envelope.recorded_at)
    assert [s.actor for s in why.steps] == ["policy", "policy", "policy", "cron"]
    assert [s.session for s in why.steps][:3] == ["s1", "s2", "s3"]

    verdict = led.why(lid, project=P1, query="pytest root").recall
    assert verdict is not None
    assert (verdict.project, verdict.query, verdict.shown, verdict.place) == (
        P1, "pytest root", True, 1)
    assert verdict.figures is not None
    assert verdict.figures.lesson_id == lid
    assert verdict.figures.confidence == pytest.approx(0.38)

    with pytest.raises(UnknownLessonError):
        led.why(UUID(int=5))


# -- as of: the answer the ledger gave then ------------------------------------------------


@dataclass
class Moment:
    """What the ledger answered at one position, captured live without recording."""

    position: int
    after: int
    view: bytes
    recalls: dict[tuple[str, str], Recall]
    checks: dict[tuple[str, str, str], Check]
    stories: dict[UUID, Why]


QUERIES = ("pytest root", "make the build", "")
CHECKS = ((P1, AVOID, TARGET), (P1, PREFER, TARGET), (P1, "make", "build"),
          (P2, "make", "build"))


def capture(led: Ledger) -> Moment:
    led.catch_up()
    position = led.log.head()
    assert led.view.position == position
    recalls = {(p, q): led.recall(p, q, record=False) for p in (P1, P2) for q in QUERIES}
    checks = {c: led.check(*c, record=False) for c in CHECKS}
    stories = {i: led.why(i, project=P1, query="pytest root") for i in led.view.lessons}
    assert led.log.head() == position, "capturing must not write"
    time.sleep(0.002)  # so a time between two moments names exactly one of them
    return Moment(position, time.time_ns(), led.view.dump(), recalls, checks, stories)


def assert_as_of(led: Ledger, moment: Moment) -> None:
    p = moment.position
    assert fold(led.log, p).dump() == led.view_at(p).dump() == moment.view
    for (project, query), then in moment.recalls.items():
        assert_same_recall(led.recall(project, query, as_of=p), then)
    for (project, operation, target), then_check in moment.checks.items():
        assert led.check(project, operation, target, as_of=p) == then_check
    for lesson_id, then_story in moment.stories.items():
        assert story(led.why(lesson_id, project=P1, query="pytest root", as_of=p)) == \
            story(then_story)


def test_as_of_answers_equal_the_answers_given_then_and_a_fresh_replay(
        agent: RecallAgent) -> None:
    led = agent.ledger
    moments = [capture(led)]
    steps: list[Callable[[], object]] = [
        lambda: agent.learn(P1, "s1"),
        lambda: agent.learn(P1, "s2", avoid=PREFER, prefer=AVOID, when=day(1)),
        lambda: agent.propose(P1, text="Avoid make for the build", kind="avoid",
                              avoid_op="make", prefer_op="", target="build", when=day(1),
                              evidence=[agent.outcome(P1, "s3", [fail("make", target="build")],
                                                      passed=False, when=day(1))]),
        lambda: led.recall(P1, "pytest root", session="s4"),
        lambda: agent.outcome(P1, "s4", [ok()], when=day(2)),
        lambda: agent.propose(P1, source="model", kind="do", avoid_op="", prefer_op="ninja",
                              target="build", text="Use ninja for the build", when=day(2)),
        lambda: agent.learn(P2, "s5", target="build", avoid="make", prefer="ninja", when=day(3)),
        lambda: agent.learn(P1, "s6", target="build", avoid="make", prefer="ninja", when=day(3)),
        lambda: led.reconcile(key=agent.key(), now=day(4)),
        lambda: led.retire_lesson(key=agent.key(), lesson_id=next(
            r.lesson_id for r in led.view.lessons.values() if r.kind == "avoid")),
        lambda: led.reconcile(key=agent.key(), now=day(40)),
    ]
    for step in steps:
        step()
        moments.append(capture(led))
    assert len({m.position for m in moments}) == len(moments)
    assert any(len(r.lessons) >= 3 for m in moments for r in m.recalls.values())

    head = led.log.head()
    for moment in moments:
        assert_as_of(led, moment)
        # By time: the last position recorded at or before it.
        assert led.position_at(moment.after) == moment.position
    assert led.position_at(0) == 0
    assert led.log.head() == head, "answering as of a position writes nothing"

    # A position before a lesson existed: it is unknown there, as it was then.
    last = max(led.view.lessons, key=lambda i: led.view.lessons[i].moves[0].position)
    born = led.view.lessons[last].moves[0].position
    with pytest.raises(UnknownLessonError):
        led.why(last, as_of=born - 1)
    assert led.why(last, as_of=born).steps[0].position == born


def test_a_replay_scores_vectors_exactly_as_the_live_index_does(agent: RecallAgent) -> None:
    # Many near-identical lessons: their similarities to a query differ in the fourth
    # decimal, where storing vectors at the index's precision (f16) or not would reorder
    # them. A replay stores them alike, so live and replayed rankings agree rank for rank.
    led = agent.ledger
    agent.do_lessons(P1, [f"Use tool-{i} for target {i} with word{i % 7} and x{i % 3}"
                          for i in range(60)])
    head = led.log.head()
    for query in ("tool target word3", "word5 x1", "use the tool for the target"):
        live = led.recall(P1, query, record=False)
        assert_same_recall(led.recall(P1, query, as_of=head), live)
        # why judges by the same figures.
        for place in (1, 6, 30):
            verdict = led.why(live.ranked[place - 1].lesson_id, project=P1, query=query).recall
            assert verdict is not None
            assert verdict.figures is not None
            assert (verdict.place, verdict.figures.vector_rank, verdict.figures.bm25_rank) == (
                place, live.ranked[place - 1].vector_rank, live.ranked[place - 1].bm25_rank)


def test_reopening_the_home_gives_the_same_recall(tmp_path: Path) -> None:
    home = tmp_path / "home"
    embedder = default_embedder()
    queries = ("pytest root", "make the build", "deploy docs")
    with open_ledger(home, sync=False) as led:
        agent = Agent(led)
        agent.learn(P1, "s1")
        agent.learn(P1, "s1", target="build", avoid="make", prefer="ninja")
        agent.learn(P1, "s2", avoid=PREFER, prefer=AVOID)
        witness = agent.outcome(P1, "s3", [ok("mkdocs:gh-deploy", "docs")])
        # A publisher's own vector, used instead of the text's.
        own = embedder.embed(["deploy the docs site"])[0].tolist()
        agent.propose(P1, text="Publish with mkdocs gh-deploy", kind="do", avoid_op="",
                      prefer_op="mkdocs:gh-deploy", target="docs", evidence=[witness],
                      vector=own)
        before = {q: led.recall(P1, q, record=False) for q in queries}
        head = led.log.head()
        assert not led.recaller.index.viewed

    meta = msgspec.json.decode((home / "vectors" / "meta.json").read_bytes())
    assert meta["position"] == head
    with open_ledger(home, sync=False) as led:
        assert led.recaller.index.viewed, "reopened memory-mapped, not rebuilt"
        for query in queries:
            assert_same_recall(led.recall(P1, query, record=False), before[query])
            assert_same_recall(led.recall(P1, query, as_of=head), before[query])
        # New lessons after reopening go into the delta; live still equals a replay.
        agent = Agent(led, sent=100)
        agent.learn(P1, "s4", target="docs", avoid="sphinx:html", prefer="mkdocs:build")
        for query in (*queries, "sphinx mkdocs"):
            assert_same_recall(led.recall(P1, query, as_of=led.log.head()),
                               led.recall(P1, query, record=False))
        after = {q: led.recall(P1, q, record=False) for q in queries}

    # A missing index is rebuilt from the log, to the same answers.
    shutil.rmtree(home / "vectors")
    with open_ledger(home, sync=False) as led:
        assert not led.recaller.index.viewed
        for query in queries:
            assert_same_recall(led.recall(P1, query, record=False), after[query])


# -- the property: as of p equals what was answered at p ----------------------------------


@dataclass(frozen=True)
class Learn:
    project: int
    session: int
    pair: int
    reverse: bool


@dataclass(frozen=True)
class Claim:
    pair: int
    reverse: bool


@dataclass(frozen=True)
class Confirm:
    lesson: int
    session: int
    holds: bool


@dataclass(frozen=True)
class Show:
    project: int
    session: int
    query: int


@dataclass(frozen=True)
class Retire:
    lesson: int


@dataclass(frozen=True)
class Pass:
    days: int


PROJECTS = (P1, P2)
PAIRS = ((AVOID, PREFER, TARGET), ("make", "ninja", "build"), ("sphinx:html", "mkdocs", "docs"))
PROPERTY_QUERIES = ("pytest root tests", "build with ninja", "docs")
Step = Learn | Claim | Confirm | Show | Retire | Pass
_kinds: dict[str, st.SearchStrategy[Step]] = {
    "learn": st.builds(Learn, st.sampled_from([0, 0, 0, 1]), st.integers(0, 3),
                       st.integers(0, 2), st.booleans()),
    "claim": st.builds(Claim, st.integers(0, 2), st.booleans()),
    "confirm": st.builds(Confirm, st.integers(0, 20), st.integers(0, 3), st.booleans()),
    "show": st.builds(Show, st.integers(0, 1), st.integers(0, 3), st.integers(0, 2)),
    "retire": st.builds(Retire, st.integers(0, 20)),
    "pass": st.builds(Pass, st.integers(1, 40)),
}
#: Weighted by repetition: mostly learning, so there is something to recall (and now and
#: then a disagreement).
_mix = ["learn"] * 6 + ["confirm"] * 2 + ["show"] * 2 + ["claim", "retire", "pass"]
step_lists = st.lists(st.sampled_from(_mix).flatmap(_kinds.__getitem__), min_size=4,
                      max_size=14)


def run_step(agent: Agent, step: Step, when: datetime) -> None:
    led = agent.ledger
    lessons = sorted(led.view.lessons.values(), key=lambda r: r.moves[0].position)
    match step:
        case Learn():
            avoid, prefer, target = PAIRS[step.pair]
            if step.reverse:
                avoid, prefer = prefer, avoid
            agent.outcome(PROJECTS[step.project], f"s{step.session}",
                          [fail(avoid, target=target), ok(prefer, target)], when=when)
        case Claim():
            avoid, prefer, target = PAIRS[step.pair]
            if step.reverse:
                avoid, prefer = prefer, avoid
            agent.propose(P1, source="model", avoid_op=avoid, prefer_op=prefer, target=target,
                          text=f"Prefer {prefer} over {avoid}", when=when)
        case Confirm() if lessons:
            row = lessons[step.lesson % len(lessons)]
            kept = [fail(row.avoid_op, target=row.target), ok(row.prefer_op, row.target)]
            broken = [ok(row.avoid_op, row.target)]
            agent.outcome(row.scope if row.scope in PROJECTS else P1, f"s{step.session}",
                          kept if step.holds else broken, when=when, in_play=[row.lesson_id],
                          passed=step.holds)
        case Show():
            led.recall(PROJECTS[step.project], PROPERTY_QUERIES[step.query],
                       session=f"s{step.session}")
        case Retire() if lessons:
            row = lessons[step.lesson % len(lessons)]
            with contextlib.suppress(CommandError):  # not active any more: refused
                led.retire_lesson(key=agent.key(), lesson_id=row.lesson_id, occurred_at=when)
        case Pass():
            led.reconcile(key=agent.key(), now=when, occurred_at=when)
        case _:
            pass


def snapshot(led: Ledger) -> tuple[int, dict[tuple[str, str], Recall],
                                  dict[tuple[str, str, str], Check]]:
    led.catch_up()
    recalls = {(p, q): led.recall(p, q, record=False) for p in PROJECTS
               for q in PROPERTY_QUERIES}
    checks = {(p, avoid, target): led.check(p, avoid, target, record=False)
              for p in PROJECTS for avoid, _, target in PAIRS}
    return led.log.head(), recalls, checks


@settings(max_examples=25)
@given(steps=step_lists, data=st.data())
def test_as_of_any_position_equals_the_answer_captured_live_there(
        steps: list[Step], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory(prefix="ll-recall-") as top, \
            open_ledger(f"{top}/home", sync=False) as led:
        agent = Agent(led)
        captured = [snapshot(led)]
        clock = T0
        for step in steps:
            clock += timedelta(days=step.days) if isinstance(step, Pass) else \
                timedelta(hours=1)
            run_step(agent, step, clock)
            captured.append(snapshot(led))
        head = led.log.head()
        # Three positions, the later ones (where there is more to recall) more likely.
        for _ in range(3):
            position, recalls, checks = captured[data.draw(st.integers(0, len(captured) - 1)
                                                           | st.just(len(captured) - 1))]
            most = max(len(r.lessons) for r in recalls.values())
            labels = {r.label for result in recalls.values() for r in result.lessons}
            event(f"most lessons shown at a position drawn: {min(most, 3)}")
            event(f"a contradiction shown: {'contradicting' in labels}")
            event(f"past failures on file: {any(c.failures for c in checks.values())}")
            for (project, query), then in recalls.items():
                assert_same_recall(led.recall(project, query, as_of=position), then)
            for (project, operation, target), then_check in checks.items():
                assert led.check(project, operation, target, as_of=position) == then_check
        assert led.log.head() == head
