"""attack18b: a query's record is stamped as a command's would be.

``commands/messages.py``: "spaces alone name nobody, and an erasure or export of "  "
could not tell them from a typo, so they are refused" (session, principal, actor).
``read_side._checked_stamp``: "Refuse a query's envelope fields as a command's would
be: the record carries them." Yet ``recall``/``check``/``lessons`` accept a session or
principal of spaces only and commit a ``LessonRecalled`` under it, which no erasure can
then name (``erase --session "   "`` is refused as blank): the record is unerasable by
session or principal.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _attack18b_agent import AVOID, P1, TARGET, Agent, day
from lessonledger.commands import CommandError, open_ledger


@pytest.mark.parametrize("query", ["recall", "check", "lessons"])
@pytest.mark.parametrize("field", ["session", "principal"])
def test_a_query_stamped_with_spaces_only_is_refused_and_records_nothing(
        tmp_path: Path, query: str, field: str) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        agent.learn(P1, "s1", when=day(0))
        led.flush()
        head = led.log.head()
        stamp: dict[str, Any] = {field: "   "}
        asks: dict[str, Callable[[], object]] = {
            "recall": lambda: led.recall(P1, "pytest root", **stamp),
            "check": lambda: led.check(P1, AVOID, TARGET, **stamp),
            "lessons": lambda: led.lessons(P1, **stamp)}
        with pytest.raises(CommandError):
            asks[query]()
        led.flush()
        assert led.log.head() == head


def test_whatever_a_query_records_under_a_session_that_session_can_erase(
        tmp_path: Path) -> None:
    """The consequence: the record is written, and ``erase`` of its session is refused."""
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        agent.learn(P1, "s1", when=day(0))
        led.flush()
        head = led.log.head()
        try:
            led.recall(P1, "pytest root", session="   ")
            led.flush()
        except CommandError:
            return  # refused up front: nothing recorded, nothing to erase
        assert led.log.head() == head + 1
        led.erase(key="e1", what="session", subject="   ", reason="erase my queries")
