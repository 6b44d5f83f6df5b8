"""Bad keyword fields through the Python API are refused like bad JSON: typed, named, unwritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import InvalidCommandError, KeyReusedError

GOOD: dict[str, Any] = {"key": "k1", "project": "a" * 32, "passed": True}


@pytest.mark.parametrize(("change", "field"), [
    ({"project": "/home/me/repo"}, "$.project"),
    ({"passed": "yes"}, "$.passed"),
    ({"operations": [{"op": "pytest", "ok": True}]}, "$.operations[0]"),
    ({"in_play": ["not-a-uuid"]}, "$.in_play[0]"),
    ({"surprise": 1}, "$"),
])
def test_bad_fields_are_named_and_nothing_is_written(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        with pytest.raises(InvalidCommandError) as caught:
            ledger.observe_outcome(**(GOOD | change))
        assert caught.value.field == field
        assert ledger.log.head() == 0
        assert ledger.observe_outcome(**GOOD).positions == [1]


@pytest.mark.parametrize("project", ["NOT HEX", "", "ABCDEF0123456789"])
def test_queries_refuse_a_project_that_is_no_digest_and_record_nothing(
        tmp_path: Path, project: str) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        for query in (lambda: ledger.recall(project, "run the tests"),
                      lambda: ledger.check(project, "pytest:tests/", "tests"),
                      lambda: ledger.lessons(project)):
            with pytest.raises(InvalidCommandError) as refused:
                query()
            assert refused.value.field == "$.project"
        ledger.flush()
        assert ledger.log.head() == 0


def test_a_key_an_earlier_command_of_another_kind_used_is_refused(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        ledger.observe_outcome(key="k", project="a" * 16, passed=True)
        head = ledger.log.head()
        with pytest.raises(KeyReusedError, match=r"outcome\.observed"):
            ledger.reconcile(key="k", now="2030-01-01T00:00:00Z")
        assert ledger.log.head() == head


def test_a_key_reused_for_a_command_of_the_same_kind_saying_else_is_refused(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        first = ledger.observe_outcome(key="k", project="a" * 16, passed=True)
        assert ledger.observe_outcome(key="k", project="a" * 16, passed=True) == first
        head = ledger.log.head()
        with pytest.raises(KeyReusedError, match="position 1"):
            ledger.observe_outcome(key="k", project="a" * 16, passed=False)
        assert ledger.log.head() == head
