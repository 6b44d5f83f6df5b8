"""The ledger under real processes: concurrent writers, SIGKILL mid-append, tampered files.

Every writer is a fresh interpreter running ``writer_proc.py`` (never a fork: an LMDB
environment must not be inherited across fork). The test process opens the home only
while no writer of its own is running, and reopens it to look at the state afresh.

Random choices come from one seed, printed by every test that uses it; set
``LL_PROC_SEED`` to replay a run.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import msgspec
import pytest
from lessonledger.ledger import EventLog, NewEvent
from lessonledger.ledger.envelope import SALT_BYTES
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.verify import VerifyReport, verify
from residue import erase
from writer_proc import (
    EVENT_TYPE,
    LOG_NAME,
    MAX_BATCH,
    STREAMS_PER_WRITER,
    event_id,
    make_event,
    parse_event_id,
    stream_of,
)

WRITER = str(Path(__file__).with_name("writer_proc.py"))
SEED = int(os.environ.get("LL_PROC_SEED", "20250611"))
#: Acknowledged events per writer: seq → position.
Acks = dict[int, dict[int, int]]


@contextmanager
def opened(path: str) -> Iterator[EventLog]:
    """Open the home afresh in this process, and close it again afterwards."""
    home = acquire(path, sync=False)
    try:
        yield EventLog(home, LOG_NAME)
    finally:
        release(home)


def parse_acks(text: str) -> dict[int, int]:
    """Parse ``seq position`` lines; an unterminated last line is dropped."""
    acks: dict[int, int] = {}
    for line in text.split("\n")[:-1]:
        seq, position = line.split()
        assert int(seq) not in acks, f"seq {seq} acknowledged twice"
        acks[int(seq)] = int(position)
    return acks


def check_log(log: EventLog, acks: Acks) -> dict[tuple[int, int], int]:
    """Check every stored event, every acknowledgement, the indexes and the chain.

    Returns the position of every stored event by ``(writer, seq)``.
    """
    head = log.head()
    found: dict[tuple[int, int], int] = {}
    records = list(log.scan())
    assert [r.envelope.position for r in records] == list(range(1, head + 1)), "gap or dup"
    assert log.read() == records
    for record in records:
        envelope = record.envelope
        writer, seq = parse_event_id(envelope.event_id)
        assert (writer, seq) not in found, f"event {writer}/{seq} stored twice"
        found[writer, seq] = envelope.position
        sent = make_event(writer, seq)
        assert envelope.stream_id == sent.stream
        assert envelope.version == sent.version
        assert envelope.type == EVENT_TYPE
        assert envelope.actor == sent.actor
        assert record.payload == sent.payload, f"payload at {envelope.position}"

    # No partial event: every position has its envelope, body and chain link.
    raw = [(p, body is not None, link is not None) for p, _, body, link in log.raw()]
    assert raw == [(p, True, True) for p in range(1, head + 1)]

    for writer in {w for w, _ in found}:
        seqs = sorted(s for w, s in found if w == writer)
        # A writer appends in order and a batch is atomic: what is stored is a prefix.
        assert seqs == list(range(len(seqs))), f"writer {writer} has holes"
        positions = [found[writer, s] for s in seqs]
        assert positions == sorted(positions), f"writer {writer} out of order"
        for k in range(STREAMS_PER_WRITER):
            stream = log.stream(stream_of(writer, k))
            expected = [s for s in seqs if s % STREAMS_PER_WRITER == k]
            assert [r.envelope.version for r in stream] == [s // STREAMS_PER_WRITER
                                                            for s in expected]
            assert [r.envelope.position for r in stream] == [found[writer, s]
                                                             for s in expected]

    for writer, pairs in acks.items():
        for seq, position in pairs.items():
            assert found.get((writer, seq)) == position, f"ack {writer}/{seq}@{position} lost"
            assert log.position_of(event_id(writer, seq)) == position

    report = verify(log)
    assert report.ok, report.problems[:10]
    assert (report.head, report.checked, report.erased) == (head, head, [])
    return found


def verify_in_fresh_process(path: str) -> VerifyReport:
    out = subprocess.run(
        [sys.executable, WRITER, "verify", path],
        capture_output=True, check=True, timeout=60, text=True,
    ).stdout
    return msgspec.json.decode(out, type=VerifyReport)


# -- 1. concurrent writers -------------------------------------------------------------


@pytest.mark.parametrize(
    ("writers", "count", "sync"),
    [pytest.param(4, 5_000, False, id="4x5000-nosync"),
     pytest.param(2, 1_000, True, id="2x1000-durable")],
)
def test_concurrent_writers(tmp_path: Path, writers: int, count: int, sync: bool) -> None:
    print(f"seed={SEED}")
    path = str(tmp_path / "home")
    barrier = tmp_path / "go"
    ack_files = [tmp_path / f"acks-{w}" for w in range(writers)]
    with ExitStack() as stack:
        procs: list[subprocess.Popen[bytes]] = []
        for w, ack_file in enumerate(ack_files):
            err = stack.enter_context(open(tmp_path / f"err-{w}", "wb"))
            cmd = [sys.executable, WRITER, "batch", path, str(w), str(count),
                   str(SEED + w), str(ack_file), str(barrier)]
            proc = stack.enter_context(subprocess.Popen(
                [*cmd, "--sync"] if sync else cmd, stdout=subprocess.DEVNULL, stderr=err,
            ))
            stack.callback(proc.kill)  # a no-op once it has exited
            procs.append(proc)
        deadline = time.monotonic() + 30
        while not all(Path(f"{f}.ready").exists() for f in ack_files):
            assert all(p.poll() is None for p in procs), "a writer died before the start"
            assert time.monotonic() < deadline, "writers did not get ready"
            time.sleep(0.01)
        started = time.monotonic()
        barrier.touch()
        for proc in procs:
            proc.wait(timeout=max(1.0, started + 60 - time.monotonic()))
        elapsed = time.monotonic() - started
    for w, proc in enumerate(procs):
        err_text = (tmp_path / f"err-{w}").read_text()
        assert proc.returncode == 0, f"writer {w} failed: {err_text}"

    acks: Acks = {w: parse_acks(f.read_text()) for w, f in enumerate(ack_files)}
    total = writers * count
    for w in range(writers):
        assert sorted(acks[w]) == list(range(count)), f"writer {w} missed acks"
    acked = [p for pairs in acks.values() for p in pairs.values()]
    assert sorted(acked) == list(range(1, total + 1)), "acked positions not exactly 1..N"

    with opened(path) as log:
        assert log.head() == total
        found = check_log(log, acks)
    assert len(found) == total
    # The writers really overlapped: count the places where the writer changes.
    owner = [w for _, (w, _) in sorted((p, k) for k, p in found.items())]
    switches = sum(a != b for a, b in itertools.pairwise(owner))
    print(f"{total} events by {writers} writers in {elapsed:.2f}s, {switches} writer switches")
    assert switches >= 2 * writers
    assert verify_in_fresh_process(path).ok


# -- 2. SIGKILL mid-append -------------------------------------------------------------


class ForeverWriter:
    """A ``forever`` writer process whose acknowledgements are collected as they come."""

    def __init__(self, path: str, writer: int, *, sync: bool) -> None:
        cmd = [sys.executable, WRITER, "forever", path, str(writer), str(SEED + writer)]
        self.writer = writer
        self.proc = subprocess.Popen(
            [*cmd, "--sync"] if sync else cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._lines: list[bytes] = []
        self._eof = False
        self._stderr: str | None = None
        self._changed = threading.Condition()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def acked(self) -> int:
        with self._changed:
            return len(self._lines)

    def wait_for(self, count: int, timeout: float = 30) -> None:
        """Wait until ``count`` events are acknowledged (the writer keeps going)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._lines) >= count or self._eof, timeout)
            reached = len(self._lines) >= count
        assert reached, f"writer {self.writer} stalled: {self.stop()}"

    def kill(self) -> dict[int, int]:
        """SIGKILL the writer now; return every acknowledgement it made."""
        os.kill(self.proc.pid, signal.SIGKILL)
        err = self.stop()
        assert self.proc.returncode == -signal.SIGKILL, f"writer {self.writer} ended: {err}"
        return parse_acks(b"".join(self._lines).decode())

    def stop(self) -> str:
        """Make sure the process is gone and its pipes closed; return its stderr."""
        if self._stderr is not None:
            return self._stderr
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._pump.join(timeout=30)  # stdout is the pump's alone: it drains to EOF
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.proc.stdout.close()
        with self.proc.stderr:
            self._stderr = self.proc.stderr.read().decode(errors="replace")
        return self._stderr


