"""Erasure through the public API: what each kind takes, what stays, and who forgets.

The residue on disk (the erased bytes gone from every file once the home is compacted)
is tested with the CLI in tests/ops/test_erasure_cli.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from lesson_agent import AVOID, P1, P2, PREFER, T0, Agent, day
from lessonledger.commands import Ledger, Operation, UnknownLessonError, open_ledger
from lessonledger.commands.erasure import NothingToEraseError, UnknownOutcomeError
from lessonledger.commands.errors import InvalidCommandError, KeyReusedError, LessonNotFoundError
from lessonledger.commands.ledger import VIEW_NAME
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.events import Erased, OutcomeObserved, decode_event
from lessonledger.ledger.log import NewEvent
from lessonledger.ledger.submission import Submission, to_new_event
from lessonledger.ledger.verify import verify
from lessonledger.projections.embedder import default_embedder
from lessonledger.projections.store import ViewStore
from lessonledger.projections.vector_index import VectorIndex

ALICE_TARGET, BOB_TARGET = "alice-private-repo", "bob-private-repo"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with open_ledger(tmp_path, sync=False) as opened:
        yield opened


def learn(ledger: Ledger, key: str, project: str, principal: str, target: str,
          session: str = "s1") -> UUID:
    """An outcome of ``principal``'s from which the loop learns a lesson; its outcome id."""
    receipt = ledger.observe_outcome(
        key=key, project=project, principal=principal, session=session, passed=True,
        occurred_at=T0, operations=[
            Operation(op=AVOID, target=target, ok=False, error=f"{target}: no conftest"),
            Operation(op=PREFER, target=target, ok=True, order=1)])
    return receipt.ids["outcome_id"]


def lessons_on(ledger: Ledger, target: str) -> list[UUID]:
    return [row.lesson_id for row in ledger.view.lessons.values() if row.target == target]


def bodies(ledger: Ledger) -> dict[int, bytes | None]:
    return {r.envelope.position: r.payload for r in ledger.log.scan()}


def test_erasing_a_principal_takes_their_events_and_what_was_learned_from_them(
        ledger: Ledger) -> None:
    alice = learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    learn(ledger, "b1", P2, "bob", BOB_TARGET)
    assert lessons_on(ledger, ALICE_TARGET)
    assert lessons_on(ledger, BOB_TARGET)
    before = bodies(ledger)
    alices = [r.envelope.position for r in ledger.log.scan() if r.envelope.principal == "alice"]
    assert len(alices) >= 2  # the outcome and the lesson the policies learned from it

    erasure = ledger.erase(key="erase-alice", what="principal", subject="alice",
                           reason="data subject request", actor="auditor")

    assert erasure.erased == alices
    after = bodies(ledger)
    assert all(after[p] is None for p in alices)
    assert {p: b for p, b in after.items() if p not in alices and p < erasure.position} == {
        p: b for p, b in before.items() if p not in alices}
    recorded = decode_event(after[erasure.position] or b"")
    assert isinstance(recorded, Erased)
    assert (recorded.what, recorded.subject, recorded.by, recorded.positions) == (
        "principal", "alice", "auditor", alices)
    report = verify(ledger.log)
    assert report.ok
    assert report.erased == alices
    # Nothing derived from alice's events is left in the view; bob's lesson is untouched.
    assert lessons_on(ledger, ALICE_TARGET) == []
    assert alice not in ledger.view.outcomes
    assert not any(ALICE_TARGET in key for key in ledger.view.failures)
    assert len(lessons_on(ledger, BOB_TARGET)) == 1
    assert [r.target for r in ledger.lessons(P1, record=False)] == []
    # A retry (the whole command again) erases nothing more and answers as the first did.
    head = ledger.log.head()
    assert ledger.erase(key="erase-alice", what="principal", subject="alice",
                        reason="data subject request", actor="auditor") == erasure
    assert ledger.log.head() == head


