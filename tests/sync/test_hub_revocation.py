"""A revocation or an erasure another process commits counts at the hub from its commit on.

The hub keeps the grants in memory for its front and its handshakes, refreshed every
``GRANTS_EVERY``; what it writes is decided against the grants as they stand inside its
own write transaction, and what its query workers answer against the grants as they
stand when the query is answered. So the very next request of a key after another
process's revocation (or erasure of the key's principal, or a narrower grant) has
returned is refused with the typed refusal, and nothing of it is written: a command, a
batch, a raw submission, a sync push, a sync fetch, a query.

Each test acts inside the refresh window: the revocation is committed by this test's
process, holding the home open as ``lessonledger access revoke`` does (one by the CLI
itself), and the key's next request goes out the moment it returns. Several keys are
tried in turn, so a refresh that happens to land in the window cannot hide the defect.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import msgspec
import pytest
from hubtools import HubProcess, Keys, curve_hub, lessonledger
from lessonledger.commands import Ledger, Operation
from lessonledger.commands.access import GrantAccess, RevokeAccess
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.commands.messages import ObserveOutcome, command_from
from lessonledger.ledger.events import LESSON_RECALLED
from lessonledger.sync.client import HubUnavailableError
from lessonledger.sync.keys import load_public, load_secret
from lessonledger.sync.protocol import Fetch, Hello, Push, Refs, decode_reply, encode
from lessonledger.sync.transport import ZmqExchange

P, Q = "a" * 32, "b" * 32
#: How many keys each kind of request is tried with.
TRIES = 3
KINDS = ("cmd", "batch", "sub", "push", "fetch", "query", "erased", "narrowed", "cli",
         "status", "hs")


def names(kind: str) -> list[str]:
    return [f"{kind}{i}" for i in range(TRIES)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "ops": ("operator", {"admin": True})}
    for kind in KINDS:
        for name in names(kind):
            grants[name] = (f"who-{name}", {"read": [P], "write": [P]})
    with curve_hub(tmp_path_factory.mktemp("revocation"), grants, admin="ops") as started:
        yield started


def outcome(key: str, project: str = P) -> ObserveOutcome:
    return command_from({"key": key, "project": project, "passed": True, "operations": [
        Operation(op="pytest:root", target="tests", ok=True)]}, ObserveOutcome)


def revoke(ledger: Ledger, name: str) -> int:
    """Revoke ``name`` in this process (not the hub's); the position it was revoked at."""
    return ledger.execute(RevokeAccess(key=f"revoke-{name}-{uuid4()}", key_name=name)
                          ).positions[-1]


def nothing_of(ledger: Ledger, principal: str, since: int) -> None:
    """No event after position ``since`` carries ``principal``."""
    written = [r.envelope for r in ledger.log.scan(since + 1)
               if r.envelope.principal == principal]
    assert written == [], f"written for {principal} after its grant ended: {written}"


def curve(keys: Keys, name: str) -> tuple[bytes, bytes, bytes]:
    public, secret = load_secret(keys.secret(name))
    return public, secret, load_public(keys.public("hub"))


def test_a_command_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("cmd"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.execute(outcome(f"{name}-before"))
                at = revoke(other, name)
                with pytest.raises(AccessRefusedError) as refused:
                    victim.execute(outcome(f"{name}-after"))
                assert refused.value.principal == ""
            nothing_of(other, f"who-{name}", at)


def test_a_batch_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("batch"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.execute_all([outcome(f"{name}-before")])
                at = revoke(other, name)
                with pytest.raises(AccessRefusedError):
                    victim.execute_all([outcome(f"{name}-after-{i}") for i in range(3)])
            nothing_of(other, f"who-{name}", at)


def test_a_submission_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup

    def submission() -> bytes:
        return msgspec.json.encode({
            "event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
            "occurred_at": "2026-12-01T12:00:00Z", "actor": "agent",
            "event": {"type": LESSON_RECALLED, "lesson_ids": [], "project": P}})

    with Ledger(server.home) as other:
        for name in names("sub"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.submit(submission())
                at = revoke(other, name)
                with pytest.raises(AccessRefusedError):
                    victim.submit(submission())
            nothing_of(other, f"who-{name}", at)


def test_a_push_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("push"):
            with ZmqExchange(server.endpoint, curve=curve(keys, name), timeout=5) as sync:
                assert isinstance(decode_reply(sync.call(encode(Hello("r")))), Refs)
                at = revoke(other, name)
                line = msgspec.json.encode({
                    "command": "observe_outcome", "key": f"{name}-pushed", "project": P,
                    "passed": True, "operations": [{"op": "o", "target": "t", "ok": True}]})
                with pytest.raises(AccessRefusedError):
                    sync.call(encode(Push("r", [at], [line])))
            nothing_of(other, f"who-{name}", at)


def test_a_fetch_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("fetch"):
            with ZmqExchange(server.endpoint, curve=curve(keys, name), timeout=5) as sync:
                refs = decode_reply(sync.call(encode(Hello("r"))))
                assert isinstance(refs, Refs)
                revoke(other, name)
                with pytest.raises(AccessRefusedError):
                    sync.call(encode(Fetch(1, 1)))


def test_a_query_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("query"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.lessons(P, record=False)
                revoke(other, name)
                with pytest.raises(AccessRefusedError):
                    victim.lessons(P, record=False)
                with pytest.raises(AccessRefusedError):
                    victim.recall(P, "run the tests", record=False)


def test_a_status_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("status"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.status()
                revoke(other, name)
                with pytest.raises(AccessRefusedError):
                    victim.status()


def test_a_handshake_right_after_another_process_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("hs"):
            with keys.client(server, name, timeout=5.0) as before:
                before.head()
            revoke(other, name)
            # The key's new connection is refused at its handshake (libzmq resends it
            # until the client gives up): no request of it reaches the front.
            with keys.client(server, name, timeout=1.0, deadline=2.0) as victim, \
                    pytest.raises(HubUnavailableError):
                victim.head()


def test_a_command_right_after_another_process_erases_the_principal_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("erased"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.execute(outcome(f"{name}-before"))
                erasure = other.erase(key=f"erase-{name}", what="principal",
                                      subject=f"who-{name}", reason="asked to")
                with pytest.raises(AccessRefusedError):
                    victim.execute(outcome(f"{name}-after"))
            nothing_of(other, f"who-{name}", erasure.position)


def test_a_command_right_after_another_process_narrows_the_grant_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    with Ledger(server.home) as other:
        for name in names("narrowed"):
            with keys.client(server, name, timeout=5.0) as victim:
                victim.execute(outcome(f"{name}-before"))
                other.execute(GrantAccess(
                    key=f"narrow-{name}", key_name=name, principal=f"who-{name}",
                    public_key=load_public(keys.public(name)).decode(), read=[Q], write=[Q]))
                with pytest.raises(AccessRefusedError) as refused:
                    victim.execute(outcome(f"{name}-after"))
                assert (refused.value.needed, refused.value.project) == ("write", P)
                # The new grant counts as at once: its project is written.
                victim.execute(outcome(f"{name}-on-q", Q))


def test_a_command_right_after_the_cli_revokes_is_refused(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    for name in names("cli"):
        with keys.client(server, name, timeout=5.0) as victim:
            victim.execute(outcome(f"{name}-before"))
            with Ledger(server.home) as ledger:
                before = ledger.head()
            subprocess.run([lessonledger(), "--home", str(server.home), "access", "revoke",
                            name], check=True, capture_output=True)
            with pytest.raises(AccessRefusedError):
                victim.execute(outcome(f"{name}-after"))
        with Ledger(server.home) as ledger:
            nothing_of(ledger, f"who-{name}", before)
