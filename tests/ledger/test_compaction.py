"""Compaction: erased bytes leave every file of the home, and only when nobody has it open.

Real LMDB homes in temporary directories and real processes; the residue check reads
every byte of every file under the home.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lessonledger.ledger import EventLog, HomeBusyError, LedgerConfigError, NewEvent, Record
from lessonledger.ledger.compaction import compact
from lessonledger.ledger.lmdb_env import LOCK_FILE, acquire, release
from lessonledger.ledger.verify import verify
from residue import erase, found, holder, secret

LOG = "ledger"
@contextmanager
def opened(path: str) -> Iterator[EventLog]:
    home = acquire(path)
    try:
        yield EventLog(home, LOG)
    finally:
        release(home)


def fill(path: str, events: int = 40) -> dict[int, list[bytes]]:
    """Append small (inline) and large (overflow-page) payloads; return each one's secrets.

    A large payload carries a secret at both ends, so its last overflow page counts too.
    """
    secrets: dict[int, list[bytes]] = {}
    batch = []
    for version in range(events):
        if version % 2:
            head, tail = secret(), secret()
            payload = head + os.urandom(6000) + tail
            secrets[version + 1] = [head, tail]
        else:
            mark = secret()
            payload = mark + b"." * (100 - len(mark))
            secrets[version + 1] = [mark]
        batch.append(NewEvent("victims", version, "note", payload))
    with opened(path) as log:
        assert log.append(batch) == list(secrets)
    return secrets


def digest(path: str) -> str:
    return hashlib.sha256(Path(path, "data.mdb").read_bytes()).hexdigest()


def test_compaction_removes_erased_bytes_from_every_file_and_keeps_the_rest(home: str) -> None:
    secrets = fill(home)
    erased = [p for p in secrets if p % 3 == 0 or p in (1, 2)]  # small and large ones
    kept = [s for p, ss in secrets.items() if p not in erased for s in ss]
    gone = [s for p in erased for s in secrets[p]]
    with opened(home) as log:
        assert erase(log, erased) == len(erased)
        before: list[Record] = log.read()
    # The negative control: a delete alone leaves every erased secret in the file.
    assert found(home, gone) == set(gone)

    result = compact(home)

    assert found(home, gone) == set()
    assert found(home, kept) == set(kept)
    assert 0 < result.bytes_after < result.bytes_before
    assert result.seconds > 0
    with opened(home) as log:
        assert log.read() == before
        assert [r.envelope.position for r in before[:-1]] == list(secrets)
        report = verify(log)
    assert report.ok, report.problems
    assert report.erased == erased
    assert not [n for n in os.listdir(home) if n.startswith(".compact-")]


def test_compaction_of_nothing_erased_keeps_every_record(home: str) -> None:
    secrets = fill(home, events=6)
    with opened(home) as log:
        before = log.read()
    compact(home)
    compact(home)  # twice in a row is fine
    with opened(home) as log:
        assert log.read() == before
        assert verify(log).ok
    everything = [s for ss in secrets.values() for s in ss]
    assert found(home, everything) == set(everything)


def test_a_home_open_in_another_process_is_not_compacted(home: str) -> None:
    secrets = fill(home, events=4)
    with opened(home) as log:
        log.erase_bodies([1, 2])
    unchanged = digest(home)
    with holder(home):
        with pytest.raises(HomeBusyError, match="open in another process") as caught:
            compact(home)
        assert caught.value.path == os.path.realpath(home)
        assert isinstance(caught.value, LedgerConfigError)
        assert digest(home) == unchanged
        assert not [n for n in os.listdir(home) if n.startswith(".compact-")]
    compact(home)  # the holder has exited
    assert found(home, secrets[1] + secrets[2]) == set()


def test_a_home_open_in_this_process_is_not_compacted(home: str) -> None:
    fill(home, events=2)
    unchanged = digest(home)
    lmdb_home = acquire(home)
    again = acquire(home)  # a second user of the same open environment
    try:
        with pytest.raises(HomeBusyError, match="lessonledger compact"):
            compact(home)
        release(again)
        with pytest.raises(HomeBusyError):
            compact(home)  # still one user: still open
    finally:
        release(lmdb_home)
    assert digest(home) == unchanged
    compact(home)


def test_opening_waits_while_the_home_is_compacted(home: str) -> None:
    fill(home, events=2)
    # Hold the lock as a compaction holds it (another open file, exclusively).
    fd = os.open(os.path.join(home, LOCK_FILE), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    heads: list[int] = []

    def open_it() -> None:
        with opened(home) as log:
            heads.append(log.head())

    opener = threading.Thread(target=open_it)
    try:
        opener.start()
        time.sleep(0.3)
        assert opener.is_alive(), "acquire did not wait for the compaction"
        assert not heads
    finally:
        os.close(fd)
    opener.join(timeout=30)
    assert heads == [2]


def test_a_compacted_home_takes_appends_from_several_processes(home: str) -> None:
    secrets = fill(home, events=8)
    with opened(home) as log:
        erase(log, [3, 4])  # the Erased record is position 9
    compact(home)
    # The holder is the first to open the compacted file, so LMDB rebuilds its lock
    # table there; this process then shares that table while the holder is open.
    with holder(home, stream="after"), opened(home) as log:
        assert log.append([NewEvent("after", 1, "here", b"from the test")]) == [11]
        assert verify(log).ok
    with opened(home) as log:
        assert log.head() == 12
        tail = log.read(10)
        assert [(r.envelope.type, r.payload) for r in tail] == [
            ("held", b"from the holder, first"), ("here", b"from the test"),
            ("held", b"from the holder, last")]
        assert log.read(1, limit=1)[0].payload == secrets[1][0] + b"." * (
            100 - len(secrets[1][0]))
        report = verify(log)
    assert report.ok, report.problems
    assert report.erased == [3, 4]


def test_a_crashed_compaction_leaves_an_openable_home_and_is_cleaned_up(home: str) -> None:
    fill(home, events=4)
    with opened(home) as log:
        before = log.read()
    # What a compaction killed mid-copy leaves: its temporary directory with part of a
    # file (the prefix is compaction's own).
    leftover = Path(home, ".compact-crashed")
    leftover.mkdir()
    Path(leftover, "data.mdb").write_bytes(Path(home, "data.mdb").read_bytes()[:8192])
    with opened(home) as log:
        assert log.read() == before
        assert verify(log).ok
    compact(home)
    assert not leftover.exists()
    with opened(home) as log:
        assert log.read() == before


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_a_path_that_is_not_a_home_is_refused(tmp_path: Path, make: str) -> None:
    path = tmp_path / "nothing"
    if make == "empty":
        path.mkdir()
    with pytest.raises(LedgerConfigError, match="is not a ledger home") as caught:
        compact(str(path))
    assert not isinstance(caught.value, HomeBusyError)
    assert not path.exists() or os.listdir(path) == []  # nothing was created there


def test_compaction_keeps_every_tree_with_its_flags_and_the_main_trees_own_entries(
        home: str) -> None:
    fill(home, events=6)
    lmdb_home = acquire(home)
    try:
        env = lmdb_home.env
        dups = env.open_db(b"other.dups", dupsort=True)
        with env.begin(write=True) as txn:
            txn.put(b"plain-entry", b"kept in the main tree")
            for value in (b"b", b"a", b"c"):
                txn.put(b"k", value, db=dups)
        with env.begin() as txn:
            before = {name: list(txn.cursor(env.open_db(name, txn=txn)).iternext())
                      for name, _ in txn.cursor().iternext() if name != b"plain-entry"}
    finally:
        release(lmdb_home)

    compact(home)

    lmdb_home = acquire(home)
    try:
        env = lmdb_home.env
        with env.begin() as txn:
            assert txn.get(b"plain-entry") == b"kept in the main tree"
            after = {name: list(txn.cursor(env.open_db(name, txn=txn)).iternext())
                     for name, _ in txn.cursor().iternext() if name != b"plain-entry"}
            assert env.open_db(b"other.dups", txn=txn).flags()["dupsort"]
        assert after == before
        assert after[b"other.dups"] == [(b"k", b"a"), (b"k", b"b"), (b"k", b"c")]
    finally:
        release(lmdb_home)
