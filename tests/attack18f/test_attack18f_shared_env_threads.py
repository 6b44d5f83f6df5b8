"""Threads opening and closing one home read-only at once: a spurious refusal.

The promise (ledger/lmdb_env.py ``read_only``, commit 1155ea3): "Opens of one home in a
process share one environment, as :func:`reading`'s do: LMDB refuses a second
environment of a file in a process"; the registry is guarded by ``_homes_lock`` so that
threads share it (``_open_reading``: "or share one another thread opened").

``_let_go_read_only`` (and ``_let_go_reading``, the same since attack16) removes the
home from the registry under the lock but closes its environment after releasing it.
A thread opening the home in that gap finds no shared environment, opens a second one
while the first is still open, and LMDB refuses it: ``LedgerConfigError: ... is already
open in this process``. ``release`` (for :func:`acquire`) closes under the lock, and so
never fails this way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import _attack18f_paths  # noqa: F401
import pytest
from lessonledger.commands import open_ledger
from lessonledger.ledger.lmdb_env import LMDBHome, read_only, reading
from lessonledger.ledger.log import LOG_NAME, EventLog

#: How long the threads try; the refusal came within the first second in every run.
BUDGET = 10.0


@pytest.mark.parametrize("opener", [read_only, reading], ids=["read_only", "reading"])
def test_threads_opening_one_home_read_only_all_share_it(
        tmp_path: Path, opener: Callable[[str], AbstractContextManager[LMDBHome]]) -> None:
    home = str(tmp_path / "home")
    with open_ledger(home, sync=False):
        pass
    errors: list[str] = []
    stop = time.monotonic() + BUDGET

    def reader() -> None:
        while time.monotonic() < stop and not errors:
            try:
                with opener(home) as opened:
                    EventLog(opened, LOG_NAME).head()
            except Exception as e:
                errors.append(repr(e))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
