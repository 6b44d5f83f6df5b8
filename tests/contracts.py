"""Contracts every registered view must keep, as a mixin (as eventsourcing ships its own).

A test class for a view subclasses :class:`ProjectionContract`, names the view and writes
a workload that touches it; the mixin then checks, on a real home:

- rebuilt equals incremental: the view folded from position 0 dumps what the live one
  dumps;
- reopened equals rebuilt: a new ledger on the home, from its saved state plus the tail,
  dumps the same;
- an erased body leaves no trace: after erasing the principal the workload wrote as,
  none of its unique text is in the view's dump or in its saved copy in the home.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from lessonledger.commands import Ledger, open_ledger
from lessonledger.projections.store import ViewStore
from residue import secret

__all__ = ["ProjectionContract"]


class ProjectionContract:
    """Mixin for a registered view's tests: set :attr:`view` and write :meth:`workload`."""

    #: The view's registered name.
    view: ClassVar[str]

    def workload(self, ledger: Ledger, principal: str, text: str) -> bytes | None:
        """Write events that the view folds, as ``principal``, carrying ``text``.

        Returns what of them the view holds, when that is not ``text`` itself (an index
        holds ids, not texts).
        """
        raise NotImplementedError

    def _home(self, tmp_path: Path) -> tuple[str, list[bytes]]:
        home = str(tmp_path / "home")
        marks = []
        with open_ledger(home, sync=False) as ledger:
            for principal in ("alice", "bob"):
                text = secret()
                marks.append(self.workload(ledger, principal, text.decode()) or text)
        return home, marks

    def test_rebuilt_equals_incremental(self, tmp_path: Path) -> None:
        home, _ = self._home(tmp_path)
        with open_ledger(home, sync=False) as ledger:
            self.workload(ledger, "carol", secret().decode())
            live = ledger.runner[self.view]
            rebuilt = ledger.runner.fresh(ledger.log, live.position, [self.view])[self.view]
            assert rebuilt.position == live.position > 0
            assert rebuilt.dump() == live.dump()

    def test_reopened_equals_rebuilt(self, tmp_path: Path) -> None:
        home, _ = self._home(tmp_path)
        with open_ledger(home, sync=False) as ledger:
            head = ledger.head()
            rebuilt = ledger.runner.fresh(ledger.log, head, [self.view])[self.view].dump()
        with open_ledger(home, sync=False) as again:
            assert again.runner[self.view].position == head
            assert again.runner[self.view].dump() == rebuilt

    def test_an_erased_body_leaves_no_trace_in_the_view_or_its_saved_copy(
            self, tmp_path: Path) -> None:
        home, (alices, bobs) = self._home(tmp_path)
        with open_ledger(home, sync=False) as ledger:
            before = ledger.runner[self.view].dump()
            assert alices in before, "the workload left no trace to erase: the test is blind"
            ledger.erase(key="erase-alice", what="principal", subject="alice", reason="r")
            after = ledger.runner[self.view].dump()
            assert alices not in after
            assert bobs in after
            ledger.save_view()
            store = ViewStore(ledger._lmdb)
            saved = store.load(self.view)
            assert saved is not None
            assert alices not in saved[1]
