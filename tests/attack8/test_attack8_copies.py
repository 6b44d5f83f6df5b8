"""A demoted global lesson's copies repeat its words (wave 5, attack8).

When a global lesson is contradicted from a third project, the policies demote it and
give each other project that supported it a project lesson of its own with the same
text. That copy is decided from the contradicting outcome, so it carries that outcome's
principal; its text is the original's, which the loop wrote from the first principal's
error message. Erasing that principal, the original lesson or the outcome it was learned
from left the copy, and every 16-byte window of the erased error with it, after the
compaction. Whatever erases a lesson's proposal now takes its copies (and their events).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.ledger.compaction import compact
from lessonledger.ledger.events import OUTCOME_OBSERVED
from residue import secret, windows, windows_left

A, B, C = "a" * 32, "b" * 32, "c" * 32


def _learned_then_demoted(home: Path, error: str) -> dict[str, str]:
    """Alice (A) and Bob (B) learn one lesson, promoted global; Carol (C) refutes it.

    Returns the ids an erasure may name: Alice's outcome and the global lesson.
    """
    def tried(first_error: str) -> list[Operation]:
        return [Operation(op="pytest:tests/", target="tests", ok=False, error=first_error),
                Operation(op="pytest:root", target="tests", ok=True, order=1)]

    with open_ledger(home, sync=False) as ledger:
        first = ledger.observe_outcome(key="a0", project=A, principal="alice",
                                       session="s-alice", passed=True,
                                       operations=tried(error))
        ledger.observe_outcome(key="b0", project=B, principal="bob", session="s-bob",
                               passed=True, operations=tried("bob's own error"))
        (learned,) = [row for row in ledger.view.lessons.values() if row.scope == "global"]
        for i, (who, project) in enumerate([("alice", A), ("bob", B)] * 2):
            ledger.recall(project, "run the tests", session=f"s-{who}", principal=who)
            ledger.observe_outcome(key=f"c{i}", project=project, principal=who,
                                   session=f"s-{who}", passed=True, operations=[
                                       Operation(op="pytest:root", target="tests", ok=True)])
        ledger.recall(C, "run the tests", session="s-carol", principal="carol")
        ledger.observe_outcome(key="x0", project=C, principal="carol", session="s-carol",
                               passed=False, operations=[
                                   Operation(op="pytest:root", target="tests", ok=False,
                                             error="boom"),
                                   Operation(op="pytest:tests/", target="tests", ok=True,
                                             order=1)])
        copies = [row for row in ledger.view.lessons.values()
                  if row.text == learned.text and row.lesson_id != learned.lesson_id]
        assert copies, "the demotion gave a supporting project a copy"
    return {"outcome": str(first.ids["outcome_id"]), "lesson": str(learned.lesson_id),
            "principal": "alice", "session": "s-alice"}


@pytest.mark.parametrize("what", ["principal", "session", "lesson", "outcome"])
def test_erasing_what_a_lesson_was_learned_from_takes_its_copies(tmp_path: Path,
                                                                what: str) -> None:
    home = tmp_path / "home"
    error = "failed: " + secret().decode()
    subjects = _learned_then_demoted(home, error)
    wanted = windows([error.encode()])
    with open_ledger(home, sync=False) as ledger:
        ledger.erase(key="e", what=what, subject=subjects[what], reason="asked")
        assert not [row for row in ledger.view.lessons.values() if error in row.text]
        # Erasing the lesson leaves the outcome it was learned from, error and all.
        kept = [r.envelope.type for r in ledger.log.scan()
                if r.payload is not None and error.encode() in r.payload]
        assert kept == ([OUTCOME_OBSERVED] if what == "lesson" else [])
    compact(str(home))
    if what != "lesson":
        assert windows_left(str(home), wanted) == {}
    with open_ledger(home, sync=False) as ledger:  # the rest still verifies and folds
        assert ledger.log.head() > 0
        assert any(row.scope == C for row in ledger.view.lessons.values())
