"""A reopened vector index is brought in line with the lesson view it follows.

The keeper re-checks every lesson only when the index was saved at another position
than the view it is opened beside; at the same position the two were saved from the
same state, and only what the view folds afterwards is re-checked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lessonledger.commands import Operation, open_ledger
from lessonledger.commands.ledger import Ledger

P = "c" * 32


def _learn(ledger: Ledger, key: str, op: str, target: str) -> None:
    ledger.observe_outcome(
        key=key, project=P, principal="alice", passed=True,
        operations=[Operation(op=f"{op}-old", target=target, ok=False, error="boom"),
                    Operation(op=f"{op}-new", target=target, ok=True, order=1)])


def _indexed(home: Path) -> set[str]:
    with open_ledger(home) as ledger:
        index = ledger.recaller.index
        return {str(row.lesson_id) for row in ledger.view.briefs()
                if row.lesson_id in index}


def _active(home: Path) -> set[str]:
    with open_ledger(home) as ledger:
        return {str(row.lesson_id) for row in ledger.view.briefs() if row.active}


def test_an_index_saved_behind_the_view_gets_the_lessons_it_missed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_ledger(home) as ledger:
        _learn(ledger, "k1", "make", "build")
    older = tmp_path / "vectors-then"
    shutil.copytree(home / "vectors", older)
    with open_ledger(home) as ledger:
        _learn(ledger, "k2", "pip", "deps")
        _learn(ledger, "k3", "git", "push")
    # The views are saved at the head, the index put back as it stood two commands ago
    # (a process killed between its two saves leaves this).
    shutil.rmtree(home / "vectors")
    shutil.copytree(older, home / "vectors")
    active = _active(home)
    assert len(active) == 3
    assert _indexed(home) == active


def test_an_index_saved_with_the_view_is_reopened_as_it_was(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_ledger(home) as ledger:
        _learn(ledger, "k1", "make", "build")
        _learn(ledger, "k2", "pip", "deps")
    first = _indexed(home)
    assert first == _active(home)
    assert len(first) == 2
    with open_ledger(home) as ledger:
        _learn(ledger, "k3", "git", "push")
    assert _indexed(home) == _active(home)
    assert len(_active(home)) == 3
