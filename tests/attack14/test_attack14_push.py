"""Pushes from a replica (attack14): an outbox holding the same key twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import _attack14_paths  # noqa: F401
import msgspec
import pytest
from _attack14_tools import raw, run
from hubtools import HubProcess
from lessonledger.ledger.envelope import Envelope

P = "3f9a0c1b2d4e5f60"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    server = HubProcess(tmp_path / "hub", tmp_path / "hub.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _line(key: str, task: str) -> str:
    return json.dumps({"command": "observe_outcome", "key": key, "project": P,
                       "passed": True, "task": task}) + "\n"


def test_guard_an_outbox_with_a_key_twice_writes_it_once_and_refuses_the_changed_one(
        hub: HubProcess, tmp_path: Path) -> None:
    """GUARD: the same command queued twice, and the same key queued a third time with
    other content, pushed in one frame: written once, the repeat answered with the same
    positions, the changed one refused as a reused key; the outbox empties."""
    replica = tmp_path / "r"
    run("clone", hub.endpoint, str(replica), "--name", "r")
    for text in (_line("k1", "first"), _line("k1", "first"), _line("k1", "changed")):
        run("--home", str(replica), "publish", "-", stdin=text)
    done = run("--home", str(replica), "push", "--json", check=False)
    results = json.loads(done.stdout)["results"]
    assert [bool(r["refused"]) for r in results] == [False, False, True], results
    assert results[0]["positions"] == results[1]["positions"]
    observed = [msgspec.msgpack.decode(e, type=Envelope).type == "outcome.observed"
                for _, e, _, _ in raw(hub.home)]
    assert sum(observed) == 1
    again = run("--home", str(replica), "push", "--json")
    assert json.loads(again.stdout)["results"] == []
