"""A process lets go of the pages of data.mdb it has mapped in, and reads on the same.

Real LMDB homes in tmp dirs, read through the map; the process's mapped pages of the file
are counted from /proc/self/smaps (Linux only).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.lmdb_env import acquire, check_length, let_go_of_pages, release

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the pages mapped in are read from /proc")


def _mapped_kb(path: str) -> int:
    """Resident kilobytes of ``path``'s data.mdb in this process."""
    target, total, current = os.path.join(path, "data.mdb"), 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and head[0][0] in "0123456789abcdef" \
                    and ":" in head[3]:
                current = len(head) == 6 and head[5] == target
            elif current and head[0] == "Rss:":
                total += int(head[1])
    return total


def test_pages_mapped_in_are_let_go_and_read_again_the_same(tmp_path: Path) -> None:
    home = acquire(str(tmp_path / "home"), sync=False)
    try:
        db = home.env.open_db(b"t")
        rows = {b"k%06d" % i: os.urandom(300) for i in range(20_000)}
        with home.env.begin(write=True) as txn:
            for key, value in rows.items():
                txn.put(key, value, db=db)
        with home.env.begin() as txn:
            held = txn.get(b"k000007", db=db)  # a reader open across the drop
            assert dict(txn.cursor(db=db)) == rows
            before = _mapped_kb(home.path)
            assert before > 4_000, "read through the map: the pages should be mapped in"
            let_go_of_pages(home.path)
            assert _mapped_kb(home.path) < before / 10
            assert txn.get(b"k000007", db=db) == held
            assert dict(txn.cursor(db=db)) == rows
        check_length(home.env, home.path)
    finally:
        release(home)


def test_a_file_cut_short_of_pages_in_use_is_still_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "home")
    home = acquire(path, sync=True)
    try:
        db = home.env.open_db(b"t")
        with home.env.begin(write=True) as txn:
            for i in range(5_000):
                txn.put(b"k%06d" % i, b"v" * 200, db=db)
    finally:
        release(home)
    data = os.path.join(path, "data.mdb")
    os.truncate(data, os.path.getsize(data) - 4096)
    with pytest.raises(LedgerConfigError, match="damaged"):
        acquire(path, sync=True)
