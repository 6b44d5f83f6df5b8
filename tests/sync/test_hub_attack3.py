"""Attacks on the hub and on sync by a second principal (wave 3, attack3).

Each test is one attempt a hostile (or merely unlucky) peer makes on a real hub process
over CURVE on 127.0.0.1, with real LMDB homes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID, uuid4

import msgspec
import pytest
from hubtools import HubProcess, Keys, hub
from lessonledger.commands import Ledger
from lessonledger.commands.handlers import command_id
from lessonledger.commands.messages import ObserveOutcome
from lessonledger.ledger.errors import InvalidEventError, StreamConflictError
from lessonledger.ledger.events import OUTCOME_OBSERVED
from lessonledger.ledger.ids import derived_id
from lessonledger.sync import RemoteLedger, wire
from test_hub_access import P, Q, grant, pair


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    base = tmp_path_factory.mktemp("attack3")
    keys = Keys(base / "keys", ("alice", "bob", "ops"))
    with Ledger(base / "home") as ledger:
        grant(ledger, keys, "alice", "alice", read=[P], write=[P])
        grant(ledger, keys, "bob", "bob", read=[Q], write=[Q])
        grant(ledger, keys, "ops", "operator", admin=True)
    server = HubProcess(base / "home", base / "hub.log", "--key", str(keys.secret("hub")))
    try:
        server.start(client=keys.client(server, "ops", timeout=1.0, deadline=60.0))
        yield server, keys
    finally:
        server.kill()


def test_another_principal_cannot_take_a_key_first(setup: tuple[HubProcess, Keys]) -> None:
    """Bob sends first under the key Alice is about to use: both commands are written.

    Keys are chosen by callers and are often predictable (``task-42``); a key scoped to
    the whole hub would let one principal refuse another's commands in advance.
    """
    server, keys = setup
    with keys.client(server, "bob") as bob:
        theirs = bob.observe_outcome(key="task-42", project=Q, session="b", passed=True,
                                     operations=pair("docs"))
    with keys.client(server, "alice") as alice:
        mine = alice.observe_outcome(key="task-42", project=P, session="a", passed=True,
                                     operations=pair("docs"))
        assert set(mine.positions).isdisjoint(theirs.positions)
        (record,) = alice.read_log(mine.positions[0], 1)
        assert record.envelope.principal == "alice"
        # Alice's retry is hers, and Bob's is his.
        assert alice.observe_outcome(key="task-42", project=P, session="a", passed=True,
                                     operations=pair("docs")).positions == mine.positions
    with keys.client(server, "bob") as bob:
        assert bob.observe_outcome(key="task-42", project=Q, session="b", passed=True,
                                   operations=pair("docs")).positions == theirs.positions


def test_a_key_reused_does_not_answer_with_anothers_receipt(
        setup: tuple[HubProcess, Keys]) -> None:
    """Bob resends Alice's key (seen, say, in her logs): he gets a receipt of his own."""
    server, keys = setup
    with keys.client(server, "alice") as alice:
        mine = alice.observe_outcome(key="alice-own", project=P, session="x", passed=True,
                                     operations=pair("build"))
    with keys.client(server, "bob") as bob:
        theirs = bob.observe_outcome(key="alice-own", project=Q, session="x", passed=True,
                                     operations=pair("build"))
    assert set(mine.positions).isdisjoint(theirs.positions)


def _raw(event_id: UUID, stream: UUID, event: dict[str, object]) -> bytes:
    return msgspec.json.encode({
        "event_id": str(event_id), "stream": str(stream), "version": 0,
        "occurred_at": "2026-12-01T12:00:00Z", "actor": "bob", "event": event})


def test_a_raw_event_cannot_squat_the_id_of_anothers_command(
        setup: tuple[HubProcess, Keys]) -> None:
    """Event ids derived from a key are public (every envelope shows them): Bob, guessing
    Alice's next key, submits a raw event under the id her command will derive."""
    server, keys = setup
    squat = derived_id(command_id("alice-next", "alice"), "0")
    outcome = {"type": OUTCOME_OBSERVED, "outcome_id": str(uuid4()), "project": Q,
               "passed": True, "signal": "verification"}
    with keys.client(server, "bob") as bob:
        bob.submit(_raw(squat, squat, outcome))
    with keys.client(server, "alice") as alice:
        mine = alice.observe_outcome(key="alice-next", project=P, session="n", passed=True,
                                     operations=pair("lint"))
        (record,) = alice.read_log(mine.positions[0], 1)
        assert (record.envelope.principal, record.envelope.type) == ("alice", OUTCOME_OBSERVED)


def test_a_raw_event_resent_by_another_principal_is_not_answered_as_theirs(
        setup: tuple[HubProcess, Keys]) -> None:
    """Bob resends Alice's raw event (its id, stream and type are in every envelope): he
    is not told it is written, and nothing is."""
    server, keys = setup
    event_id = uuid4()
    with keys.client(server, "alice") as alice:
        outcome = {"type": OUTCOME_OBSERVED, "outcome_id": str(uuid4()), "project": P,
                   "passed": True, "signal": "verification"}
        mine = alice.submit(_raw(event_id, event_id, outcome))
    with keys.client(server, "bob") as bob:
        head = bob.head()
        # Alice's stream version and outcome id are taken: refused, not her receipt.
        with pytest.raises((StreamConflictError, InvalidEventError)):
            bob.submit(_raw(event_id, event_id, outcome | {"project": Q}))
        assert bob.head() == head
        # On a stream of his own, with an outcome of his own (Alice's outcome id is hers:
        # observed once), the same event id is his own event.
        theirs = bob.submit(_raw(event_id, uuid4(), outcome | {
            "project": Q, "outcome_id": str(uuid4())}))
        assert set(theirs.positions).isdisjoint(mine.positions)
        (record,) = bob.read_log(theirs.positions[0], 1)
        assert record.envelope.principal == "bob"
    with keys.client(server, "alice") as alice:
        assert alice.submit(_raw(event_id, event_id, outcome)) == mine  # her retry


def test_a_batch_over_the_frame_limit_is_refused_at_once_not_after_the_deadline(
        tmp_path: Path) -> None:
    """libzmq drops a message far over the hub's limit unseen and cuts the connection:
    the client must say so itself, rather than wait out its deadline and blame the hub."""
    commands = [ObserveOutcome(key=f"big-{i}", project=P, passed=True) for i in range(30_000)]
    assert len(msgspec.msgpack.encode(commands)) > 2 * wire.MAX_FRAME_BYTES
    with hub(tmp_path / "home", tmp_path / "hub.log") as server, \
            RemoteLedger(server.endpoint, timeout=2.0, deadline=20.0) as client:
        head = client.head()
        started = time.monotonic()
        with pytest.raises(wire.WireError) as refused:
            client.execute_all(commands)
        assert time.monotonic() - started < 5.0
        assert refused.value.problem == "oversize"
        assert "split" in str(refused.value)
        assert client.head() == head
        assert client.execute_all(commands[:100])  # split, it goes through
