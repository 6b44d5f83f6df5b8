"""A hub with CURVE keys: principals come from grants, and grants bound what a key does.

The hub runs in a process of its own with its secret key; clients connect with theirs.
Grants are written on the home before the hub starts (and one through the hub by an
admin key), as an operator would with ``lessonledger access grant``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hubtools import HubProcess, Keys, curve_hub
from lessonledger.commands import Ledger, Operation
from lessonledger.commands.access import GrantAccess, RevokeAccess
from lessonledger.commands.errors import AccessRefusedError, InvalidCommandError
from lessonledger.sync.client import HubUnavailableError
from lessonledger.sync.keys import load_public

P, Q = "a" * 32, "b" * 32


def pair(target: str = "tests") -> list[Operation]:
    return [Operation(op="pytest:tests/", target=target, ok=False, error="no conftest"),
            Operation(op="pytest:root", target=target, ok=True, order=1)]


def grant(ledger: Ledger, keys: Keys, name: str, principal: str, **fields: Any) -> None:
    keys.grant(ledger, name, principal, **fields)


#: The grants the access and attack tests start their hub with.
GRANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "alice": ("alice", {"read": [P], "write": [P]}),
    "bob": ("bob", {"read": [Q], "write": [Q]}),
    "ops": ("operator", {"admin": True}),
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    grants = {**GRANTS, "gone": ("gone", {"read": [P], "write": [P]}),
              "busy": ("busy", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path_factory.mktemp("curve"), grants, admin="ops",
                   keys=("mallory", "late")) as started:
        yield started


def test_the_principal_is_the_keys(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "alice") as alice:
        receipt = alice.observe_outcome(key="alice-1", project=P, passed=True,
                                        operations=pair())
        (record,) = alice.read_log(receipt.positions[0], 1)
        assert record.envelope.principal == "alice"
        with pytest.raises(InvalidCommandError, match="bound to the connection"):
            alice.observe_outcome(key="alice-spoof", project=P, passed=True,
                                  principal="bob")
        with pytest.raises(AccessRefusedError) as refused:
            alice.observe_outcome(key="alice-q", project=Q, passed=True)
        assert refused.value.needed == "write"
        assert refused.value.project == Q


def test_an_unknown_key_is_refused_and_logged(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "ops") as ops:
        head = ops.head()
    with keys.client(server, "mallory", timeout=0.5, deadline=2.0) as mallory, \
            pytest.raises(HubUnavailableError):
        mallory.observe_outcome(key="mallory-1", project=P, passed=True)
    with keys.client(server, "ops") as ops:
        assert ops.head() == head
    refusals = [line for line in server.log.read_text().splitlines()
                if "refused CURVE client key" in line
                and load_public(keys.public("mallory")).decode() in line]
    assert len(refusals) == 1


def test_no_read_grant_shows_nothing_of_the_project(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "alice") as alice:
        alice.observe_outcome(key="alice-2", project=P, session="a2", passed=True,
                              operations=pair("build"))
        lesson = alice.lessons(P, record=False)[0]
    with keys.client(server, "bob") as bob:
        with pytest.raises(AccessRefusedError) as refused:
            bob.lessons(P)
        assert refused.value.needed == "read"
        with pytest.raises(AccessRefusedError):
            bob.recall(P, "run the tests")
        with pytest.raises(AccessRefusedError):
            bob.check(P, "pytest:tests/", "tests")
        with pytest.raises(AccessRefusedError):
            bob.why(lesson.lesson_id)
        with pytest.raises(AccessRefusedError):
            bob.lesson(lesson.lesson_id)
        assert all(row.scope != P for row in bob.catalogue())
        records = bob.read_log(1, 1000)
        assert records, "envelopes travel"
        assert all(r.payload is None for r in records if r.envelope.scope == P)


def test_without_admin_no_erasure_and_no_grant(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "alice") as alice:
        head = alice.head()
        with pytest.raises(AccessRefusedError) as refused:
            alice.erase(key="erase-bob", what="principal", subject="bob")
        assert refused.value.needed == "admin"
        with pytest.raises(AccessRefusedError):
            alice.execute(GrantAccess(key="self-promote", key_name="alice",
                                      public_key=load_public(keys.public("alice")).decode(),
                                      principal="alice", admin=True))
        assert alice.head() == head


def test_an_admin_revokes_and_the_key_stops_at_once(setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with keys.client(server, "gone", timeout=1.0, deadline=3.0) as gone:
        gone.observe_outcome(key="gone-1", project=P, passed=True)
        with keys.client(server, "ops") as ops:
            ops.execute(RevokeAccess(key="revoke-gone", key_name="gone"))
        # The established session is not cut by libzmq; the hub checks every request.
        with pytest.raises(AccessRefusedError) as refused:
            gone.observe_outcome(key="gone-2", project=P, passed=True)
        assert refused.value.principal == ""
    # A new connection with the revoked key does not get through at all.
    with keys.client(server, "gone", timeout=0.5, deadline=2.0) as again, \
            pytest.raises(HubUnavailableError):
        again.head()


def test_a_revoke_another_process_commits_counts_while_the_hub_never_idles(
        setup: tuple[HubProcess, Keys]) -> None:
    """The hub folds other processes' grants while busy too, not only when its queue rests."""
    server, keys = setup
    stop = threading.Event()

    def keep_busy() -> None:
        with keys.client(server, "alice") as alice:
            for i in itertools.count():
                if stop.is_set():
                    return
                alice.observe_outcome(key=f"busy-load-{i}", project=P, passed=True)

    load = threading.Thread(target=keep_busy)
    load.start()
    try:
        with keys.client(server, "busy", timeout=2.0, deadline=10.0) as busy:
            busy.observe_outcome(key="busy-0", project=P, passed=True)
            with Ledger(server.home) as ledger:  # as `lessonledger access revoke` would
                ledger.execute(RevokeAccess(key="revoke-busy", key_name="busy"))
            until = time.monotonic() + 10
            refused = None
            for i in itertools.count(1):
                try:
                    busy.observe_outcome(key=f"busy-{i}", project=P, passed=True)
                except AccessRefusedError as e:
                    refused = e
                    break
                assert time.monotonic() < until, "a revoked key kept writing for 10 s"
            assert refused is not None
    finally:
        stop.set()
        load.join(timeout=60)


def test_a_grant_another_process_commits_counts_while_the_hub_runs(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as ledger:  # as `lessonledger access grant` would, beside it
        grant(ledger, keys, "late", "late", read=[P], write=[P])
    with keys.client(server, "late", timeout=1.0, deadline=20.0) as late:
        receipt = late.observe_outcome(key="late-1", project=P, passed=True)
        (record,) = late.read_log(receipt.positions[0], 1)
        assert record.envelope.principal == "late"
