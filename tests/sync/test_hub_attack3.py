"""Attacks on the hub and on sync by a second principal (wave 3, attack3).

Each test is one attempt a hostile (or merely unlucky) peer makes on a real hub process
over CURVE on 127.0.0.1, with real LMDB homes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hubtools import HubProcess
from lessonledger.commands import Ledger
from test_hub_access import Keys, P, Q, grant, pair


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    base = tmp_path_factory.mktemp("attack3")
    keys = Keys(base / "keys")
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
