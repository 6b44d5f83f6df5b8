"""``lessonledger demo``: a scripted agent learns, stops repeating a mistake, and unlearns.

The agent is a few lines of Python, not a model. Before each task it asks the ledger
for its project's lessons (plan time), orders the ways it knows of doing the task so that
what a lesson says to avoid goes last and what it prefers goes first, tries them against
a small fake repository until one works, and records the outcome. Nothing else tells the
ledger anything: the lessons come from the ledger's own policies.

The story: the obvious ``pytest tests/`` fails in this repository and running from the
root works; later the repository changes and the opposite holds. The same sessions run
with memory off for comparison. Idempotency keys come from the story, so running the
demo again writes no outcome twice (only the new recalls are recorded).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lessonledger.commands.ledger import Ledger, open_ledger
from lessonledger.commands.messages import Operation
from lessonledger.ledger.verify import verify
from lessonledger.ops.config import open_log, sync_setting

__all__ = ["run_demo"]

_PROJECT = hashlib.sha256(b"git@example.invalid:demo/shop.git").hexdigest()[:32]
_TARGET = "tests"
_SUBDIR, _ROOT = "pytest:tests/", "pytest:root"
_HABIT = (_SUBDIR, _ROOT)  # what an agent with no memory tries first
_TASKS = ("fix the cart total", "add a discount rule", "rename the tax module",
          "speed up checkout", "handle empty carts")


def _works(op: str, flipped: bool) -> tuple[bool, str]:
    if op == _SUBDIR:
        return (True, "") if flipped else (False, "no conftest found")
    return (False, "no tests ran") if flipped else (True, "")


def _plan(ledger: Ledger | None, session: str) -> list[str]:
    if ledger is None:
        return list(_HABIT)
    lessons = ledger.lessons(_PROJECT, session=session)
    avoid = {r.avoid_op for r in lessons if r.target == _TARGET}
    prefer = [r.prefer_op for r in lessons if r.target == _TARGET and r.prefer_op]
    order = [*prefer, *(op for op in _HABIT if op not in prefer)]
    return sorted(order, key=lambda op: op in avoid)


def _session(ledger: Ledger | None, name: str, task: str, flipped: bool) -> int:
    """Run one task; return how many failed attempts it took."""
    operations = []
    for order, op in enumerate(_plan(ledger, name)):
        ok, error = _works(op, flipped)
        operations.append(Operation(op=op, target=_TARGET, ok=ok, error=error, order=order))
        if ok:
            break
    if ledger is not None:
        ledger.observe_outcome(key=f"demo/{name}", session=name, project=_PROJECT, task=task,
                               passed=True, operations=operations)
    return sum(not o.ok for o in operations)


def _story(ledger: Ledger | None) -> list[tuple[str, int]]:
    sessions = [(f"s{i + 1}", task, i >= 3) for i, task in enumerate(_TASKS)]
    return [(name, _session(ledger, name, task, flipped)) for name, task, flipped in sessions]


def run_demo(home: Path) -> int:
    """Run the story with memory on (in ``home``) and off, and tell what happened."""
    with open_log(home, create=True):
        pass  # make (or find) the home, as `lessonledger init` does
    with open_ledger(home, sync=sync_setting()) as ledger:
        with_memory = _story(ledger)
        lessons = ledger.lessons(_PROJECT, record=False)
        retired = [r for r in ledger.view.lessons.values() if not r.active]
        story = ledger.why(lessons[0].lesson_id) if lessons else None
        report = verify(ledger.log)
    without = _story(None)
    print(f"ledger home: {home}\n")
    print("Five tasks in one project; after the third the repository changes, so the")
    print("way that worked stops working and the way that failed starts to work.\n")
    print("  session  failed attempts: memory on | memory off")
    for (name, on), (_, off) in zip(with_memory, without, strict=True):
        print(f"  {name:<8} {on:>22} | {off}")
    print(f"\n  repeated mistakes: {sum(with_memory[i][1] for i in (1, 2, 4))} with memory, "
          f"{sum(without[i][1] for i in (1, 2, 4))} without "
          "(after the first time each way was seen to fail)")
    print("\nWhat the agent knows now:")
    for row in lessons:
        print(f"  [{row.status}, {row.confidence:.2f}] {row.text}")
    for row in retired:
        print(f"  (no longer shown: {row.text} — {row.status}, {row.reason})")
    if story is not None:
        short = str(story.lesson.lesson_id)[:18]
        print(f"\nWhy the first lesson exists (`lessonledger why {short}`):")
        for step in story.steps:
            cited = f", outcome {str(step.outcome)[:18]}" if step.outcome else ""
            print(f"  @{step.position:<4} {step.type:<22} by {step.actor:<7} -> "
                  f"{step.confidence:.2f}{cited}")
    print(f"\nverify: {report.checked} events, chain and bodies "
          f"{'intact' if report.ok else 'DAMAGED'}")
    print("next: `lessonledger lessons list`, `lessonledger log --json`, `lessonledger recall "
          f"--project {_PROJECT} 'run the tests'`")
    return 0 if report.ok else 1
