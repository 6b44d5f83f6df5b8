"""A closed ledger or reader says so, in the project's own error, and writes nothing.

Before, each method of a closed ledger raised LMDB's ``lmdb.Error`` from its closed
environment (a second ``close`` too), which names neither the home nor what to do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lessonledger.commands import Ledger, ObserveOutcome, Operation
from lessonledger.commands.read_side import Reader
from lessonledger.ledger.errors import LedgerClosedError, LessonLedgerError

P = "c" * 32


def _outcome(key: str) -> ObserveOutcome:
    return ObserveOutcome(key=key, project=P, session="s1", passed=False,
                          operations=[Operation(op="pytest:tests/", target="tests",
                                                ok=False, error="no conftest", order=0)])


QUERIES: dict[str, Callable[[Any], object]] = {
    "head": lambda side: side.head(),
    "recall": lambda side: side.recall(P, "pytest conftest", record=False),
    "lessons": lambda side: side.lessons(P, record=False),
    "catalogue": lambda side: side.catalogue(P),
    "outcome_stats": lambda side: side.outcome_stats(P),
    "view_at": lambda side: side.view_at(0),
    "position_at": lambda side: side.position_at(0) if side.head() else None,
}

COMMANDS: dict[str, Callable[[Ledger], object]] = {
    "execute": lambda ledger: ledger.execute(_outcome("after-close")),
    "observe_outcome": lambda ledger: ledger.observe_outcome(
        key="after-close-2", project=P, session="s1", passed=True, operations=[]),
    "flush": lambda ledger: ledger.flush(),
    "catch_up": lambda ledger: ledger.catch_up(),
}


@pytest.mark.parametrize("name", sorted(QUERIES) + sorted(COMMANDS))
def test_a_closed_ledger_refuses_in_its_own_error_and_writes_nothing(tmp_path: Path,
                                                                     name: str) -> None:
    ledger = Ledger(tmp_path / "home")
    ledger.execute(_outcome("before"))
    head = ledger.head()
    ledger.close()
    call = {**QUERIES, **COMMANDS}[name]
    with pytest.raises(LedgerClosedError) as raised:
        call(ledger)
    assert isinstance(raised.value, LessonLedgerError)
    assert raised.value.home == str((tmp_path / "home").resolve())
    assert "closed" in str(raised.value)
    ledger.close()  # a second close does nothing
    with Ledger(tmp_path / "home") as again:
        assert again.head() == head


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_a_closed_reader_refuses_in_its_own_error(tmp_path: Path, name: str) -> None:
    with Ledger(tmp_path / "home") as ledger:
        ledger.execute(_outcome("before"))
    reader = Reader(tmp_path / "home")
    reader.close()
    with pytest.raises(LedgerClosedError):
        QUERIES[name](reader)
    reader.close()


def test_closing_twice_while_open_elsewhere_keeps_the_other_open(tmp_path: Path) -> None:
    first = Ledger(tmp_path / "home")
    second = Ledger(tmp_path / "home")
    first.close()
    first.close()
    second.execute(_outcome("still-open"))
    assert second.head() >= 1
    second.close()


def test_a_query_waiting_while_another_thread_closes_refuses(tmp_path: Path) -> None:
    # A thread waiting on the lock while ``close`` held it went on, once let in, into
    # the closed environment and raised LMDB's own error. The test holds the lock
    # itself so that the asking thread is surely waiting when the ledger closes.
    ledger = Ledger(tmp_path / "home")
    ledger.execute(_outcome("before"))
    seen: list[BaseException] = []

    def ask() -> None:
        try:
            ledger.head()
        except BaseException as error:  # what it raised is what is checked
            seen.append(error)

    asker = threading.Thread(target=ask)
    with ledger._lock:
        asker.start()
        time.sleep(0.2)  # the asker is now waiting on the lock
        ledger.close()
    asker.join(10)
    assert not asker.is_alive()
    assert [type(e) for e in seen] == [LedgerClosedError], seen
