"""A clone or pull of a hub that is being written to (attack6).

A pull asks the hub's head (``Hello`` → ``Refs``: head, root), then the segment ids
(``SegmentIds`` → ``Ids``), and checks that the ids hash to that root. The hub listed
the ids of its log as it stood when the second request came, so one commit in between
(any agent's) changed the open segment's id, and the pull failed as tampered ("the
path to the hub is altering data", exit 2): with one agent publishing, most clones and
pulls of the hub failed. The ids are now those of the log up to the head the pull is
for.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hubtools import hub, lessonledger
from lessonledger.commands import open_ledger
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.verify import verify
from lessonledger.sync import RemoteLedger
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.protocol import Refs, decode_reply
from lessonledger.sync.replica import prepare_clone, pull
from lessonledger.sync.service import SyncService
from residue import windows, windows_left
from sync_workload import fill

P = "3f9a0c1b2d4e5f60"


class Busy(LocalExchange):
    """Lets the hub commit ``commands`` more after each answer it gives, as agents do."""

    def __init__(self, service: SyncService, commands: int = 3) -> None:
        super().__init__(service, "r1")
        self.commands = commands
        self.written = 0

    def call(self, frame: bytes) -> bytes:
        reply = super().call(frame)
        if isinstance(decode_reply(reply), Refs):
            for _ in range(self.commands):
                self.written += 1
                self.service.ledger.observe_outcome(
                    key=f"busy-{self.written}", project=P, passed=True,
                    task=f"written meanwhile {self.written}")
        return reply


def test_a_clone_and_a_pull_of_a_hub_written_to_meanwhile_complete(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        fill(ledger, 300)  # closed segments and an open one
        replica = tmp_path / "replica"
        prepare_clone("local", replica, "r1")
        exchange = Busy(SyncService(ledger))
        first = pull(replica, exchange, sync=False)
        assert first.head < ledger.log.head()  # the hub moved on during the clone
        for _ in range(3):  # each pull is of the head it was told, and the next continues
            pull(replica, exchange, sync=False)
        final = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        assert final.head == ledger.log.head()
        assert final.head % 256  # the last segment is open: its id is the prefix's
    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        source = verify(ledger.log)
    home = acquire(str(replica), sync=False)
    try:
        mine = verify(EventLog(home, LOG_NAME))
    finally:
        release(home)
    assert mine.problems == []
    assert (mine.head, mine.chain) == (source.head, source.chain)


PUBLISHER = """
import sys
from lessonledger import open_ledger
from lessonledger.commands import Operation
with open_ledger(sys.argv[1]) as ledger:
    for i in range(1_000_000):
        ledger.observe_outcome(key=f"pub-{i}", project=sys.argv[2], passed=True,
                               task=f"task {i}",
                               operations=[Operation(op="a", target="t", ok=True)])
"""


def test_clone_and_pulls_succeed_while_an_agent_publishes_through_the_hub(
        tmp_path: Path) -> None:
    home, replica = tmp_path / "hub", tmp_path / "replica"
    with hub(home, tmp_path / "hub.log", "--query-workers", "1") as server:
        publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER, server.endpoint, P],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Wait for the publisher to be writing.
            deadline = time.monotonic() + 60
            with RemoteLedger(server.endpoint) as client:
                while client.head() < 50:
                    assert publisher.poll() is None
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            runs = [subprocess.run([lessonledger(), "clone", server.endpoint, str(replica)],
                                   capture_output=True, timeout=120)]
            runs += [subprocess.run([lessonledger(), "--home", str(replica), "pull"],
                                    capture_output=True, timeout=120) for _ in range(6)]
        finally:
            publisher.kill()
            publisher.wait()
    failed = [r.stderr.decode() for r in runs if r.returncode != 0]
    assert failed == []


class ErasingMeanwhile(LocalExchange):
    """Erases a principal at the hub just after answering the pull's hello."""

    def __init__(self, service: SyncService, principal: str) -> None:
        super().__init__(service, "r1")
        self.principal = principal
        self.done = False

    def call(self, frame: bytes) -> bytes:
        reply = super().call(frame)
        if isinstance(decode_reply(reply), Refs) and not self.done:
            self.done = True
            self.service.ledger.erase(key="meanwhile", what="principal",
                                      subject=self.principal, reason="request")
        return reply


def test_a_pull_racing_an_erasure_ends_with_the_erasure_applied(tmp_path: Path) -> None:
    """The erasure committed between the hello and the fetches took bodies the pull then
    fetched without them, and the pull ended at the older head, without the record that
    explains the gap: the replica failed ``verify`` (bodies missing, no erasure naming
    them) until some later pull. Now the pull runs once more and applies it."""
    replica = tmp_path / "replica"
    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        texts = fill(ledger, 300)
        alice = windows([t.encode() for t in texts if t.startswith("alice")])
        prepare_clone("local", replica, "r1")
        result = pull(replica, ErasingMeanwhile(SyncService(ledger), "alice"), sync=False)
        # Up to the erasure, which it applied and acknowledged (the hub's last record).
        assert result.erasures == [result.head] == [ledger.log.head() - 1]
    home = acquire(str(replica), sync=False)
    try:
        report = verify(EventLog(home, LOG_NAME))
    finally:
        release(home)
    assert report.problems == []
    assert report.erased
    assert windows_left(str(replica), alice) == {}
