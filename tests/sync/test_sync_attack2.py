"""Attacks on serve-sync by a key granted one project (wave 2, attack2).

A real hub process serving with its CURVE key; replicas clone and push through the CLI.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.projections.lesson_rows import LessonRow
from lessonledger.sync.errors import UnreachableError
from lessonledger.sync.hub import GRANTS_EVERY
from lessonledger.sync.keys import load_public, load_secret
from lessonledger.sync.protocol import Push, Pushed, PushResult, decode_reply, encode
from lessonledger.sync.transport import ZmqExchange
from sync_workload import PROJECTS
from test_sync_access import Setup, raw, run, setup

__all__ = ["setup"]  # the fixture, shared

NOTE = "retired after the confidential merger with ZetaCorp"


def _lesson(ledger: Ledger, project: str, tag: str) -> LessonRow:
    """A live lesson of ``project``'s own (not global), from a user's proposal."""
    outcome = ledger.observe_outcome(
        key=f"{tag}-o", principal="pat", project=project, passed=True, operations=[
            Operation(op=f"{tag}-old", target="prod", ok=False, error="refused", order=0),
            Operation(op=f"{tag}-new", target="prod", ok=True, order=1)])
    ledger.propose_lesson(
        key=f"{tag}-l", principal="pat", project=project, kind="prefer",
        text=f"deploy with {tag}-new", avoid_op=f"{tag}-old", prefer_op=f"{tag}-new",
        target="prod", source="user", evidence=[outcome.ids["outcome_id"]])
    return next(row for row in ledger.catalogue(project, everything=True)
                if row.prefer_op == f"{tag}-new" and row.status != "superseded")


def test_a_retirement_note_of_an_unread_project_is_withheld_from_a_clone(
        setup: Setup, tmp_path: Path) -> None:
    env, hub, keys, url = setup
    with open_ledger(hub, sync=False) as ledger:
        lesson = _lesson(ledger, PROJECTS[1], "secret")
        assert lesson.scope == PROJECTS[1]
        ledger.retire_lesson(key="retire-secret", lesson_id=lesson.lesson_id, reason=NOTE)
    replica = tmp_path / "r"
    run(env, "clone", url, str(replica), "--key", str(keys / "reader.key_secret"),
        "--hub-key", str(keys / "hub.key"), "--json")
    hub_bodies = [body for _, _, body, _ in raw(hub) if body]
    assert any(NOTE.encode() in body for body in hub_bodies)
    for _, _, body, _ in raw(replica):
        assert body is None or NOTE.encode() not in body, "a note on a lesson of a project " \
            "the key may not read reached its replica"
        assert body is None or str(lesson.lesson_id).encode() not in body
    verified = json.loads(run(env, "--home", str(replica), "verify", "--json").stdout)
    assert verified["ok"]


def _push(url: str, keys: Path, name: str, *commands: dict[str, object]) -> list[PushResult]:
    public, secret = load_secret(keys / f"{name}.key_secret")
    with ZmqExchange(url, curve=(public, secret, load_public(keys / "hub.key")),
                     timeout=30) as exchange:
        lines = [json.dumps(c).encode() for c in commands]
        reply = decode_reply(exchange.call(encode(Push("whoever", [10**9] * len(lines),
                                                       lines))))
    assert isinstance(reply, Pushed), reply
    return reply.results


def test_a_push_is_authorized_as_the_hub_authorizes_a_command(
        setup: Setup, tmp_path: Path) -> None:
    """A write grant on ``global`` is not a write grant on every project, nor admin."""
    env, hub, keys, url = setup
    run(env, "keys", "new", "globe")
    run(env, "--home", str(hub), "access", "grant", "globe", "--principal", "gus",
        "--write", "global")
    # Granted by another process just now: the hub's authenticator refreshes its grants
    # when it meets the unknown key, and a refused handshake would be resent anyway.
    with open_ledger(hub, sync=False) as ledger:
        mine, theirs = (_lesson(ledger, project, f"p{i}") for i, project in enumerate(PROJECTS))
        head = ledger.head()
    results = _push(url, keys, "globe",
                    {"command": "retire_lesson", "key": "globe-retire",
                     "lesson_id": str(theirs.lesson_id), "reason": "mine now"},
                    {"command": "declare_environment_change", "key": "globe-env",
                     "scope": PROJECTS[1], "component": "python", "new": "9.9"},
                    {"command": "reconcile", "key": "globe-reconcile",
                     "now": "2030-01-01T00:00:00Z"})
    assert all(r.refused and not r.positions for r in results), results
    with open_ledger(hub, sync=False) as ledger:
        assert ledger.head() == head
        assert ledger.lesson(theirs.lesson_id).status == theirs.status
    # The reader's own project is its to retire from a replica.
    (own,) = _push(url, keys, "reader",
                   {"command": "retire_lesson", "key": "reader-retire",
                    "lesson_id": str(mine.lesson_id), "reason": "done with it"})
    assert own.positions, own
    assert not own.refused


def test_a_stale_push_by_a_key_whose_principal_was_erased_is_shut_out(
        setup: Setup, tmp_path: Path) -> None:
    """A command made away before the erasure, naming no principal, brings nothing back."""
    env, hub, keys, url = setup
    run(env, "--home", str(hub), "erase", "--principal", "rita", "--reason", "asked",
        "--no-compact", "--json")
    with open_ledger(hub, sync=False) as ledger:
        head = ledger.head()
    public, secret = load_secret(keys / "reader.key_secret")
    line = json.dumps({"command": "observe_outcome", "key": "rita-away", "project":
                       PROJECTS[0], "passed": True, "task": "made before the erasure",
                       "operations": [{"op": "op-1", "target": "t", "ok": True}]})
    push = encode(Push("whoever", [1], [line.encode()]))
    curve = (public, secret, load_public(keys / "hub.key"))
    # At once: the erasure was written by another process, which the hub's handshakes
    # know of from their next grant refresh, so the key may still pass the handshake; the
    # push is refused anyway, as any request of a key without a grant is.
    try:
        with ZmqExchange(url, curve=curve, timeout=3) as exchange, \
                pytest.raises(AccessRefusedError):
            exchange.call(push)
    except UnreachableError:
        pass
    # Once the hub has refreshed its grants: erasing the principal took its grant with it,
    # and the key is shut out at the handshake.
    time.sleep(3 * GRANTS_EVERY)
    with ZmqExchange(url, curve=curve, timeout=3) as exchange, \
            pytest.raises(UnreachableError):
        exchange.call(push)
    with open_ledger(hub, sync=False) as ledger:
        assert ledger.head() == head
