"""A hub process on 127.0.0.1: the local API over the wire, refusals, busy, drain, push.

Every test talks to ``lessonledger serve`` in a process of its own, over real sockets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest
import zmq
from hubtools import HubProcess, hub, outcome
from lessonledger.commands import Operation, Receipt
from lessonledger.commands.errors import (
    AccessRefusedError,
    BatchRefusedError,
    InvalidCommandError,
    StaleVersionError,
    UnknownLessonError,
)
from lessonledger.commands.messages import EditLesson, ObserveOutcome, command_from
from lessonledger.ledger.errors import InvalidEventError
from lessonledger.ledger.ids import derived_id
from lessonledger.sync import RemoteLedger, open_ledger, wire

P = "a" * 32


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    base = tmp_path_factory.mktemp("hub")
    with hub(base / "home", base / "hub.log") as process:
        yield process


@pytest.fixture
def client(server: HubProcess) -> Iterator[RemoteLedger]:
    with RemoteLedger(server.endpoint, timeout=10, deadline=30) as remote:
        yield remote


def pair(target: str = "tests") -> list[Operation]:
    return [Operation(op="pytest:tests/", target=target, ok=False, error="no conftest"),
            Operation(op="pytest:root", target=target, ok=True, order=1)]


def test_open_ledger_takes_an_endpoint_or_a_path(server: HubProcess, tmp_path: Path) -> None:
    with open_ledger(server.endpoint) as remote:
        assert isinstance(remote, RemoteLedger)
        assert remote.head() >= 0
    with open_ledger(tmp_path / "local") as local:
        assert local.head() == 0


def test_a_command_out_of_its_schema_is_refused_and_writes_nothing(
        server: HubProcess, client: RemoteLedger) -> None:
    # The front checks a command by its typed decode alone: every bound, and UTF-8.
    head = client.head()
    long_task = ObserveOutcome(key=f"t-{uuid4()}", project=P, passed=True, task="x" * 9000)
    with pytest.raises(InvalidCommandError, match="invalid command"):
        client.execute(long_task)
    marker = "SURROGATE-HERE"
    fields = {"command": "observe_outcome", "key": f"u-{uuid4()}", "project": P, "passed": True,
              "task": marker}
    data = msgspec.msgpack.encode(fields).replace(marker.encode(), b"ab\xed\xa0\x80" + b"x" * 9)
    ctx: zmq.Context[Any] = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    try:
        sock.send(wire.encode_frame(wire.CommandRequest(msgspec.Raw(data)), 7))
        assert sock.poll(10000)
        reply: msgspec.Struct = wire.decode_body(wire.decode_frame(sock.recv()))
    finally:
        sock.close()
    assert isinstance(reply, wire.Refused)
    assert isinstance(wire.refusal_error(reply), InvalidCommandError)
    assert client.head() == head


def test_commands_and_queries_have_the_local_types(client: RemoteLedger) -> None:
    key = f"k-{uuid4()}"
    receipt = client.observe_outcome(key=key, project=P, session="s1", passed=True,
                                     operations=pair())
    assert isinstance(receipt, Receipt)
    assert receipt.ids["outcome_id"]
    # A retry returns the original receipt and writes nothing.
    head = client.head()
    again = client.observe_outcome(key=key, project=P, session="s1", passed=True,
                                   operations=pair())
    assert again == receipt
    assert client.head() == head
    rows = client.lessons(P, session="s1")
    assert rows
    assert rows[0].target == "tests"
    lesson = rows[0].lesson_id
    assert client.lesson(lesson).lesson_id == lesson
    assert client.find_lesson(str(lesson)[:13]) == lesson
    assert client.why(lesson).lesson.lesson_id == lesson
    assert "pytest:root" in client.recall(P, "run the tests").section
    assert "avoid" in client.check(P, "pytest:tests/", "tests").line
    assert [r.lesson_id for r in client.history(lesson)][-1] == lesson
    assert client.outcome_stats(P).outcomes >= 1
    assert any(r.lesson_id == lesson for r in client.catalogue(P))
    records = client.read_log(1, 10)
    assert records[0].envelope.position == 1
    assert records[0].payload is not None


def test_refusals_arrive_as_the_same_error_classes(client: RemoteLedger) -> None:
    client.observe_outcome(key=f"seed-{uuid4()}", project=P, passed=True, operations=pair())
    lesson = client.lessons(P, record=False)[0]
    with pytest.raises(StaleVersionError) as stale:
        client.edit_lesson(key=f"e-{uuid4()}", lesson_id=lesson.lesson_id, text="new words",
                           expected_version=lesson.version + 5)
    assert stale.value.lesson_id == lesson.lesson_id
    assert stale.value.current == lesson.version
    missing = uuid4()
    with pytest.raises(UnknownLessonError) as unknown:
        client.lesson(missing)
    assert unknown.value.lesson_id == missing
    with pytest.raises(InvalidCommandError) as invalid:
        client.recall("not a digest", "x")
    assert invalid.value.field == "$.project"
    bad = command_from({"key": f"b-{uuid4()}", "lesson_id": uuid4(), "text": "x"}, EditLesson)
    with pytest.raises(BatchRefusedError) as batch:
        client.execute_all([outcome(90, 0), bad])
    assert batch.value.index == 1
    assert isinstance(batch.value.cause, UnknownLessonError)
    assert client.execute_all([outcome(91, 0), outcome(91, 1)])[1].positions


def test_a_principal_field_naming_someone_else_is_refused(client: RemoteLedger) -> None:
    head = client.head()
    with pytest.raises(InvalidCommandError, match="bound to the connection") as refused:
        client.observe_outcome(key=f"spoof-{uuid4()}", project=P, passed=True,
                               principal="mallory")
    assert refused.value.field == "$.principal"
    with pytest.raises(InvalidCommandError, match="bound to the connection"):
        client.recall(P, "x", principal="mallory")
    assert client.head() == head
    # Unnamed, the principal is the hub's configured one, on every event it writes.
    receipt = client.observe_outcome(key=f"plain-{uuid4()}", project=P, passed=True)
    (record,) = client.read_log(receipt.positions[0], 1)
    assert record.envelope.principal == "operator"


def test_a_raw_submission_takes_the_event_path(client: RemoteLedger) -> None:
    event_id = uuid4()
    submission = msgspec.json.encode({
        "event_id": str(event_id), "stream": str(uuid4()), "version": 0,
        "occurred_at": "2026-01-01T00:00:00Z", "actor": "agent",
        "event": {"type": "lesson.recalled", "lesson_ids": [], "project": P}})
    receipt = client.submit(submission)
    assert client.submit(submission) == receipt
    (record,) = client.read_log(receipt.positions[0], 1)
    # The id is the sender's own (as a key is): derived from the one given, the same on
    # every retry, and never one another principal's command or event could take.
    assert record.envelope.event_id == derived_id(event_id, "submitted by operator").bytes
    assert record.envelope.principal == "operator"
    with pytest.raises(InvalidEventError):
        client.submit(b'{"event_id": 5}')


def test_status_counts_batches(client: RemoteLedger) -> None:
    client.observe_outcome(key=f"st-{uuid4()}", project=P, passed=True)
    status = client.status()
    assert status.head == client.head()
    assert status.batches >= 1
    assert status.clients >= 1
    assert status.principal_mode == "loopback"
    assert status.queue_bound == 4096


def test_subscribe_yields_new_events(client: RemoteLedger, server: HubProcess) -> None:
    head = client.head()
    seen: list[int] = []

    def follow() -> None:
        with RemoteLedger(server.endpoint) as follower:
            for record in follower.subscribe(head + 1, idle=3.0):
                seen.append(record.envelope.position)
                if len(seen) >= 2:
                    return

    thread = threading.Thread(target=follow)
    thread.start()
    time.sleep(0.3)
    receipt = client.observe_outcome(key=f"sub-{uuid4()}", project=P, passed=True,
                                     operations=pair("build"))
    thread.join(20)
    assert not thread.is_alive()
    assert seen[:1] == [head + 1]
    assert receipt.positions[0] in seen


# -- misbehaving clients ------------------------------------------------------------------


def raw(server: HubProcess) -> zmq.Socket[Any]:
    ctx: zmq.Context[Any] = zmq.Context.instance()
    sock: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    return sock


def reply(sock: zmq.Socket[Any], timeout: float = 10.0) -> msgspec.Struct:
    assert sock.poll(int(timeout * 1000)), "no reply"
    return wire.decode_body(wire.decode_frame(sock.recv()))


@pytest.mark.parametrize(("data", "problem"), [
    (b"\x00garbage\xff", "garbage"),
    (msgspec.msgpack.encode([99, "query", 1, {"query": "head"}]), "version"),
    (msgspec.msgpack.encode([wire.PROTOCOL_VERSION, "sudo", 1, None]), "kind"),
    (b"\x00" * (wire.MAX_FRAME_BYTES + 10), "oversize"),
    (wire.encode_frame(wire.Busy(5)), "kind"),
])
def test_bad_frames_get_a_typed_refusal(server: HubProcess, data: bytes, problem: str) -> None:
    sock = raw(server)
    try:
        sock.send(data)
        refused = reply(sock)
        assert isinstance(refused, wire.Refused)
        assert refused.error == "WireError"
        error = wire.refusal_error(refused)
        assert isinstance(error, wire.WireError)
        assert error.problem == problem
    finally:
        sock.close()


def test_misbehaving_clients_beside_a_good_one(server: HubProcess, client: RemoteLedger
                                               ) -> None:
    def latency(n: int = 20) -> float:
        times = []
        for _ in range(n):
            started = time.perf_counter()
            client.head()
            times.append(time.perf_counter() - started)
        return sorted(times)[n // 2]

    client.execute_all([ObserveOutcome(key=f"page-{uuid4()}", project=P, passed=True,
                                       task="x" * 400) for _ in range(200)])
    normal = latency()
    stop = threading.Event()

    def misbehave() -> None:
        ctx: zmq.Context[Any] = zmq.Context.instance()
        deaf: zmq.Socket[Any] = ctx.socket(zmq.DEALER)  # never reads a reply
        deaf.setsockopt(zmq.LINGER, 0)
        deaf.setsockopt(zmq.RCVHWM, 10)
        deaf.setsockopt(zmq.SNDHWM, 100_000)
        deaf.connect(server.endpoint)
        noisy = raw(server)
        # Pages of the log, tens of KB each: loopback's kernel buffers hold megabytes, so
        # small answers to a client that never reads would not fill its pipe for long.
        query = wire.encode_frame(wire.QueryRequest("log", {"start": 1, "limit": 1000}), 1)
        huge = b"\x00" * (3 * wire.MAX_FRAME_BYTES)  # libzmq cuts this one off
        try:
            n = 0
            while not stop.is_set():
                for _ in range(50):
                    deaf.send(query, zmq.NOBLOCK)
                noisy.send([b"\x00\x01", b"garbage", b"\xff" * 100][n % 3])
                noisy.send(msgspec.msgpack.encode([7, "query", 1, {}]))
                if n % 20 == 0:
                    big = raw(server)
                    big.send(huge)
                    big.close()
                while noisy.poll(0):
                    noisy.recv()
                n += 1
                time.sleep(0.005)
        except zmq.Again:
            pass
        finally:
            deaf.close()
            noisy.close()

    thread = threading.Thread(target=misbehave)
    thread.start()
    try:
        time.sleep(1.0)
        during = latency()
        receipt = client.observe_outcome(key=f"good-{uuid4()}", project=P, passed=True)
        assert receipt.positions
    finally:
        stop.set()
        thread.join()
    # Served, and not by a different order of magnitude (a loose bound: the box is shared).
    assert during < max(20 * normal, 0.25), (normal, during)
    log = server.log.read_text()
    assert "refused a frame" in log
    assert "not reading" in log


def test_a_full_queue_answers_busy_and_drops_nothing(tmp_path: Path) -> None:
    with hub(tmp_path / "h", tmp_path / "log", "--queue", "2", "--max-batch", "1") as small:
        sock = raw(small)
        n = 200
        for i in range(n):
            sock.send(wire.encode_frame(wire.CommandRequest(msgspec.Raw(
                msgspec.msgpack.encode(outcome(50, i)))), i + 1))
        replies: dict[int, msgspec.Struct] = {}
        while len(replies) < n:
            assert sock.poll(30_000), f"only {len(replies)} of {n} answered"
            frame = wire.decode_frame(sock.recv())
            assert frame.id not in replies
            replies[frame.id] = wire.decode_body(frame)
        kinds = {type(r).__name__ for r in replies.values()}
        assert kinds == {"Receipted", "Busy"}, kinds
        sock.close()
        assert small.terminate() == 0


def test_sigterm_drains_what_was_queued(tmp_path: Path) -> None:
    with hub(tmp_path / "h", tmp_path / "log") as server:
        sock = raw(server)
        n = 300
        for i in range(n):
            sock.send(wire.encode_frame(wire.CommandRequest(msgspec.Raw(
                msgspec.msgpack.encode(outcome(60, i)))), i + 1))
        replies: dict[int, msgspec.Struct] = {}
        assert sock.poll(30_000), "no reply before the signal"
        assert server.proc is not None
        server.proc.terminate()  # with most of the 300 still queued or in the socket
        while len(replies) < n and sock.poll(20_000):
            frame = wire.decode_frame(sock.recv())
            replies[frame.id] = wire.decode_body(frame)
        assert server.proc.wait(60) == 0
        sock.close()
        assert len(replies) == n, "a request went unanswered"
        done = [r for r in replies.values() if isinstance(r, wire.Receipted)]
        assert all(isinstance(r, wire.Receipted | wire.Busy) for r in replies.values())
        assert len(done) > 10, "hardly anything was committed in the drain"
    from lessonledger.commands import open_ledger as open_local

    with open_local(tmp_path / "h") as ledger:
        for r in done:
            assert ledger.log.read(r.positions[0], limit=1)[0].payload is not None


def test_erasure_over_the_wire_and_admin_refusals(tmp_path: Path) -> None:
    with hub(tmp_path / "admin", tmp_path / "a.log") as admin_hub, \
            RemoteLedger(admin_hub.endpoint) as admin:
        receipt = admin.observe_outcome(key="to-erase", project=P, session="gone",
                                        passed=True, operations=pair())
        erasure = admin.erase(key="erase-1", what="session", subject="gone", reason="asked")
        assert receipt.positions[0] in erasure.erased
        (record,) = admin.read_log(receipt.positions[0], 1)
        assert record.payload is None
    with hub(tmp_path / "plain", tmp_path / "p.log", "--no-admin") as plain_hub, \
            RemoteLedger(plain_hub.endpoint) as plain:
        plain.observe_outcome(key="kept", project=P, session="kept", passed=True)
        head = plain.head()
        with pytest.raises(AccessRefusedError) as refused:
            plain.erase(key="erase-2", what="session", subject="kept")
        assert refused.value.needed == "admin"
        with pytest.raises(AccessRefusedError):
            plain.reconcile(key="r", now="2026-01-01T00:00:00Z")
        assert plain.head() == head
        assert "refused" in plain_hub.log.read_text()