def retry_after_crash(log: EventLog, writer: int, acked: dict[int, int],
                      found: dict[tuple[int, int], int]) -> None:
    """Resend the events around the last acknowledgement, as a client without an answer would.

    Repeats keep their positions, the rest is appended, nothing is stored twice.
    """
    head = log.head()
    last = max(acked)
    retry = list(range(last - 3, last + 4))
    positions = log.append([make_event(writer, s) for s in retry])
    assert positions == sorted(positions)
    for seq, position in zip(retry, positions, strict=True):
        if (writer, seq) in found:
            assert position == found[writer, seq]
        else:
            assert position > head
        acked[seq] = position


def test_sigkill_loses_nothing_acknowledged(home: str) -> None:
    """Kill one of two concurrent writers mid-stream; the other must carry on.

    The victim may die holding LMDB's write lock; the survivor then has to recover the
    lock rather than hang. Then the survivor is killed too and everything is checked.
    """
    print(f"seed={SEED}")
    rng = random.Random(SEED)
    acks: Acks = {}
    for round_ in range(4):
        victim_id, survivor_id = 2 * round_, 2 * round_ + 1
        sync = round_ == 0  # one durable round, then the fast setting
        with ExitStack() as stack:
            victim = ForeverWriter(home, victim_id, sync=sync)
            stack.callback(victim.stop)
            survivor = ForeverWriter(home, survivor_id, sync=sync)
            stack.callback(survivor.stop)
            victim.wait_for(rng.randint(100, 1500))
            survivor.wait_for(50)
            time.sleep(rng.uniform(0.0, 0.02))
            acks[victim_id] = victim.kill()
            survivor.wait_for(survivor.acked() + 300)
            time.sleep(rng.uniform(0.0, 0.02))
            acks[survivor_id] = survivor.kill()
        with opened(home) as log:
            head = log.head()
            found = check_log(log, acks)
            for writer in (victim_id, survivor_id):
                stored = sum(1 for w, _ in found if w == writer)
                # Killed between a commit and its ack, a writer leaves at most one batch.
                assert 0 <= stored - len(acks[writer]) <= MAX_BATCH
                print(f"round {round_} writer {writer}: sync={sync} {len(acks[writer])} "
                      f"acked, {stored - len(acks[writer])} stored but unacked, head {head}")
                retry_after_crash(log, writer, acks[writer], found)
                found = check_log(log, acks)
        assert verify_in_fresh_process(home).ok


