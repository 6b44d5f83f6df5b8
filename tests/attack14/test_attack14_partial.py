"""Partial replicas (attack14): a key that may read one project, and what its replica
holds of the other, before and after its grant changes."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _attack14_paths  # noqa: F401  (first: puts hubtools on the path)
import pytest
from _attack14_tools import run
from hubtools import HubProcess, Keys, curve_hub
from lessonledger.commands import Ledger, Operation
from lessonledger.commands.access import GrantAccess
from lessonledger.sync.keys import load_public
from residue import windows, windows_left
from sync_workload import token

P, Q = "3f9a0c1b2d4e5f60", "0123456789abcdef"


def _prepare(texts: dict[str, list[str]]) -> Any:
    def prepare(ledger: Ledger) -> None:
        rng = random.Random(14)
        for i in range(24):
            project = (P, Q)[i % 2]
            task, error = f"task {token(rng, 60)}", f"error {token(rng, 50)}"
            receipt = ledger.observe_outcome(
                key=f"o{i}", principal="pat", session="pat-s", project=project,
                passed=True, task=task, operations=[
                    Operation(op="op-a", target=f"t{i}", ok=False, error=error, order=0),
                    Operation(op="op-b", target=f"t{i}", ok=True, order=1)])
            lesson = f"lesson {token(rng, 40)}"
            ledger.propose_lesson(
                key=f"l{i}", principal="pat", session="pat-s", project=project, text=lesson,
                kind="prefer", avoid_op="op-a", prefer_op="op-b", target=f"t{i}",
                source="user", evidence=[receipt.ids["outcome_id"]])
            texts[project] += [task, error, lesson]
    return prepare


Hub = tuple[HubProcess, Keys, dict[str, list[str]], dict[str, str]]


@pytest.fixture
def partial_hub(tmp_path: Path) -> Iterator[Hub]:
    texts: dict[str, list[str]] = {P: [], Q: []}
    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P, Q], "write": [P, Q]}),
        "reader": ("rita", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path, grants, admin="admin", prepare=_prepare(texts)) as (server, keys):
        env = {**os.environ, "LESSONLEDGER_SYNC": "os", "LESSONLEDGER_KEYS": str(keys.dir)}
        yield server, keys, texts, env


def _clone(hub: Hub, name: str, into: Path) -> dict[str, Any]:
    server, keys, _, env = hub
    cloned: dict[str, Any] = json.loads(run(
        "clone", server.endpoint, str(into), "--key", str(keys.secret(name)), "--hub-key",
        str(keys.public("hub")), "--json", env=env).stdout)
    return cloned


def _lessons(home: Path, project: str, env: dict[str, str]) -> list[str]:
    shown = run("--home", str(home), "lessons", "list", "--project", project, "--json",
                env=env).stdout
    return sorted(json.loads(line)["text"] for line in shown.splitlines())


def test_guard_a_reader_s_replica_holds_no_window_of_the_other_project_and_verifies(
        partial_hub: Hub, tmp_path: Path) -> None:
    """GUARD: a replica of a key that reads P holds no 16-byte window of Q's texts in any
    file, and its verify passes with Q's bodies withheld."""
    replica = tmp_path / "r"
    cloned = _clone(partial_hub, "reader", replica)
    assert cloned["withheld"] > 0
    _, _, texts, env = partial_hub
    assert windows_left(str(replica), windows([t.encode() for t in texts[P]]))  # control
    assert windows_left(str(replica), windows([t.encode() for t in texts[Q]])) == {}
    done = run("--home", str(replica), "verify", "--json", env=env)
    report = json.loads(done.stdout)
    assert report["withheld"], report
    assert not report.get("missing"), report
    assert not report.get("damaged"), report


