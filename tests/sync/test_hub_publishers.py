"""16 publisher processes through one hub lose nothing and end where a serial run ends.

Each publisher is a fresh interpreter sending 500 ``observe_outcome`` commands one at a
time through a hub in a process of its own; the same commands are then run one at a
time in-process into a fresh home. What must agree is what the commands mean, whatever
the interleaving (see ``tests/commands/test_concurrency.py``, whose comparison this
lifts to the hub): every active lesson's kind, operations, target, scope, status,
confidence and sets of evidence, projects and sessions, and the set of outcomes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
from hubtools import hub, outcome
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands.handlers import command_id
from lessonledger.ledger.events import OutcomeObserved, decode_event
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.verify import verify

PUBLISHERS = 16
EACH = 500
HERE = Path(__file__).resolve().parent


def meaning(ledger: Ledger) -> tuple[Counter[tuple[object, ...]], frozenset[object]]:
    ledger.catch_up()
    lessons: Counter[tuple[object, ...]] = Counter(
        (r.kind, r.avoid_op, r.prefer_op, r.target, r.scope, r.source, r.derivation,
         r.longevity, r.text, r.status, round(r.confidence, 9), frozenset(r.evidence),
         frozenset(r.projects), frozenset(r.sessions))
        for r in ledger.view.lessons.values() if r.active)
    outcomes = frozenset((o.outcome_id, o.project, o.session, o.passed)
                         for o in ledger.view.outcomes.values())
    return lessons, outcomes


def acknowledged(path: Path) -> dict[str, list[int]]:
    acks: dict[str, list[int]] = {}
    for line in path.read_bytes().splitlines():
        key, positions = msgspec.json.decode(line)
        acks[key] = positions
    return acks


@contextmanager
def publishers(endpoint: str, work: Path, each: int, timeout: float
               ) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The publisher processes, waiting for ``work / "go"``; none outlives the block."""
    procs = [subprocess.Popen([sys.executable, str(HERE / "hub_publisher.py"), endpoint,
                               str(agent), str(each), str(work / f"{agent}.acks"),
                               str(work / "go"), str(timeout)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for agent in range(PUBLISHERS)]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def finish(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """Wait for every publisher; each must exit 0."""
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err.decode()


def check_log(ledger: Ledger, acks: dict[str, list[int]]) -> None:
    """Gap-free, verified, each acknowledged command where its receipt says, once."""
    log = ledger.log
    records = list(log.scan())
    assert [r.envelope.position for r in records] == list(range(1, log.head() + 1))
    assert verify(log).ok
    ids = Counter(r.envelope.event_id for r in records)
    assert not [i for i, n in ids.items() if n > 1], "an event id is stored twice"
    for key, positions in acks.items():
        parent = command_id(key, "operator")  # a keyless hub's principal
        for i, position in enumerate(positions):
            assert log.position_of(derived_id(parent, str(i)).bytes) == position, key
        assert log.position_of(derived_id(parent, str(len(positions))).bytes) is None


def test_sixteen_publishers_lose_nothing_and_agree_with_a_serial_run(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with hub(tmp_path / "hub", tmp_path / "hub.log") as server:
        with publishers(server.endpoint, work, EACH, 60.0) as procs:
            time.sleep(0.5)
            (work / "go").touch()
            finish(procs, 600)
        assert server.terminate() == 0, "the hub did not drain and exit 0 on SIGTERM"
    log_lines = (tmp_path / "hub.log").read_text()
    assert "refused" not in log_lines, log_lines[-2000:]
    assert "batch of" in log_lines
    acks: dict[str, list[int]] = {}
    for agent in range(PUBLISHERS):
        acks.update(acknowledged(work / f"{agent}.acks"))
    assert len(acks) == PUBLISHERS * EACH

    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        check_log(ledger, acks)
        outcomes = [decode_event(r.payload) for r in ledger.log.scan()
                    if r.payload is not None and r.envelope.actor != "policy"]
        assert sum(isinstance(e, OutcomeObserved) for e in outcomes) == PUBLISHERS * EACH
        # Group commit did group: far fewer commits than commands.
        batches = [int(line.split("batch of ")[1].split()[0])
                   for line in log_lines.splitlines() if "batch of" in line]
        assert sum(batches) == PUBLISHERS * EACH
        assert max(batches) > 1
        through_hub = meaning(ledger)
    with open_ledger(tmp_path / "serial", sync=False) as serial:
        for agent in range(PUBLISHERS):
            for i in range(EACH):
                # As the hub runs them: as its principal, whose keys they are.
                serial.execute(msgspec.structs.replace(outcome(agent, i),
                                                       principal="operator"))
        alone = meaning(serial)
    assert through_hub[1] == alone[1]
    only_hub = sorted(map(str, (through_hub[0] - alone[0]).elements()))
    only_serial = sorted(map(str, (alone[0] - through_hub[0]).elements()))
    assert (only_hub, only_serial) == ([], [])
