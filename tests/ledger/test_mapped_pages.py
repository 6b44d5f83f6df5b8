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


def _fill(home_path: str, count: int) -> None:
    home = acquire(home_path, sync=False)
    try:
        db = home.env.open_db(b"t")
        with home.env.begin(write=True) as txn:
            for i in range(count):
                txn.put(b"k%06d" % i, os.urandom(300), db=db)
        with home.env.begin() as txn:
            assert sum(1 for _ in txn.cursor(db=db)) == count
        let_go_of_pages(home.path)  # remembers where the map was
    finally:
        release(home)


def test_memory_mapped_where_a_closed_home_was_is_never_let_go(tmp_path: Path) -> None:
    """A drop goes by where the home is mapped now, never by where it was.

    ``MADV_DONTNEED`` on private memory zeroes it: here the closed home's address range
    is taken by anonymous memory holding a pattern, as a later allocation could.
    """
    import ctypes
    import mmap

    path = str(tmp_path / "home")
    _fill(path, 5_000)
    with open("/proc/self/maps") as maps:
        assert not any(line.rstrip("\n").endswith(os.path.join(path, "data.mdb"))
                       for line in maps), "the home is closed: nothing of it is mapped"
    from lessonledger.ledger import lmdb_env

    (start, _end), *_ = lmdb_env._RANGES[os.path.join(path, "data.mdb")]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    fixed_noreplace = 0x100000
    size = 16 * mmap.PAGESIZE
    got = libc.mmap(start, size, mmap.PROT_READ | mmap.PROT_WRITE,
                    mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | fixed_noreplace, -1, 0)
    if got in (None, ctypes.c_void_p(-1).value) or got != start:
        pytest.skip("the old address range could not be taken (MAP_FIXED_NOREPLACE)")
    try:
        ctypes.memset(start, 0x5A, size)
        let_go_of_pages(path)  # the home is closed: its old range must not be touched
        assert ctypes.string_at(start, size) == b"\x5a" * size
        _fill(path, 6_000)  # opened again, mapped elsewhere: found there
        assert ctypes.string_at(start, size) == b"\x5a" * size
    finally:
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.munmap(start, size)
