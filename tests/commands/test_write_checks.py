"""A caller's checks inside the write transaction: ``admit`` per item, ``guarded`` per txn.

A hub authorizes each write there, by the sender's grant as the transaction sees it:
the views have folded everything any process committed before it, so a grant another
process wrote a moment ago is in force, without catching up first. A refusal from
either check writes nothing of what it refused.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from lessonledger.commands import Ledger, ObserveOutcome, open_ledger
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.commands.messages import command_from
from lessonledger.commands.receipts import Receipt
from lessonledger.projections.access import Grant
from lessonledger.sync.keys import load_public, new_keys

P = "a" * 32
PRINCIPAL = "someone"

GRANT = """
import sys
from lessonledger.commands import Ledger
from lessonledger.commands.access import GrantAccess
with Ledger(sys.argv[1]) as ledger:
    ledger.execute(GrantAccess(key="grant-late", key_name="late", public_key=sys.argv[2],
                               principal="late", write=[sys.argv[3]]))
"""


def outcome(key: str) -> ObserveOutcome:
    return command_from({"key": key, "project": P, "passed": True}, ObserveOutcome)


def refuse(at: int) -> Any:
    def admit(index: int, item: Any) -> Any:
        if index == at:
            raise AccessRefusedError(PRINCIPAL, P, "write")
        return item
    return admit


def test_admit_sees_a_grant_another_process_committed_without_catching_up(
        tmp_path: Path) -> None:
    public = load_public(new_keys(tmp_path / "keys", "late")[0]).decode()
    with open_ledger(tmp_path / "h") as ledger:
        ledger.execute(outcome("first"))
        assert ledger.grant_as_folded(public) is None
        subprocess.run([sys.executable, "-c", GRANT, str(tmp_path / "h"), public, P],
                       check=True)
        assert ledger.grant_as_folded(public) is None  # not folded outside a transaction
        seen: list[Grant | None] = []

        def admit(index: int, item: Any) -> Any:
            seen.append(ledger.grant_as_folded(public))
            return item

        ledger.execute_each([outcome("second")], admit=admit)
        (grant,) = seen
        assert grant is not None
        assert grant.principal == "late"


def test_an_item_admit_refuses_is_refused_alone(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h") as ledger:
        first, refused, third = ledger.execute_each(
            [outcome("one"), outcome("two"), outcome("three")], admit=refuse(1))
        assert isinstance(first, Receipt)
        assert isinstance(third, Receipt)
        assert isinstance(refused, AccessRefusedError)
        items, results = ledger.execute_gathered(outcome("four"), lambda: None,
                                                 admit=refuse(0))
        assert len(items) == 1
        assert isinstance(results[0], AccessRefusedError)
        head = ledger.log.head()
        # The refused ones were never written: run without the check, they are new.
        two, four = ledger.execute_each([outcome("two"), outcome("four")])
        assert isinstance(two, Receipt)
        assert isinstance(four, Receipt)
        assert min(two.positions + four.positions) > head


def test_a_batch_admit_refuses_writes_nothing(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h") as ledger:
        ledger.execute(outcome("before"))
        head = ledger.log.head()
        with pytest.raises(AccessRefusedError):
            ledger.execute_all([outcome("a"), outcome("b")], admit=refuse(1))
        assert ledger.log.head() == head
        assert len(ledger.execute_all([outcome("a"), outcome("b")])) == 2


def test_a_guard_refuses_its_threads_transactions_only(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h") as ledger:
        ledger.execute(outcome("before"))
        head = ledger.log.head()

        def deny() -> None:
            raise AccessRefusedError(PRINCIPAL, "", "admin")

        others: list[Receipt | BaseException] = []

        def elsewhere() -> None:
            try:
                others.append(ledger.execute(outcome("other-thread")))
            except BaseException as e:
                others.append(e)

        with ledger.guarded(deny):
            with pytest.raises(AccessRefusedError):
                ledger.execute(outcome("guarded"))
            with pytest.raises(AccessRefusedError):
                ledger.erase(key="erase-s", what="session", subject="s-none", reason="x")
            assert ledger.log.head() == head
            thread = threading.Thread(target=elsewhere)
            thread.start()
            thread.join()
        assert isinstance(others[0], Receipt), others
        assert isinstance(ledger.execute(outcome("guarded")), Receipt)  # after the block


def test_guards_nest_and_unwind(tmp_path: Path) -> None:
    calls: list[str] = []
    with Ledger(tmp_path / "h") as ledger:
        with ledger.guarded(lambda: calls.append("outer")):
            with ledger.guarded(lambda: calls.append("inner")):
                ledger.execute(outcome("one"))
            ledger.execute(outcome("two"))
        ledger.execute(outcome("three"))
    assert calls == ["outer", "inner", "outer"]
