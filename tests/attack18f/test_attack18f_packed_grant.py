"""A partial replica's rerun ``clone --fold background`` packs the chunk with its key's new
read grant, and the bodies withheld before never come.

The promise (README, "Sync"): "Every envelope travels ..., a body only if the key may
read its project"; sync/refill.py: "When a pull that does not start empty brings a grant
or a revocation of the replica's own key ..., it records where it started ...: the
bodies withheld up to there are due"; and "lessonledger clone URL DIR  # run again to
resume" (a clone run again is a pull of what is new).

The record that makes them due is written only for a chunk laid out as rows
(sync/replica.py ``_Puller._commit``: the ``NAMES_A_KEY`` check sits after the early
return for packs). A pull with ``fold=False`` packs a chunk with every body, no erasure
and nothing withheld, as the grant's chunk is: nothing is made due, ``refill`` never runs,
and no later pull asks again (each starts past the grant). A folding ``pull`` run at the
same point brings them (tests/attack14 test_a_read_grant_given_later_...).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _attack18f_paths  # noqa: F401
import pytest
from hubtools import HubProcess, Keys, curve_hub, run_ok
from lessonledger.commands import Ledger, Operation
from lessonledger.commands.access import GrantAccess
from lessonledger.sync.keys import load_public
from sync_workload import token

P, Q = "3f9a0c1b2d4e5f60", "0123456789abcdef"


def _prepare(ledger: Ledger) -> None:
    rng = random.Random(18)
    for i in range(16):
        project = (P, Q)[i % 2]
        receipt = ledger.observe_outcome(
            key=f"o{i}", principal="pat", session="pat-s", project=project, passed=True,
            task=f"task {token(rng, 60)}", operations=[
                Operation(op="op-a", target=f"t{i}", ok=False, error="e", order=0),
                Operation(op="op-b", target=f"t{i}", ok=True, order=1)])
        ledger.propose_lesson(
            key=f"l{i}", principal="pat", session="pat-s", project=project,
            text=f"lesson {token(rng, 40)}", kind="prefer", avoid_op="op-a",
            prefer_op="op-b", target=f"t{i}", source="user",
            evidence=[receipt.ids["outcome_id"]])


Hub = tuple[HubProcess, Keys, dict[str, str]]


@pytest.fixture
def partial_hub(tmp_path: Path) -> Iterator[Hub]:
    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P, Q], "write": [P, Q]}),
        "reader": ("rita", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path / "hubbase", grants, admin="admin", prepare=_prepare) as (
            server, keys):
        env = {**os.environ, "LESSONLEDGER_SYNC": "os", "LESSONLEDGER_KEYS": str(keys.dir)}
        yield server, keys, env


def _clone(hub: Hub, into: Path, *more: str) -> dict[str, Any]:
    server, keys, env = hub
    done: dict[str, Any] = json.loads(run_ok(
        "clone", server.endpoint, str(into), "--key", str(keys.secret("reader")),
        "--hub-key", str(keys.public("hub")), "--json", *more, env=env).stdout)
    return done


def _q_lessons(home: Path, env: dict[str, str]) -> list[str]:
    shown = run_ok("--home", str(home), "lessons", "list", "--project", Q, "--json",
                env=env).stdout
    return sorted(json.loads(line)["text"] for line in shown.splitlines())


@pytest.mark.parametrize("fold", ["now", "background"])  # now: the guard, which passes
def test_a_grant_pulled_by_a_clone_rerun_brings_the_withheld_bodies(
        partial_hub: Hub, tmp_path: Path, fold: str) -> None:
    server, keys, env = partial_hub
    replica = tmp_path / "r"
    assert _clone(partial_hub, replica)["withheld"] > 0
    assert _q_lessons(replica, env) == []
    with keys.client(server, "admin") as admin:
        admin.execute(GrantAccess(key="grant-reader-2", key_name="reader",
                                  public_key=load_public(keys.public("reader")).decode(),
                                  principal="rita", read=[P, Q], write=[P]))
    _clone(partial_hub, replica, "--fold", fold)  # run again: what is new
    if fold == "background":
        # (the chunk holding the grant goes in rows: it makes the withheld bodies due)
        run_ok("--home", str(replica), "fold", env=env)
    run_ok("--home", str(replica), "pull", "--json", env=env)  # and a pull after, for good
    fresh = tmp_path / "fresh"
    _clone(partial_hub, fresh)
    wanted = _q_lessons(fresh, env)
    assert wanted, "the control: a fresh clone by the granted key shows Q's lessons"
    assert _q_lessons(replica, env) == wanted
    verified = json.loads(run_ok("--home", str(replica), "verify", "--json", env=env).stdout)
    control = json.loads(run_ok("--home", str(fresh), "verify", "--json", env=env).stdout)
    assert verified["withheld"] == control["withheld"]