def test_a_read_grant_given_later_brings_the_withheld_bodies_on_the_next_pull(
        partial_hub: Hub, tmp_path: Path) -> None:
    """FAILED on cc978dc: once the key is granted read on Q, a pull of its replica still
    held none of Q's bodies (pull only fetched past its head; the withheld positions
    were never asked for again), so the replica showed no lesson of Q while a fresh
    clone by the same key showed them all. Breaks issue 14 item 4 "bodies travel ...
    for what the replica's key may read" and "a clone equals the source" (here: for
    what it may read)."""
    server, keys, _texts, env = partial_hub
    replica = tmp_path / "r"
    _clone(partial_hub, "reader", replica)
    assert _lessons(replica, Q, env) == []
    with keys.client(server, "admin") as admin:
        admin.execute(GrantAccess(key="grant-reader-2", key_name="reader",
                                  public_key=load_public(keys.public("reader")).decode(),
                                  principal="rita", read=[P, Q], write=[P]))
    run("--home", str(replica), "pull", "--json", env=env)
    fresh = tmp_path / "fresh"
    _clone(partial_hub, "reader", fresh)
    wanted = _lessons(fresh, Q, env)
    assert wanted, "the fresh clone by the newly granted key shows Q's lessons"
    assert _lessons(replica, Q, env) == wanted


def test_guard_a_reader_asking_the_hub_by_hand_gets_no_body_of_the_other_project(
        partial_hub: Hub) -> None:
    """GUARD: the reader's key, speaking the protocol itself (a hello that claims the
    whole log, a fetch and a multi-segment fetch of every position), is sent no body of
    Q: each is withheld and named so."""
    import msgspec
    from lessonledger.ledger.envelope import Envelope
    from lessonledger.sync.keys import load_secret
    from lessonledger.sync.protocol import (
        Chunk,
        Fetch,
        FetchMany,
        Hello,
        Refs,
        decode_reply,
        encode,
    )
    from lessonledger.sync.transport import ZmqExchange

    server, keys, texts, _ = partial_hub
    public, secret = load_secret(keys.secret("reader"))
    curve = (public, secret, load_public(keys.public("hub")))
    with ZmqExchange(server.endpoint, timeout=10, curve=curve) as exchange:
        refs = decode_reply(exchange.call(encode(Hello("someone-else"))))
        assert isinstance(refs, Refs)
        chunks = [decode_reply(exchange.call(encode(Fetch(1, refs.head))))]

        def keep(frame: bytes) -> list[bytes]:
            chunks.append(decode_reply(frame))
            return []

        exchange.pipeline([encode(FetchMany(1, refs.head))], keep)
    q_texts = [t.encode() for t in texts[Q]]
    for chunk in chunks:
        assert isinstance(chunk, Chunk)
        for _offset, (stored, body) in enumerate(zip(chunk.envelopes, chunk.bodies,
                                                    strict=False)):
            envelope = msgspec.msgpack.decode(stored, type=Envelope)
            if envelope.scope == Q:
                assert body == b""
                assert envelope.position in chunk.withheld
            assert not any(t in body for t in q_texts)


def test_guard_an_erasure_of_withheld_bodies_is_reported_erased_on_the_partial_replica(
        partial_hub: Hub, tmp_path: Path) -> None:
    """GUARD: the hub erases the principal whose bodies of Q the reader's replica never
    got; after a pull the replica's verify passes and names those positions erased (none of
    them withheld), none missing, and the erasure is acknowledged."""
    server, _, _, env = partial_hub
    replica = tmp_path / "r"
    _clone(partial_hub, "reader", replica)
    erased = run("--home", str(server.home), "erase", "--principal", "pat", "--reason",
                 "asked", "--json", check=False, env=env)
    assert erased.returncode == 3, erased.stderr
    pulled = json.loads(run("--home", str(replica), "pull", "--json", env=env).stdout)
    assert len(pulled["erasures"]) == 1
    assert not pulled["pending"]
    report = json.loads(run("--home", str(replica), "verify", "--json", env=env).stdout)
    assert report["ok"], report
    assert report["erased"], report
    assert not set(report["erased"]) & set(report["withheld"]), report
    assert not report.get("missing"), report
