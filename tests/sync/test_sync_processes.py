"""Sync between real processes over ZeroMQ on 127.0.0.1, driven through the CLI.

A hub serves (``lessonledger serve``, the endpoint agents use too); replicas clone,
pull and push with the ``lessonledger`` command. A clone equals its source; a clone
SIGKILLed at random moments completes on the next run with the same bytes; an outbox
larger than one hub frame is pushed in parts; a byte-flipping proxy between replica and hub gets
the damaged object refused with its hash named; an erasure at the hub reaches two
replicas and leaves no 16-byte window of the erased content in any file of the hub,
the replicas or a checkout of a snapshot taken before it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq
from hubtools import HubProcess
from in_process import cli
from lessonledger.commands import open_ledger
from lessonledger.ledger.envelope import Envelope, decode_envelope
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.sync import wire
from lessonledger.sync.protocol import Chunk, SyncReplyFrame, decode_reply, encode
from residue import windows, windows_left
from sync_workload import PROJECTS, fill

CLI = [sys.executable, "-m", "lessonledger.ops"]
ENV = {**os.environ, "LESSONLEDGER_SYNC": "os"}
#: About 5,000 events (each step writes an outcome or a lesson, and what it sets off).
STEPS = 2500


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def lines(*args: str) -> list[Any]:
    return [json.loads(line) for line in run(*args).stdout.splitlines()]


def ask(*args: str) -> str:
    """What a query verb prints, asked with the CLI's main() in this process.

    For the checks only (verify, lessons, recall, snapshots, erasures): the hub and the
    replicas' sync verbs are the processes under test, and a process per check cost
    most of this module's time.
    """
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def asked(*args: str) -> list[Any]:
    return [json.loads(line) for line in ask(*args).splitlines()]


def raw(home: Path) -> list[tuple[int, bytes, bytes | None, bytes | None]]:
    lmdb_home = acquire(str(home), sync=False)
    try:
        return list(EventLog(lmdb_home, LOG_NAME).raw())
    finally:
        release(lmdb_home)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("template") / "hub"
    with open_ledger(path, sync=False) as ledger:
        texts = fill(ledger, STEPS)
        assert ledger.head() >= 5000
    return path, texts


@pytest.fixture
def hub(template: tuple[Path, list[str]], tmp_path: Path) -> Path:
    path = tmp_path / "hub"
    shutil.copytree(template[0], path)
    return path


class Serving:
    """A ``lessonledger serve`` hub on free ports of 127.0.0.1: agents and replicas alike."""

    def __init__(self, home: Path) -> None:
        self.hub = HubProcess(home, home.parent / f"{home.name}-serve.log")
        self.hub.start()
        self.url = self.hub.endpoint

    def stop(self) -> None:
        if self.hub.proc is not None and self.hub.proc.poll() is None:
            assert self.hub.terminate(timeout=30) == 0, self.hub.log.read_text()


@pytest.fixture
def serving(hub: Path) -> Iterator[Serving]:
    server = Serving(hub)
    try:
        yield server
    finally:
        server.stop()


def _recall(home: Path) -> list[Any]:
    answers = []
    for project in PROJECTS:
        answer = asked("--home", str(home), "recall", "--project", project, "--no-record",
                       "--json", "op-1 target-2 failed")[0]
        # Recency moves with the clock between two calls; the rest must be the same.
        answers.append([{k: v for k, v in lesson.items() if k not in ("recency", "score")}
                        for lesson in answer["lessons"]])
    return answers


def test_a_clone_over_zeromq_equals_its_source(hub: Path, serving: Serving,
                                               tmp_path: Path) -> None:
    replica = tmp_path / "r1"
    cloned = lines("clone", serving.url, str(replica), "--name", "r1", "--json")[0]
    assert cloned["head"] == cloned["fetched"] >= 5000
    verified = [asked("--home", str(home), "verify", "--json")[0] for home in (hub, replica)]
    assert verified[0] == verified[1]
    assert verified[0]["ok"]
    listed = [ask("--home", str(home), "lessons", "list", "--all", "--json")
              for home in (hub, replica)]
    assert listed[0] == listed[1]
    assert listed[0].count("\n") > 100
    assert _recall(hub) == _recall(replica)
    assert _recall(replica)[0]
    assert raw(replica) == raw(hub)
    # A pull after new events at the hub moves only them.
    with open_ledger(hub, sync=False) as ledger:
        before = ledger.head()
        fill(ledger, 300, seed=5, tag="after")
    pulled = lines("--home", str(replica), "pull", "--json")[0]
    new = [row for row in raw(hub) if row[0] > before]
    assert pulled["fetched"] == len(new)
    size = sum(len(envelope) + len(body or b"") for _, envelope, body, _ in new)
    assert size <= pulled["received"] <= 1.2 * size + 4000
    assert raw(replica) == raw(hub)


def _saved_positions(home: Path) -> set[int]:
    from lessonledger.commands.read_side import Reader

    with Reader(home, record=False) as reader:
        return set(reader.runner.saved_at.values())


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # exited; its new parent has not reaped it yet


def test_a_clone_that_folds_in_the_background_answers_the_same_before_and_after(
        hub: Path, serving: Serving, tmp_path: Path) -> None:
    replica = tmp_path / "r1"
    cloned = lines("clone", serving.url, str(replica), "--name", "r1", "--fold",
                   "background", "--json")[0]
    assert cloned["head"] == cloned["fetched"] >= 5000
    assert cloned["fold_seconds"] == 0.0
    folder = cloned["folding"]
    expected = (ask("--home", str(hub), "lessons", "list", "--all", "--json"),
                _recall(hub))
    assert expected[0].count("\n") > 100
    # At once, whether or not the background fold has saved anything yet.
    assert (ask("--home", str(replica), "lessons", "list", "--all", "--json"),
            _recall(replica)) == expected
    deadline = time.monotonic() + 240
    while not _gone(folder):
        assert time.monotonic() < deadline, "the background fold did not finish"
        time.sleep(0.2)
    assert _saved_positions(replica) == {cloned["head"]}
    assert (replica / "vectors").is_dir()
    assert (ask("--home", str(replica), "lessons", "list", "--all", "--json"),
            _recall(replica)) == expected
    verified = [asked("--home", str(home), "verify", "--json")[0] for home in (hub, replica)]
    assert verified[0] == verified[1]
    assert raw(replica) == raw(hub)
    folded = lines("--home", str(replica), "fold", "--json")[0]
    assert folded["position"] == cloned["head"]
    refused = run("--home", str(hub), "fold", check=False)
    assert refused.returncode == 2
    assert "not a replica" in refused.stderr
    assert refused.stderr.count("\n") == 1


def test_a_clone_killed_at_random_moments_completes_identically(
        hub: Path, serving: Serving, tmp_path: Path) -> None:
    replica = tmp_path / "r1"
    rng = random.Random(14)
    kills = 0
    for _ in range(6):
        proc = subprocess.Popen([*CLI, "clone", serving.url, str(replica), "--name", "r1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
        # From when it has begun (its marker is there): a 5,000-event clone takes about
        # 0.1 s once Python is up, so a fixed delay from its start missed it on a quiet box.
        started = time.monotonic()
        while not (replica / "REPLICA").exists() and proc.poll() is None \
                and time.monotonic() - started < 30:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.12))
        if proc.poll() is None:
            proc.kill()
            kills += 1
        proc.wait()
        if replica.exists() and (replica / "data.mdb").exists():
            held = raw(replica)
            assert held == raw(hub)[:len(held)]  # a prefix, byte for byte: no gap, no tear
    assert kills, "no clone was killed mid-way: the test proves nothing"
    run("clone", serving.url, str(replica), "--name", "r1")
    assert raw(replica) == raw(hub)
    fresh = tmp_path / "r2"
    run("clone", serving.url, str(fresh), "--name", "r1")
    for name in ("lessons", "objects"):
        assert _saved(replica, name) == _saved(fresh, name)
    assert asked("--home", str(replica), "verify", "--json")[0]["ok"]


def test_a_clone_folding_in_the_background_killed_at_random_moments_completes_identically(
        hub: Path, serving: Serving, tmp_path: Path) -> None:
    replica = tmp_path / "r1"
    rng = random.Random(7)
    kills = 0
    folders = []
    for _ in range(6):
        proc = subprocess.Popen([*CLI, "clone", serving.url, str(replica), "--name", "r1",
                                 "--fold", "background", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV,
                                text=True)
        time.sleep(rng.uniform(0.2, 1.0))
        if proc.poll() is None:
            proc.kill()
            kills += 1
        out, _ = proc.communicate()
        if proc.returncode == 0:
            folders.append(json.loads(out)["folding"])
        if replica.exists() and (replica / "data.mdb").exists():
            held = raw(replica)
            assert held == raw(hub)[:len(held)]  # a prefix, byte for byte: no gap, no tear
    assert kills, "no clone was killed mid-way: the test proves nothing"
    done = lines("clone", serving.url, str(replica), "--name", "r1", "--fold", "background",
                 "--json")[0]
    folders.append(done["folding"])
    assert raw(replica) == raw(hub)
    deadline = time.monotonic() + 240
    while not all(map(_gone, folders)):
        assert time.monotonic() < deadline, "a background fold did not finish"
        time.sleep(0.2)
    fresh = tmp_path / "r2"
    run("clone", serving.url, str(fresh), "--name", "r1")
    for name in ("lessons", "objects"):
        assert _saved(replica, name) == _saved(fresh, name)
    assert asked("--home", str(replica), "verify", "--json")[0]["ok"]


def _saved(home: Path, view: str) -> bytes:
    from lessonledger.projections.store import ViewStore

    lmdb_home = acquire(str(home), sync=False)
    try:
        saved = ViewStore(lmdb_home).load(view)
        assert saved is not None
        return saved[1]
    finally:
        release(lmdb_home)


class FlippingProxy:
    """A ROUTER/DEALER relay that flips one byte of the first chunk it relays."""

    def __init__(self, hub_url: str, damage: Callable[[Chunk], tuple[Chunk, bytes]]) -> None:
        self.context = zmq.Context()
        self.front = self.context.socket(zmq.ROUTER)
        port = self.front.bind_to_random_port("tcp://127.0.0.1")
        self.url = f"tcp://127.0.0.1:{port}"
        self.back = self.context.socket(zmq.DEALER)
        self.back.connect(hub_url)
        self.damage = damage
        self.named: bytes = b""
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._relay, daemon=True)
        self.thread.start()

    def _relay(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        peer = b""
        while not self.stopping.is_set():
            ready = dict(poller.poll(100))
            if self.front in ready:
                peer, frame = self.front.recv_multipart()
                self.back.send(frame)
            if self.back in ready:
                frame = self.back.recv()
                outer = wire.decode_frame(frame, limit=len(frame))
                carried: msgspec.Struct = wire.decode_body(outer)
                if isinstance(carried, SyncReplyFrame):
                    reply = decode_reply(carried.frame)
                    if isinstance(reply, Chunk) and not self.named:
                        damaged, self.named = self.damage(reply)
                        frame = wire.encode_frame(SyncReplyFrame(encode(damaged)), outer.id)
                self.front.send_multipart([peer, frame])

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.front.close(0)
        self.back.close(0)
        self.context.term()


def _flip_body(chunk: Chunk) -> tuple[Chunk, bytes]:
    i = next(i for i, body in enumerate(chunk.bodies) if body and i > 10)
    body = bytearray(chunk.bodies[i])
    body[len(body) // 2] ^= 0x20
    bodies = [*chunk.bodies[:i], bytes(body), *chunk.bodies[i + 1:]]
    commitment = msgspec.msgpack.decode(chunk.envelopes[i], type=Envelope).commitment
    return Chunk(chunk.start, chunk.envelopes, bodies, chunk.withheld), commitment


def _flip_envelope(chunk: Chunk) -> tuple[Chunk, bytes]:
    envelope = bytearray(chunk.envelopes[40])
    envelope[-3] ^= 0x01  # inside the commitment: still an envelope, another one
    envelopes = [*chunk.envelopes[:40], bytes(envelope), *chunk.envelopes[41:]]
    from lessonledger.ledger.objects import segment_id

    return Chunk(chunk.start, envelopes, chunk.bodies, chunk.withheld), segment_id(
        chunk.envelopes)


@pytest.mark.parametrize("damage", [_flip_body, _flip_envelope])
def test_a_byte_flipping_proxy_gets_the_object_refused_with_its_hash_named(
        hub: Path, serving: Serving, tmp_path: Path,
        damage: Callable[[Chunk], tuple[Chunk, bytes]]) -> None:
    proxy = FlippingProxy(serving.url, damage)
    try:
        replica = tmp_path / "r1"
        done = run("clone", proxy.url, str(replica), check=False)
        assert done.returncode == 2, done.stderr
        assert proxy.named
        assert proxy.named.hex() in done.stderr
        assert "tampered" in done.stderr
        assert done.stderr.count("\n") == 1
        assert raw(replica) == []  # nothing of the damaged chunk (the first) was written
    finally:
        proxy.close()
    # Straight to the hub, the same clone completes.
    shutil.rmtree(replica)
    run("clone", serving.url, str(replica))
    assert raw(replica) == raw(hub)


def test_an_erasure_at_the_hub_reaches_every_replica_and_leaves_no_residue(
        template: tuple[Path, list[str]], hub: Path, tmp_path: Path) -> None:
    texts = template[1]
    alices = windows([t.encode() for t in texts if t.startswith("alice ")])
    others = windows([t.encode() for t in texts if not t.startswith("alice ")])
    erased = alices - others
    server = Serving(hub)
    try:
        replicas = [tmp_path / "r1", tmp_path / "r2"]
        for replica in replicas:
            run("clone", server.url, str(replica), "--name", replica.name)
        before = lines("--home", str(hub), "snapshot", "--name", "before", "--json")[0]
        for replica in replicas:
            run("--home", str(replica), "pull")
        homes = [hub, *replicas]
        for home in homes:  # the control: the same scan finds the content before
            assert windows_left(str(home), erased), f"{home}: the scan is blind"
        links = {home: [row[3] for row in raw(home)] for home in homes}
        done = run("--home", str(hub), "erase", "--principal", "alice", "--reason", "asked",
                   "--json", check=False)
        assert done.returncode == 3  # the server has the hub open: its compaction waits
        started = time.perf_counter()
        for replica in replicas:
            pulled = lines("--home", str(replica), "pull", "--json")[0]
            assert len(pulled["erasures"]) == 1
            assert not pulled["pending"]
        assert time.perf_counter() - started < 60
        acked = asked("--home", str(hub), "erasures", "--json")
        assert [sorted(row["acked_by"]) for row in acked] == [["r1", "r2"]]
    finally:
        server.stop()
    run("--home", str(hub), "compact")
    for home in homes:
        assert not windows_left(str(home), erased), home
        assert windows_left(str(home), set(list(others)[:300])), home
        # Chain links and snapshot ids: byte for byte what they were.
        assert [row[3] for row in raw(home)][:len(links[home])] == links[home]
        snapshots = asked("--home", str(home), "snapshots", "--json")
        assert snapshots[0]["id"] == before["id"]
        assert asked("--home", str(home), "verify", "--json")[0]["ok"]
    # A replica restored from the snapshot taken before the erasure serves none of it.
    restored = tmp_path / "restored"
    out = lines("--home", str(replicas[0]), "checkout", before["id"][:12], "--into",
                str(restored), "--json")[0]
    assert out["erased_later"] > 0
    assert out["last"] == before["last"]
    assert not windows_left(str(restored), erased)
    listed = ask("--home", str(restored), "lessons", "list", "--all", "--json")
    assert listed
    assert "alice lesson" not in listed
    assert "bob lesson" in listed
    verified = asked("--home", str(restored), "verify", "--json")[0]
    assert verified["ok"]
    assert len(verified["erased"]) == out["erased_later"]
    assert [row[3] for row in raw(restored)] == links[hub][:before["last"]]


def test_a_replica_writes_nothing_of_its_own_and_pushes_its_outbox(
        hub: Path, serving: Serving, tmp_path: Path) -> None:
    replica = tmp_path / "r1"
    run("clone", serving.url, str(replica), "--name", "r1")
    refused = run("--home", str(replica), "snapshot", check=False)
    assert refused.returncode == 2
    assert "replica" in refused.stderr
    refused = run("--home", str(replica), "reconcile", check=False)
    assert refused.returncode == 2
    assert "outbox" in refused.stderr
    run("--home", str(replica), "compact")  # folds as a replica does, then compacts
    head = len(raw(replica))
    run("--home", str(replica), "recall", "--project", PROJECTS[0], "op-1")  # records nothing
    assert len(raw(replica)) == head
    # No principal: a keyless hub writes every connection's commands as its own
    # (``operator``), pushed ones too, and refuses one naming another.
    command = json.dumps({"command": "observe_outcome", "key": "away-1",
                          "project": PROJECTS[0], "passed": True, "task": "done while away",
                          "operations": [{"op": "op-1", "target": "t", "ok": True}]})
    queued = subprocess.run([*CLI, "--home", str(replica), "publish", "-"], input=command,
                            capture_output=True, text=True, env=ENV, timeout=60)
    assert queued.returncode == 0
    assert "outbox" in queued.stdout
    pushed = lines("--home", str(replica), "push", "--json")[0]
    assert pushed["results"][0]["key"] == "away-1"
    assert pushed["results"][0]["positions"]
    assert raw(replica) == raw(hub)
    bodies = [body for _, _, body, _ in raw(replica) if body and b"done while away" in body]
    assert len(bodies) == 1
    assert sha256(bodies[0]).digest()  # the hub's own record, pulled back verbatim
    assert [decode_envelope(envelope).principal for _, envelope, body, _ in raw(replica)
            if body and b"done while away" in body] == ["operator"]


def test_an_outbox_larger_than_one_hub_frame_is_pushed_in_parts(
        hub: Path, serving: Serving, tmp_path: Path) -> None:
    replica = tmp_path / "r1"
    run("clone", serving.url, str(replica), "--name", "r1")
    commands = "\n".join(json.dumps({
        "command": "observe_outcome", "key": f"big-{i}", "project": PROJECTS[0],
        "passed": True, "task": f"{i} " + "x" * 8000,
        "operations": [{"op": "op-1", "target": "t", "ok": True}]}) for i in range(300))
    assert len(commands) > 2 << 20  # over the hub's frame limit (about 1 MiB)
    queued = subprocess.run([*CLI, "--home", str(replica), "publish", "-"], input=commands,
                            capture_output=True, text=True, env=ENV, timeout=120)
    assert queued.returncode == 0, queued.stderr
    pushed = lines("--home", str(replica), "push", "--json")[0]
    assert [r["key"] for r in pushed["results"]] == [f"big-{i}" for i in range(300)]
    assert not any(r["refused"] for r in pushed["results"])
    assert pushed["pull"]["head"] == len(raw(hub))
