"""``lessonledger demo``: a small, real agent story recorded in the ledger and read back.

Two sessions of one project: in the first, the obvious way to run the tests fails and
another way works; a lesson is proposed from that outcome; in the second session the
lesson is followed and confirmed. Event ids are derived from the story, so running the
demo again appends nothing: the ledger answers with the original positions.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from lessonledger.ledger.events import (
    AnyEvent,
    LessonConfirmed,
    LessonProposed,
    Operation,
    OutcomeObserved,
)
from lessonledger.ledger.submission import new_event
from lessonledger.ledger.verify import verify
from lessonledger.ops.config import open_log
from lessonledger.ops.render import record_line

__all__ = ["run_demo"]

_NS = uuid.UUID("6c1d0f3e-5a8b-4c2e-9f1a-3b7d2e4c6a80")
_PROJECT = hashlib.sha256(b"git@example.invalid:demo/shop.git").hexdigest()[:32]
_TARGET = hashlib.sha256(b"tests/").hexdigest()[:32]


def _id(name: str) -> uuid.UUID:
    return uuid.uuid5(_NS, name)


def _story() -> list[tuple[str, str, AnyEvent]]:
    """The demo's events as (session, stream name, event)."""
    lesson = _id("lesson")
    return [
        ("session-a", "outcome-a", OutcomeObserved(
            outcome_id=_id("outcome-a"), project=_PROJECT, task="fix the cart total",
            passed=True, signal="verification", operations=[
                Operation(op="pytest:tests/", target=_TARGET, ok=False,
                          error="conftest not found", order=0),
                Operation(op="pytest:root", target=_TARGET, ok=True, order=1)])),
        ("session-a", "lesson", LessonProposed(
            lesson_id=lesson, kind="prefer", avoid_op="pytest:tests/", prefer_op="pytest:root",
            text="Run pytest from the repository root; from tests/ it finds no conftest.",
            target=_TARGET, scope=_PROJECT, source="loop", evidence=[_id("outcome-a")])),
        ("session-b", "outcome-b", OutcomeObserved(
            outcome_id=_id("outcome-b"), project=_PROJECT, task="add a discount rule",
            passed=True, signal="verification", in_play=[lesson], operations=[
                Operation(op="pytest:root", target=_TARGET, ok=True, order=0)])),
        ("session-b", "lesson", LessonConfirmed(
            lesson_id=lesson, outcome_id=_id("outcome-b"), project=_PROJECT)),
    ]


def run_demo(home: Path) -> int:
    """Record the story in ``home`` (created if needed) and print what the ledger holds."""
    versions: dict[str, int] = {}
    events = []
    for session, stream, event in _story():
        version = versions[stream] = versions.get(stream, -1) + 1
        events.append(new_event(
            event, stream=_id(stream), version=version, event_id=_id(f"{stream}/{version}"),
            actor="demo-agent", principal="demo-user", session=session))
    with open_log(home, create=True) as log:
        before = log.head()
        positions = log.append(events)
        appended = log.head() - before
        print(f"ledger home: {home}")
        print(f"recorded {len(events)} events at positions {positions[0]}..{positions[-1]}"
              f" ({appended} new; a repeated event id is a no-op)\n")
        for record in log.read(positions[0], stop=positions[-1]):
            print(record_line(record))
        report = verify(log)
    print(f"\nverify: {report.checked} events, chain and bodies "
          f"{'intact' if report.ok else 'DAMAGED'}")
    print("next: `lessonledger log --json`, `lessonledger stats`, `lessonledger verify`")
    return 0 if report.ok else 1