def test_writer_killed_holding_the_write_lock(home: str) -> None:
    """A writer killed inside its write transaction: its event is gone, others go on.

    The survivor has the home open before the kill, so LMDB has to recover the dead
    owner's write lock (a robust mutex) instead of starting from a fresh lock file.
    """
    holder_id, survivor_id = 90, 91
    with ExitStack() as stack:
        survivor = ForeverWriter(home, survivor_id, sync=False)
        stack.callback(survivor.stop)
        survivor.wait_for(200)
        holder = stack.enter_context(subprocess.Popen(
            [sys.executable, WRITER, "hold", home, str(holder_id)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ))
        stack.callback(holder.kill)
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"holding\n"
        before = survivor.acked()
        time.sleep(0.3)
        stalled = survivor.acked()
        assert stalled - before <= MAX_BATCH, "the survivor wrote while the lock was held"
        os.kill(holder.pid, signal.SIGKILL)
        assert holder.wait(timeout=30) == -signal.SIGKILL
        survivor.wait_for(stalled + 500, timeout=30)
        acks: Acks = {survivor_id: survivor.kill()}
    with opened(home) as log:
        found = check_log(log, acks)
        assert log.position_of(event_id(holder_id, 0)) is None
        assert {w for w, _ in found} == {survivor_id}
    assert verify_in_fresh_process(home).ok


# -- 3. tampering and erasure ----------------------------------------------------------


def flip_everywhere(data: bytearray, needle: bytes, offset: int) -> int:
    """Flip the low bit of ``needle[offset]`` at every occurrence of ``needle``."""
    count, start = 0, 0
    while (i := data.find(needle, start)) != -1:
        data[i + offset] ^= 0x01
        count += 1
        start = i + 1
    return count


def tamper_events(n: int) -> list[NewEvent]:
    return [
        NewEvent(stream=f"tamper-{i % 3}", version=i // 3, type="Tampered",
                 payload=f"distinctive body number {i:03d} ".encode() * 4,
                 event_id=bytes([0xEE, i]) * 8, actor=f"tamper-actor-{i:03d}")
        for i in range(n)
    ]


def test_tampered_bytes_are_named(home: str) -> None:
    envelope_at, body_at = 4, 9
    lmdb_home = acquire(home, sync=True)
    try:
        log = EventLog(lmdb_home, LOG_NAME)
        assert log.append(tamper_events(12)) == list(range(1, 13))
        stored = {p: (envelope, body) for p, envelope, body, _ in log.raw()}
        assert verify(log).ok
    finally:
        release(lmdb_home)

    data_file = Path(home) / "data.mdb"
    data = bytearray(data_file.read_bytes())
    envelope, _ = stored[envelope_at]
    actor = f"tamper-actor-{envelope_at - 1:03d}".encode()
    # Flip the actor's last digit: the envelope still decodes, only its bytes changed.
    assert flip_everywhere(data, envelope, envelope.index(actor) + len(actor) - 1) >= 1
    body = stored[body_at][1]
    assert body is not None
    assert flip_everywhere(data, body, SALT_BYTES + 3) >= 1
    with open(data_file, "r+b") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())

    expected = [(envelope_at, "envelope"), (body_at, "body")]
    with opened(home) as log:
        # LMDB hands back the edited bytes as they are now on disk.
        record = log.read(envelope_at, limit=1)[0]
        assert record.envelope.actor.encode() == actor[:-1] + bytes([actor[-1] ^ 1])
        report = verify(log)
    assert [(f.position, f.kind) for f in report.problems] == expected, report.problems
    assert (report.head, report.checked, report.erased, report.ok) == (12, 12, [], False)
    fresh = verify_in_fresh_process(home)
    assert [(f.position, f.kind) for f in fresh.problems] == expected


def test_erased_bodies_are_not_damage(home: str) -> None:
    with opened(home) as log:
        log.append(tamper_events(6))
        assert erase(log, [2, 5]) == 2
        assert erase(log, [2]) == 0
        assert [r.payload is None for r in log.read(stop=6)] == [False, True, False, False,
                                                                 True, False]
        report = verify(log)
    assert report.ok
    assert (report.erased, report.problems, report.checked) == ([2, 5], [], 8)
    fresh = verify_in_fresh_process(home)
    assert fresh.ok
    assert fresh.erased == [2, 5]
