"""A batch request holds the hub's one writer, so a hub takes at most MAX_BATCH_COMMANDS.

A batch over the limit is refused with a typed refusal that says the limit and what to
do, and nothing of it is written; a client sending maximal batches back to back does not
stop a good client beside it from being served; ``lessonledger publish --to`` sends a
larger file in batches of at most the limit, each all-or-nothing, and running it again
after a refusal writes nothing twice. A real hub process on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from hubtools import HubProcess, hub, lessonledger, outcome
from lessonledger.sync import RemoteLedger
from lessonledger.sync.protocol import Push, Pushed, Refused, decode_reply, encode
from lessonledger.sync.replica import _push_groups, _Sent
from lessonledger.sync.transport import ZmqExchange
from lessonledger.sync.wire import MAX_BATCH_COMMANDS, BatchTooLargeError

P = "a" * 32


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    base = tmp_path_factory.mktemp("batch-limit")
    with hub(base / "home", base / "hub.log") as process:
        yield process


def test_a_batch_over_the_limit_is_refused_and_writes_nothing(server: HubProcess) -> None:
    with RemoteLedger(server.endpoint, timeout=10, deadline=60) as client:
        head = client.head()
        over = [outcome(700, i) for i in range(MAX_BATCH_COMMANDS + 1)]
        with pytest.raises(BatchTooLargeError) as refused:
            client.execute_all(over)
        assert (refused.value.commands, refused.value.limit) == (
            MAX_BATCH_COMMANDS + 1, MAX_BATCH_COMMANDS)
        assert f"at most {MAX_BATCH_COMMANDS}" in str(refused.value)
        assert "publish --to" in str(refused.value)
        assert client.head() == head
        # At the limit it is one batch like any other, all of it written.
        receipts = client.execute_all(over[:MAX_BATCH_COMMANDS])
        assert len(receipts) == MAX_BATCH_COMMANDS
        assert all(r.positions for r in receipts)


def test_a_good_client_beside_maximal_batches_keeps_being_served(server: HubProcess) -> None:
    stop = threading.Event()
    batches: list[int] = []  # the first position each maximal batch wrote
    failures: list[BaseException] = []

    def flood() -> None:
        try:
            with RemoteLedger(server.endpoint, timeout=30, deadline=120) as big:
                agent = 800
                while not stop.is_set():
                    receipts = big.execute_all(
                        [outcome(agent, i) for i in range(MAX_BATCH_COMMANDS)])
                    batches.append(receipts[0].positions[0])
                    agent += 1
        except BaseException as e:  # reported below, not lost in the thread
            failures.append(e)

    thread = threading.Thread(target=flood)
    thread.start()
    good: list[int] = []
    try:
        with RemoteLedger(server.endpoint, timeout=10, deadline=60) as client:
            while len(batches) < 1 and thread.is_alive():
                client.head()
            for i in range(12):
                good.append(client.observe_outcome(
                    key=f"good-{uuid4()}", project=P, passed=True).positions[0])
                assert client.head() >= good[-1]
                assert client.lessons(P, record=False) is not None
                if i == 5:
                    seen = len(batches)
                    while len(batches) == seen and thread.is_alive():
                        client.head()  # a later batch commits before the rest of the run
    finally:
        stop.set()
        thread.join(timeout=300)
    assert not failures, failures
    # Served while the batches kept coming: some maximal batch committed between the good
    # client's first command and its last.
    assert any(good[0] < first < good[-1] for first in batches), (good, batches)


def _lines(path: Path, commands: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in commands))
    return path


def _outcome_line(key: str) -> dict[str, object]:
    return {"command": "observe_outcome", "key": key, "project": P, "passed": True,
            "operations": [{"op": "pytest:root", "target": "tests", "ok": True}]}


def _publish(server: HubProcess, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([lessonledger(), "--home", str(server.home), "publish", str(path),
                           "--to", server.endpoint], capture_output=True, text=True,
                          timeout=300)


def test_publish_to_a_hub_sends_a_large_file_in_batches(server: HubProcess,
                                                        tmp_path: Path) -> None:
    run = uuid4().hex[:8]
    count = 2 * MAX_BATCH_COMMANDS + 7
    path = _lines(tmp_path / "many.jsonl", [_outcome_line(f"{run}-{i}") for i in range(count)])
    done = _publish(server, path)
    assert done.returncode == 0, done.stderr
    receipts = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["key"] for r in receipts] == [f"{run}-{i}" for i in range(count)]
    assert f"in 3 batches of at most {MAX_BATCH_COMMANDS}, each all-or-nothing" in done.stderr
    # Again: every command's key answers with its first receipt; nothing is written twice.
    again = _publish(server, path)
    assert again.returncode == 0, again.stderr
    assert [json.loads(line) for line in again.stdout.splitlines()] == receipts


def test_a_refused_batch_stops_publish_and_says_what_was_written(server: HubProcess,
                                                                 tmp_path: Path) -> None:
    run = uuid4().hex[:8]
    commands = [_outcome_line(f"{run}-{i}") for i in range(MAX_BATCH_COMMANDS + 20)]
    bad = MAX_BATCH_COMMANDS + 10  # in the second batch: an edit of no lesson there is
    commands[bad] = {"command": "edit_lesson", "key": f"{run}-bad", "lesson_id": str(uuid4()),
                     "text": "no such lesson"}
    stopped = _publish(server, _lines(tmp_path / "bad.jsonl", commands))
    assert stopped.returncode == 2
    (message,) = stopped.stderr.splitlines()
    assert message.startswith(f"lessonledger: line {bad + 1}:"), message
    assert f"lines 1-{MAX_BATCH_COMMANDS} were published" in message
    assert "nothing of it was written" in message
    assert "again" in message
    written = [json.loads(line) for line in stopped.stdout.splitlines()]
    assert len(written) == MAX_BATCH_COMMANDS
    with RemoteLedger(server.endpoint, timeout=10, deadline=60) as client:
        head = client.head()
    # Fixed and published again: the first batch is answered with its receipts, and the
    # second is written now, past where the stopped run left the log: none of it was then.
    commands[bad] = _outcome_line(f"{run}-fixed")
    fixed = _publish(server, _lines(tmp_path / "fixed.jsonl", commands))
    assert fixed.returncode == 0, fixed.stderr
    receipts = [json.loads(line) for line in fixed.stdout.splitlines()]
    assert receipts[:MAX_BATCH_COMMANDS] == written
    assert min(p for r in receipts[MAX_BATCH_COMMANDS:] for p in r["positions"]) > head


def _pushed_line(key: str) -> bytes:
    return json.dumps(_outcome_line(key)).encode()


def test_a_push_over_the_limit_is_refused_and_one_at_it_is_decided_in_order(
        server: HubProcess) -> None:
    run = uuid4().hex[:8]
    with RemoteLedger(server.endpoint, timeout=10, deadline=60) as client:
        head = client.head()
    over = [_pushed_line(f"{run}-push-{i}") for i in range(MAX_BATCH_COMMANDS + 1)]
    with ZmqExchange(server.endpoint, timeout=60) as sync:
        refused = decode_reply(sync.call(encode(Push("r", [head] * len(over), over))))
        assert isinstance(refused, Refused)
        assert refused.code == "too large"
        assert f"at most {MAX_BATCH_COMMANDS}" in refused.message
        with RemoteLedger(server.endpoint, timeout=10, deadline=60) as client:
            assert client.head() == head
        # At the limit, with a refused one among them: decided in order, in one commit.
        lines = over[:MAX_BATCH_COMMANDS]
        lines[7] = json.dumps({"command": "edit_lesson", "key": f"{run}-bad",
                               "lesson_id": str(uuid4()), "text": "no such lesson"}).encode()
        pushed = decode_reply(sync.call(encode(Push("r", [head] * len(lines), lines))))
    assert isinstance(pushed, Pushed)
    assert len(pushed.results) == MAX_BATCH_COMMANDS
    assert pushed.results[7].refused
    assert not pushed.results[7].positions
    written = [r.positions[0] for i, r in enumerate(pushed.results) if i != 7]
    assert written == sorted(written)
    assert written[0] > head


def test_a_replica_pushes_its_outbox_in_frames_of_at_most_the_limit() -> None:
    waiting = [_Sent(1, "", b"{}") for _ in range(2 * MAX_BATCH_COMMANDS + 1)]
    assert [len(group) for group in _push_groups(waiting)] == [
        MAX_BATCH_COMMANDS, MAX_BATCH_COMMANDS, 1]
