"""The query pool's queues: bounded per client, a client being a key, taken in turn.

No worker is started, so every query waits: what the queues hold and the order the
clients' turns come in is then exactly what the pool decided.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from lessonledger.sync.authority import Access
from lessonledger.sync.query_pool import PER_CLIENT, QueryPool
from lessonledger.sync.stats import HubStats

BOUND = 64
PER = int(BOUND * PER_CLIENT)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[QueryPool]:
    ctx = zmq.Context()
    made = QueryPool(str(tmp_path), 1, BOUND, ctx, HubStats(BOUND, "curve"))
    try:
        yield made
    finally:
        made.close()
        ctx.term()


def _access(key: str) -> Access:
    return Access(principal=f"p-{key}", key=key)


def test_a_key_with_many_connections_holds_one_share(pool: QueryPool) -> None:
    flooder = _access("K" * 40)
    taken = [pool.submit(f"conn{i}".encode(), i, flooder, b"q") for i in range(PER * 3)]
    assert taken == [True] * PER + [False] * (PER * 2)
    # Another key is still served, and takes its turn right after the flooder's first.
    assert pool.submit(b"other", 1, _access("L" * 40), b"q")
    order = [pool._next()[1][0] for _ in range(PER + 1)]
    assert order[:3] == [b"conn0", b"other", b"conn1"]
    assert pool.pending == 0


def test_on_a_keyless_hub_each_connection_is_a_client(pool: QueryPool) -> None:
    local = Access(principal="me")
    assert all(pool.submit(f"conn{i}".encode(), i, local, b"q") for i in range(PER * 3))
    # Each connection has its own share: conn0 may add PER - 1 more, not PER.
    assert [pool.submit(b"conn0", 100 + i, local, b"q") for i in range(PER)] == \
        [True] * (PER - 1) + [False]
