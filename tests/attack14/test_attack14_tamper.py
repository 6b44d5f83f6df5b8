"""Tampered objects on the way from the hub (attack14): what a replica commits before it
has checked a segment's id."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import _attack14_paths  # noqa: F401  (first: puts hubtools on the path)
import msgspec
import pytest
from _attack14_tools import TamperingRelay, raw, run
from hubtools import HubProcess
from lessonledger.commands import open_ledger
from lessonledger.ledger.envelope import Envelope, encode_envelope
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog, NewEvent
from lessonledger.sync.protocol import Chunk
from lessonledger.sync.replica import pull
from lessonledger.sync.transport import ZmqExchange

#: Bodies of about 1 MB: ten of them pass the hub's 8 MiB body budget for one chunk, so
#: the first chunk of segment 0 is cut short (it neither closes the segment nor reaches
#: the head) and the replica cannot check it against the segment's id on arrival.
BIG = 1_000_000


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    base = tmp_path_factory.mktemp("tamper")
    home = base / "hub"
    with open_ledger(home, sync=False):
        pass
    lmdb_home = acquire(str(home), sync=False)
    try:
        log = EventLog(lmdb_home, LOG_NAME)
        events = [NewEvent(stream=f"note-{i}", version=0, type="app.note",
                           payload=(f"note {i} ".encode() + os.urandom(8).hex().encode())
                           * (BIG // 24 if 1 <= i <= 10 else 1),
                           principal="alice", actor="app")
                  for i in range(14)]
        with log.writing() as writing:
            writing.append(events)
    finally:
        release(lmdb_home)
    server = HubProcess(home, base / "hub.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _forge_first_principal(chunk: Chunk) -> Chunk:
    """The first chunk's first envelope names principal ``mallo`` instead of ``alice``:
    the same length, still canonical, its commitment (so its body) untouched."""
    if chunk.start != 1:
        return chunk
    envelopes = chunk.envelopes
    first = msgspec.msgpack.decode(envelopes[0], type=Envelope)
    assert first.principal == "alice"
    forged = encode_envelope(msgspec.structs.replace(first, principal="mallo"))
    assert len(forged) == len(envelopes[0])
    return Chunk(chunk.start, [forged, *envelopes[1:]], chunk.bodies,
                 chunk.withheld, chunk.erased)


def test_a_forged_envelope_in_a_chunk_cut_short_is_not_committed(
        hub: HubProcess, tmp_path: Path) -> None:
    """FAILED on cc978dc: a chunk cut short by the hub's body budget is committed (the pull flushes
    past 4 MiB) before its segment's id can be checked, so a relay's forged envelope
    lands in the replica's log; the refusal comes only with the next chunk, and the
    replica is then diverged for good. Breaks issue 14 "every object verified on arrival
    ... nothing of that chunk is written" and "a clone that is killed continues"."""
    relay = TamperingRelay(hub.endpoint, _forge_first_principal)
    replica = tmp_path / "r"
    try:
        done = run("clone", relay.url, str(replica), check=False)
    finally:
        relay.close()
    assert done.returncode == 2, done.stderr
    assert "tampered" in done.stderr  # it says "nothing of it was written"
    theirs = {p: e for p, e, _, _ in raw(hub.home)}
    mine = raw(replica)
    forged = [p for p, e, _, _ in mine if e != theirs[p]]
    assert forged == [], f"the replica committed forged envelopes at {forged}"
    # Straight to the hub, the pull continues and completes (observed: DivergedError).
    with ZmqExchange(hub.endpoint, timeout=30) as exchange:
        pull(replica, exchange, sync=False)
    assert [e for _, e, _, _ in raw(replica)] == [e for _, e, _, _ in raw(hub.home)]
