"""Bodies a partial replica was not sent, fetched again once its key may read them.

A hub withholds a body from a replica whose key may not read its project (DESIGN §7,
partial replicas); the replica keeps the envelope, and ``verify`` calls the body
withheld. A pull only asks for what lies past its head, so a read grant given later
would never bring those bodies. When a pull that does not start empty brings a grant
or a revocation of the replica's own key (the one kind of key record whose body it is
sent), it records where it started, in the transaction that commits the record: the
bodies withheld up to there are due. The pull then asks for their segments again and
puts back every body the hub now sends. The envelopes that come with them must be the
ones the replica holds, and each body must match its envelope's commitment, so nothing
else can change.
"""

from __future__ import annotations

from collections.abc import Callable

from lessonledger.ledger.lmdb_env import LMDBHome
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.objects import SEGMENT_SIZE, segment_of
from lessonledger.sync.errors import ProtocolError, TamperedObjectError
from lessonledger.sync.protocol import Chunk, Fetch
from lessonledger.sync.state import SyncState

__all__ = ["DUE", "refill"]

#: The ``sync`` tree's list of positions up to which withheld bodies are asked for again.
DUE = "refill"


def refill(home: LMDBHome, fetch: Callable[[Fetch], Chunk], tombstones: set[int]) -> int:
    """Ask the hub again for the due withheld bodies; put back those it sends now.

    ``fetch`` sends one request and returns the hub's chunk (raising on a refusal).
    Returns how many bodies came back (the views must then be folded afresh). The due
    list is cleared in the transaction that puts them, whatever the hub sent.

    Raises:
        TamperedObjectError: an envelope that came differs from the one held here.
        ProtocolError: the hub answered with something other than the chunk asked for.
    """
    state, log = SyncState(home), EventLog(home, LOG_NAME)
    with home.env.begin() as txn:
        due = state.positions(txn, DUE)
        if not due:
            return 0  # every pull but one that brought a grant of this key
        wanted = {p for p in state.positions(txn, "withheld") if p <= max(due)}
    wanted -= tombstones
    head = log.head()
    sent: dict[int, bytes] = {}
    for segment in sorted({segment_of(p) for p in wanted}):
        start = segment * SEGMENT_SIZE + 1
        stop = min(start + SEGMENT_SIZE - 1, head)
        while start <= stop:
            chunk = _chunk(fetch, start, stop)
            held, _ = log.stored(start, start + len(chunk.envelopes) - 1)
            for offset, (envelope, body) in enumerate(zip(chunk.envelopes, chunk.bodies,
                                                          strict=True)):
                position = start + offset
                if envelope != held[offset]:
                    raise TamperedObjectError(kind="envelope", address=b"", detail=(
                        f"the envelope sent at position {position} is not the one "
                        "this replica holds"))
                if body and position in wanted:
                    sent[position] = body
            start += len(chunk.envelopes)
    with log.writing() as writing:
        restored = writing.restore_bodies(sent)
        state.remove_positions(writing.transaction, "withheld", sent)
        state.remove_positions(writing.transaction, DUE, due)
    return restored


def _chunk(fetch: Callable[[Fetch], Chunk], start: int, stop: int) -> Chunk:
    chunk = fetch(Fetch(start, stop))
    try:
        count = len(chunk.envelopes)
    except ValueError as e:
        msg = f"the hub sent a chunk at {start} that is cut short"
        raise ProtocolError(msg) from e
    if chunk.start != start or not 0 < count <= stop - start + 1 \
            or len(chunk.bodies) != count:
        msg = f"the hub sent a chunk at {chunk.start} that was not asked for"
        raise ProtocolError(msg)
    return chunk
