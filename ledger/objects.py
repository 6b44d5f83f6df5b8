"""The log's content addresses: segments, their Merkle root, and snapshots.

Sync moves the log as objects named by their SHA-256, git's way, with typed,
domain-separated hashing so objects of different kinds never share an id:

- a **segment** is a run of :data:`SEGMENT_SIZE` consecutive envelopes (the last run of
  a log may be shorter: the open segment); its id hashes the stored envelope bytes only.
  Envelopes hold no content and are never erased, so a segment id is the same before
  and after any erasure;
- a **body** is addressed by the commitment its envelope holds, ``sha256(salt ‖
  payload)`` (see :mod:`lessonledger.ledger.envelope`);
- a **snapshot** names a prefix of the log: its parent snapshot, the position range,
  the Merkle root over the segment ids (RFC 6962: leaves ``H(0x00 ‖ id)``, nodes
  ``H(0x01 ‖ left ‖ right)``), the chain link at its last position, how many erasures
  the log held then, when and where it was taken. Its id hashes all of that, the
  parent's id included, so a snapshot id commits to the whole history before it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from hashlib import sha256
from itertools import chain

import msgspec

__all__ = [
    "SEGMENT_SIZE",
    "SegmentHasher",
    "Snapshot",
    "decode_snapshot",
    "encode_snapshot",
    "join_envelopes",
    "merkle_root",
    "segment_id",
    "segment_of",
    "segment_range",
    "snapshot_id",
    "split_envelopes",
]

#: Envelopes per segment: about 50 kB of envelopes, so a clone of 100k events moves
#: a few hundred objects and a pull re-reads at most one segment's worth.
SEGMENT_SIZE = 256
_SEGMENT_TAG = b"lessonledger/segment/v1\x00"
_SNAPSHOT_TAG = b"lessonledger/snapshot/v1\x00"
#: An envelope's length as a run spells it before the envelope.
_LENGTH = struct.Struct(">I")


class SegmentHasher:
    """A segment's id, computed envelope by envelope (the open segment grows so)."""

    def __init__(self) -> None:
        self._hash = sha256(_SEGMENT_TAG)
        self.count = 0

    def add(self, envelope: bytes) -> None:
        """Add the next stored envelope's bytes."""
        self._hash.update(len(envelope).to_bytes(4, "big"))
        self._hash.update(envelope)
        self.count += 1

    def add_run(self, run: bytes, count: int) -> None:
        """Add ``count`` stored envelopes at once, as :func:`join_envelopes` joined them."""
        self._hash.update(run)
        self.count += count

    def digest(self) -> bytes:
        """The id of the segment as it stands."""
        return self._hash.digest()

    def copy(self) -> SegmentHasher:
        """An independent hasher in the same state."""
        other = SegmentHasher.__new__(SegmentHasher)
        other._hash, other.count = self._hash.copy(), self.count
        return other


def segment_id(envelopes: Iterable[bytes]) -> bytes:
    """The id of the segment made of these stored envelope bytes, in order."""
    hasher = SegmentHasher()
    for envelope in envelopes:
        hasher.add(envelope)
    return hasher.digest()


def join_envelopes(envelopes: Iterable[bytes]) -> bytes:
    """Stored envelopes as one run: each one's 4-byte length, then its bytes.

    These are the bytes a segment id hashes after its tag, so a run that is a whole
    segment is checked against its id with one hash.
    """
    envelopes = envelopes if isinstance(envelopes, list | tuple) else list(envelopes)
    # Mapped, not looped: a hub joins every envelope a clone moves, and this keeps the
    # work per envelope in C.
    return b"".join(chain.from_iterable(zip(map(_LENGTH.pack, map(len, envelopes)),
                                            envelopes, strict=True)))


def split_envelopes(run: bytes) -> list[bytes]:
    """The stored envelopes of a run :func:`join_envelopes` made.

    Raises:
        ValueError: the run is cut short (a length points past its end).
    """
    envelopes: list[bytes] = []
    keep, length_at = envelopes.append, _LENGTH.unpack_from
    at, end = 0, len(run)
    # The lengths are read in place (no slice a length): a replica splits every run a
    # clone moves, and this loop is most of what that costs.
    while at < end:
        if at + 4 > end:
            break
        (length,) = length_at(run, at)
        at += 4
        if at + length > end:
            break
        keep(run[at:at + length])
        at += length
    else:
        return envelopes
    msg = f"a run of envelopes is cut short at byte {at}"
    raise ValueError(msg)


def segment_of(position: int) -> int:
    """The index (from 0) of the segment holding ``position`` (from 1)."""
    return (position - 1) // SEGMENT_SIZE


def segment_range(index: int) -> tuple[int, int]:
    """The first and last position a full segment ``index`` holds."""
    return index * SEGMENT_SIZE + 1, (index + 1) * SEGMENT_SIZE


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The RFC 6962 Merkle tree hash over segment ids (``sha256(b"")`` for none)."""
    if not leaves:
        return sha256(b"").digest()
    level = [sha256(b"\x00" + leaf).digest() for leaf in leaves]
    while len(level) > 1:
        # RFC 6962 splits at the largest power of two below n; pairing left to right and
        # carrying an odd last node up unchanged gives the same tree.
        paired = [sha256(b"\x01" + level[i] + level[i + 1]).digest()
                  for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


class Snapshot(msgspec.Struct, array_like=True, frozen=True, forbid_unknown_fields=True):
    """A named prefix of the log (see the module docstring).

    Attributes:
        parent: the id of the snapshot before it on the same ref, or empty.
        first: the first position it covers (1).
        last: the last position it covers.
        root: the Merkle root over the ids of the segments up to ``last``.
        link: the chain link at ``last``.
        erasures: how many ``Erased`` records the log held up to ``last``.
        created_at: nanoseconds since the Unix epoch.
        origin: where it was taken (the hub's name, or a replica's).
    """

    parent: bytes
    first: int
    last: int
    root: bytes
    link: bytes
    erasures: int
    created_at: int
    origin: str


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Snapshot).decode


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """The canonical bytes of a snapshot (what its id hashes)."""
    return _encode(snapshot)


def decode_snapshot(data: bytes) -> Snapshot:
    """A snapshot from its canonical bytes."""
    return _decode(data)


def snapshot_id(snapshot: Snapshot) -> bytes:
    """The snapshot's content address."""
    return sha256(_SNAPSHOT_TAG + encode_snapshot(snapshot)).digest()