def test_the_saved_view_and_the_vector_index_forget_too(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        learn(ledger, "a1", P1, "alice", ALICE_TARGET)
        learn(ledger, "b1", P2, "bob", BOB_TARGET)
        [alices_lesson] = lessons_on(ledger, ALICE_TARGET)
        ledger.save_view()
        ledger.recaller.save()
        ledger.erase(key="e", what="principal", subject="alice")
    with open_ledger(tmp_path, sync=False) as reopened:
        store = ViewStore(reopened.log.home)
        saved = store.load(VIEW_NAME)
        assert saved is not None
        assert ALICE_TARGET.encode() not in saved[1]
        assert BOB_TARGET.encode() in saved[1]
        assert alices_lesson not in reopened.recaller.index
        assert lessons_on(reopened, ALICE_TARGET) == []


def test_another_ledger_on_the_home_forgets_when_it_folds_the_erasure(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as first, open_ledger(tmp_path, sync=False) as other:
        learn(first, "a1", P1, "alice", ALICE_TARGET)
        other.catch_up()
        [lesson] = lessons_on(other, ALICE_TARGET)
        assert lesson in other.recaller.index
        first.erase(key="e", what="principal", subject="alice")
        other.catch_up()
        assert lessons_on(other, ALICE_TARGET) == []
        assert lesson not in other.recaller.index


def test_erasing_a_session_takes_only_that_session(ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET, session="s-private")
    learn(ledger, "a2", P2, "alice", BOB_TARGET, session="s-kept")
    erasure = ledger.erase(key="e", what="session", subject="s-private")
    assert erasure.erased
    assert lessons_on(ledger, ALICE_TARGET) == []
    assert len(lessons_on(ledger, BOB_TARGET)) == 1


def test_erasing_a_lesson_takes_its_events_and_leaves_the_outcome(ledger: Ledger) -> None:
    agent = Agent(ledger)
    outcome = learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    [lesson] = lessons_on(ledger, ALICE_TARGET)
    agent.confirm(P1, "s2", lesson, when=day(1))
    erasure = ledger.erase(key="e", what="lesson", subject=str(lesson))
    assert len(erasure.erased) == 2  # its proposal and its confirmation
    assert lessons_on(ledger, ALICE_TARGET) == []
    assert outcome in ledger.view.outcomes


def test_erasing_an_outcome_takes_what_the_policies_learned_from_it(ledger: Ledger) -> None:
    outcome = learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    kept = learn(ledger, "b1", P2, "bob", BOB_TARGET)
    erasure = ledger.erase(key="e", what="outcome", subject=str(outcome))
    gone = [decode_event(p) for p in bodies(ledger).values() if p is not None]
    assert not any(isinstance(e, OutcomeObserved) and e.outcome_id == outcome for e in gone)
    assert len(erasure.erased) >= 2
    assert lessons_on(ledger, ALICE_TARGET) == []
    assert kept in ledger.view.outcomes


def test_a_refused_erasure_writes_nothing(ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    head = ledger.log.head()
    with pytest.raises(UnknownLessonError):
        ledger.erase(key="e1", what="lesson", subject=str(uuid4()))
    with pytest.raises(UnknownOutcomeError):
        ledger.erase(key="e2", what="outcome", subject=str(uuid4()))
    with pytest.raises(InvalidCommandError) as bad:
        ledger.erase(key="e3", what="lesson", subject="not-a-uuid")
    assert bad.value.field == "$.subject"
    with pytest.raises(InvalidCommandError):
        ledger.erase(key="e4", what="everything", subject="alice")
    assert ledger.log.head() == head
    assert lessons_on(ledger, ALICE_TARGET)


def test_an_erasure_record_is_never_erased_by_a_later_one(ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    first = ledger.erase(key="e1", what="principal", subject="alice", principal="ops")
    head = ledger.log.head()
    with pytest.raises(NothingToEraseError, match="no event names principal 'ops'"):
        ledger.erase(key="e2", what="principal", subject="ops", principal="ops")
    with pytest.raises(NothingToEraseError, match="erased already"):
        ledger.erase(key="e3", what="principal", subject="alice")
    assert ledger.log.head() == head
    assert bodies(ledger)[first.position] is not None


def test_an_index_saved_before_the_erasure_is_rebuilt_on_open(tmp_path: Path) -> None:
    # Another process may save its older index after the erasure rebuilt this one.
    with open_ledger(tmp_path, sync=False) as ledger:
        learn(ledger, "a1", P1, "alice", ALICE_TARGET)
        learn(ledger, "b1", P2, "bob", BOB_TARGET)
        [alices_lesson] = lessons_on(ledger, ALICE_TARGET)
        [bobs_lesson] = lessons_on(ledger, BOB_TARGET)
        ledger.recaller.save()
        shutil.copytree(tmp_path / "vectors", tmp_path / "old-vectors")
        ledger.erase(key="e", what="principal", subject="alice")
    shutil.rmtree(tmp_path / "vectors")
    shutil.copytree(tmp_path / "old-vectors", tmp_path / "vectors")
    with open_ledger(tmp_path, sync=False) as reopened:
        assert alices_lesson not in reopened.recaller.index
        assert bobs_lesson in reopened.recaller.index


def test_a_ledger_behind_the_erasure_decides_nothing_from_what_it_took(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as first, open_ledger(tmp_path, sync=False) as other:
        learn(first, "a1", P1, "alice", ALICE_TARGET)
        other.catch_up()
        [lesson] = lessons_on(other, ALICE_TARGET)
        first.erase(key="e", what="principal", subject="alice")
        # The other ledger has not caught up: its command folds the erasure first.
        with pytest.raises(UnknownLessonError):
            other.edit_lesson(key="edit", lesson_id=lesson, text="copied back")
        # An outcome showing the same pair teaches a lesson, as on a caught-up ledger.
        learn(other, "a2", P1, "bob", ALICE_TARGET)
        [relearned] = lessons_on(other, ALICE_TARGET)
        assert relearned != lesson


def test_a_ledger_behind_the_erasure_does_not_save_its_older_index_over_the_new_one(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as first, open_ledger(tmp_path, sync=False) as other:
        learn(first, "a1", P1, "alice", ALICE_TARGET)
        other.catch_up()
        first.erase(key="e", what="principal", subject="alice")
        saved = VectorIndex.saved_position(tmp_path / "vectors")
        other.recaller.save()
        assert VectorIndex.saved_position(tmp_path / "vectors") == saved


def test_erasing_the_promoting_outcome_takes_the_promotion(ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    promoting = learn(ledger, "b1", P2, "bob", ALICE_TARGET)
    [alices] = [r for r in ledger.view.lessons.values() if r.scope == "global"]
    ledger.erase(key="e", what="outcome", subject=str(promoting))
    assert ledger.view.lessons[alices.lesson_id].scope == P1


def test_erasing_the_lesson_that_absorbed_another_leaves_that_one_active(
        ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    learn(ledger, "b1", P2, "bob", ALICE_TARGET)
    bobs = [r for r in ledger.view.lessons.values() if r.status == "superseded"]
    assert len(bobs) == 1
    ledger.erase(key="e", what="principal", subject="alice")
    assert ledger.view.lessons[bobs[0].lesson_id].active
    assert [r.lesson_id for r in ledger.lessons(P2, record=False)] == [bobs[0].lesson_id]


def test_an_erasure_and_another_command_may_share_a_key(ledger: Ledger) -> None:
    learn(ledger, "shared", P1, "alice", ALICE_TARGET)
    receipt = ledger.observe_outcome(key="k", project=P1, passed=True)
    erasure = ledger.erase(key="k", what="principal", subject="alice")
    assert erasure.erased
    assert ledger.observe_outcome(key="k", project=P1, passed=True) == receipt


def test_what_was_shown_to_a_principal_goes_with_the_principal(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        learn(ledger, "b1", P1, "bob", BOB_TARGET)
        query = "alice asks about her private repository"
        assert ledger.recall(P1, query, session="s-a", principal="alice").lessons
        ledger.check(P1, AVOID, BOB_TARGET, session="s-a", principal="alice")
        ledger.flush()
        shown = [r.envelope.position for r in ledger.log.scan()
                 if r.envelope.principal == "alice"]
        assert len(shown) == 2
        assert ledger.erase(key="e", what="principal", subject="alice").erased == shown
        assert not any(query.encode() in (p or b"") for p in bodies(ledger).values())


def test_a_key_reused_for_another_erasure_is_refused(ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    learn(ledger, "b1", P2, "bob", BOB_TARGET)
    ledger.erase(key="k", what="principal", subject="alice")
    head = ledger.log.head()
    with pytest.raises(KeyReusedError, match="erasing principal alice"):
        ledger.erase(key="k", what="principal", subject="bob")
    assert ledger.log.head() == head
    assert lessons_on(ledger, BOB_TARGET)
    with pytest.raises(InvalidCommandError):
        ledger.erase(key="k2", what="principal", subject="bob", actor="")


@pytest.mark.parametrize("change", [{"reason": "another"}, {"actor": "mallory"},
                                    {"principal": "bob"}], ids=lambda c: ",".join(c))
def test_a_key_reused_for_the_same_erasure_saying_else_is_refused(
        ledger: Ledger, change: dict[str, str]) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    erasure: dict[str, Any] = {"key": "k", "what": "principal", "subject": "alice",
                               "reason": "request"}
    first = ledger.erase(**erasure)
    head = ledger.log.head()
    with pytest.raises(KeyReusedError, match="erasing principal alice"):
        ledger.erase(**(erasure | change))
    assert ledger.log.head() == head
    assert ledger.erase(**erasure) == first


def test_an_erasure_of_more_than_a_record_holds_is_split_and_answered_whole(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real limit is 100k positions a record; two make the split show on a small log.
    monkeypatch.setattr("lessonledger.commands.erasure.ERASED_PER_RECORD", 2)
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    learn(ledger, "a2", P2, "alice", BOB_TARGET)
    alices = [r.envelope.position for r in ledger.log.scan() if r.envelope.principal == "alice"]
    assert len(alices) > 2
    head = ledger.log.head()
    erasure = ledger.erase(key="e", what="principal", subject="alice")
    records = (len(alices) + 1) // 2
    assert ledger.log.head() == head + records
    assert (erasure.position, erasure.erased) == (head + 1, alices)
    assert ledger.erase(key="e", what="principal", subject="alice") == erasure
    assert ledger.log.head() == head + records


def test_erasing_an_erased_outcome_says_so(ledger: Ledger) -> None:
    outcome = learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    first = ledger.erase(key="e1", what="outcome", subject=str(outcome))
    with pytest.raises(NothingToEraseError, match="erased already") as again:
        ledger.erase(key="e2", what="outcome", subject=str(outcome))
    assert again.value.erased_at == first.position


def test_erasing_an_erased_lesson_is_nothing_to_erase_and_says_where(ledger: Ledger) -> None:
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    [lesson] = lessons_on(ledger, ALICE_TARGET)
    first = ledger.erase(key="e1", what="lesson", subject=str(lesson))
    head = ledger.log.head()
    with pytest.raises(NothingToEraseError, match="erased already") as again:
        ledger.erase(key="e2", what="lesson", subject=str(lesson))
    assert (again.value.erased, again.value.erased_at) == (len(first.erased), first.position)
    assert ledger.log.head() == head
    with pytest.raises(LessonNotFoundError) as found:  # the CLI's way to the id
        ledger.find_lesson(str(lesson)[:8])
    assert found.value.erased == lesson


@pytest.mark.parametrize("what", ["outcome", "principal"])
def test_a_confirmation_citing_an_erased_outcome_goes_with_it(
        tmp_path: Path, what: str) -> None:
    # An extractor's lesson citing carol's outcome is absorbed by bob's: the confirmation
    # that follows carries the extractor's principal, but the evidence is carol's.
    with open_ledger(tmp_path, sync=False) as ledger:
        learn(ledger, "b1", P1, "bob", ALICE_TARGET, session="s-bob")
        [lesson] = lessons_on(ledger, ALICE_TARGET)
        before = ledger.lesson(lesson)
        carols = ledger.observe_outcome(
            key="c1", project=P1, principal="carol", session="s-carol", passed=False,
            operations=[Operation(op=AVOID, target=ALICE_TARGET, ok=False, error="x"),
                        Operation(op=PREFER, target=ALICE_TARGET, ok=True, order=1)],
        ).ids["outcome_id"]
        ledger.propose_lesson(key="x1", project=P1, text="prefer the root", kind="prefer",
                              avoid_op=AVOID, prefer_op=PREFER, target=ALICE_TARGET,
                              evidence=[carols], principal="extractor")
        assert carols in ledger.lesson(lesson).evidence
        ledger.erase(key="e", what=what,
                     subject=str(carols) if what == "outcome" else "carol")
        after = ledger.lesson(lesson)
        assert (after.confidence, after.evidence, after.sessions) == (
            before.confidence, before.evidence, before.sessions)


def test_bodies_that_are_no_catalogue_event_are_erased_too(ledger: Ledger) -> None:
    # Another writer (an application) may append raw bodies stamped with a principal.
    ledger.log.append([NewEvent("notes", v, "note", b"x", principal="alice")
                       for v in range(3)])
    learn(ledger, "a1", P1, "alice", ALICE_TARGET)
    erasure = ledger.erase(key="e", what="principal", subject="alice")
    assert erasure.erased[:3] == [1, 2, 3]
    assert all(bodies(ledger)[p] is None for p in erasure.erased)


def test_a_ledger_folding_an_erasure_late_decides_nothing_anew(tmp_path: Path) -> None:
    # The second outcome's blip taught nothing while the first one's lesson was on file;
    # a view without that lesson might decide otherwise: it must not get the chance.
    blip = [Operation(op="C", target="t", ok=False, error="connection timed out"),
            Operation(op="B", target="t", ok=True, order=1)]
    with open_ledger(tmp_path, sync=False) as idle, open_ledger(tmp_path, sync=False) as busy:
        busy.observe_outcome(key="o1", principal="p1", project=P1, passed=True, operations=[
            Operation(op="A", target="t", ok=False, error="syntax error"),
            Operation(op="B", target="t", ok=True, order=1)])
        busy.observe_outcome(key="o2", principal="p2", project=P1, passed=True,
                             operations=blip)
        erasure = busy.erase(key="e", what="principal", subject="p1")
        idle.lessons(P1, record=False)
        assert idle.log.head() == erasure.position
        assert idle.view.dump() == busy.view.dump()


class _FailingOnce:
    """The default embedder, failing on the first call after ``arm``."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.armed = False

    def arm(self) -> None:
        self.armed = True

    def embed(self, texts: list[str]) -> Any:
        if self.armed:
            self.armed = False
            msg = "embedder down"
            raise RuntimeError(msg)
        return self.inner.embed(texts)


def test_an_index_rebuild_that_fails_after_an_erasure_is_retried_not_saved(
        tmp_path: Path) -> None:
    embedder = _FailingOnce()
    with open_ledger(tmp_path, sync=False, embedder=embedder) as ledger:
        learn(ledger, "a1", P1, "alice", ALICE_TARGET)
        learn(ledger, "b1", P2, "bob", BOB_TARGET)
        [alices] = lessons_on(ledger, ALICE_TARGET)
    with open_ledger(tmp_path, sync=False, embedder=embedder) as ledger:
        embedder.arm()
        # Committed, so it returns its receipt (issue 12, rule 8): the index built afresh
        # without the erased lesson waits for the embedder, and is never the old one.
        erased = ledger.erase(key="e", what="principal", subject="alice")
        assert erased.erased
        assert alices not in ledger.recaller.index
    with open_ledger(tmp_path, sync=False) as reopened:
        assert alices not in reopened.recaller.index
        assert lessons_on(reopened, BOB_TARGET)


def test_erasing_an_outcome_takes_every_observation_of_its_id(ledger: Ledger) -> None:
    # A ledger before attack13 took an outcome id observed again (a raw submission on a
    # stream of its own): the view shows the last observation, so erasing the first
    # alone left the outcome in the view and its body in the log. Such logs still open.
    outcome_id = uuid4()

    def observed(error: str) -> Submission:
        eid = uuid4()
        return Submission(event_id=eid, stream=eid, version=0, occurred_at=T0, actor="pub",
                          event=OutcomeObserved(
                              outcome_id=outcome_id, project=P1, passed=False, signal="tool",
                              operations=[Operation(op=AVOID, target="t", ok=False,
                                                    error=error)]))

    assert all(isinstance(r, Receipt) for r in ledger.execute_each([observed("first sighting")]))
    refused = ledger.execute_each([observed("second sighting")])
    assert not isinstance(refused[0], Receipt)  # refused now; written as that ledger did:
    ledger.log.append([to_new_event(observed("second sighting"))])
    ledger.catch_up()
    assert outcome_id in ledger.view.outcomes
    ledger.erase(key="e", what="outcome", subject=str(outcome_id))
    assert outcome_id not in ledger.view.outcomes
    assert not [r for r in ledger.log.scan() if r.payload is not None
                and b"sighting" in r.payload]


def test_a_retry_after_its_erasure_returns_the_original_receipt(ledger: Ledger) -> None:
    """The ids a command minted are in its receipt on a retry too, its bodies erased."""
    ops = [Operation(op=AVOID, target=ALICE_TARGET, ok=False, error="no conftest"),
           Operation(op=PREFER, target=ALICE_TARGET, ok=True, order=1)]
    outcome = {"key": "o1", "project": P1, "principal": "alice", "session": "gone",
               "passed": True, "occurred_at": T0, "operations": ops}
    observed = ledger.observe_outcome(**outcome)
    lesson = {"key": "l1", "project": P1, "principal": "alice", "session": "gone",
              "text": "Prefer pytest from the repository root", "kind": "prefer",
              "avoid_op": AVOID, "prefer_op": PREFER, "target": BOB_TARGET,
              "occurred_at": T0}
    proposed = ledger.propose_lesson(**lesson)
    assert set(observed.ids) == {"outcome_id"}
    assert set(proposed.ids) == {"lesson_id"}
    ledger.erase(key="e", what="session", subject="gone")
    assert all(bodies(ledger)[p] is None for p in observed.positions + proposed.positions)
    head = ledger.log.head()
    assert ledger.observe_outcome(**outcome) == observed
    assert ledger.propose_lesson(**lesson) == proposed
    assert ledger.log.head() == head
