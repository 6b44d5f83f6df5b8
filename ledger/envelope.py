"""The envelope kept forever, the forgettable body, and the hash chain that binds them.

An envelope holds only structural facts about an event; everything that may carry user
content is in the body. The envelope commits to the body with ``sha256(body)`` where
the stored body is ``salt ‖ payload`` and the salt is 16 random bytes: once a body is
erased, its commitment cannot be used to guess the content back.

The chain is ``hash(n) = sha256(hash(n-1) ‖ envelope_bytes(n))`` from ``hash(0)`` = 32
zero bytes, over the exact stored envelope bytes, so any edit, reorder or removal of an
envelope changes every later link.
"""

from __future__ import annotations

from hashlib import sha256
from typing import NewType
from uuid import UUID

import msgspec
from lessonledger.ledger.errors import ReplayMismatchError

__all__ = [
    "GENESIS",
    "LINK_BYTES",
    "MAX_BODY_BYTES",
    "MAX_NAME_BYTES",
    "ROLE_ACTORS",
    "SALT_BYTES",
    "Digest",
    "Envelope",
    "Position",
    "StreamId",
    "chain_link",
    "checked_stored",
    "decode_envelope",
    "encode_envelope",
    "name_fits",
    "stream_id_of",
    "stream_key",
]

Position = NewType("Position", int)
Digest = NewType("Digest", bytes)
StreamId = UUID | str

#: Largest payload a single event may carry (1 MiB). Larger content belongs elsewhere,
#: cited by digest; the limit keeps one event from stalling every reader and sync.
MAX_BODY_BYTES = 1 << 20
SALT_BYTES = 16
LINK_BYTES = 32
GENESIS = Digest(bytes(32))
#: Actors the ledger stamps by role, not by a person's name: an agent's commands by
#: default, the policies' decisions, the ledger's own bookkeeping. Nearly every event
#: has one, so the audit index lists no event under them as actor: erasing a principal
#: so named takes what it is the principal of, not everything the ledger wrote.
ROLE_ACTORS = frozenset({"agent", "policy", "ledger"})
#: LMDB refuses keys over 511 bytes; a stream key is 1 tag + 2 length + id + 8 version.
MAX_STREAM_ID_BYTES = 400
#: Longest actor, principal, session or scope an envelope holds, in bytes of UTF-8: what
#: a view keyed by a name (the audit index) can key, as a command's names are bounded.
MAX_NAME_BYTES = 400


def name_fits(name: str) -> bool:
    """True when ``name`` is at most :data:`MAX_NAME_BYTES` long (quick for short ones)."""
    return len(name) <= MAX_NAME_BYTES // 4 or len(name.encode()) <= MAX_NAME_BYTES


class Envelope(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """What the ledger keeps about an event forever.

    Attributes:
        position: gap-free place in the log, assigned at append.
        event_id: the publisher's idempotency id (16 bytes), or empty when none.
        stream: the stream id in its key form (see :func:`stream_key`).
        version: the event's version within its stream.
        type: the event type (for our own events, the catalogue tag).
        recorded_at: ledger clock, nanoseconds since the Unix epoch.
        occurred_at: publisher clock, nanoseconds since the Unix epoch.
        actor: who or what wrote it (agent, policy, user).
        principal: whose data the body is; erasure by principal keys on this.
        session: the agent session it came from, or empty.
        scope: a project digest, ``global``, or empty.
        schema: the body's schema version.
        commitment: ``sha256(salt ‖ payload)`` of the stored body.
    """

    position: int
    event_id: bytes
    stream: bytes
    version: int
    type: str
    recorded_at: int
    occurred_at: int
    actor: str
    principal: str
    session: str
    scope: str
    schema: int
    commitment: bytes

    @property
    def stream_id(self) -> StreamId:
        """The stream id as it was given: a UUID or a string."""
        return stream_id_of(self.stream)


#: Return the canonical stored bytes of an envelope (bound once: it is on every hot path).
encode_envelope = msgspec.msgpack.Encoder().encode
#: Decode stored envelope bytes.
decode_envelope = msgspec.msgpack.Decoder(Envelope).decode


def chain_link(previous: bytes, envelope_bytes: bytes) -> Digest:
    """Return the chain hash of an envelope given the hash before it."""
    return Digest(sha256(previous + envelope_bytes).digest())


def stream_id_of(key: bytes) -> StreamId:
    """Turn a stream key back into the id that was given: a UUID or a string."""
    return UUID(bytes=key[3:19]) if key[0] == 1 else key[3:].decode()


def stream_key(stream: StreamId, version: int | None = None) -> bytes:
    """Return the index key of a stream, or of one version in it.

    The key is a type tag, a 2-byte length and the id, so no id is a prefix of
    another; the version is offset by 2**63 so that negative versions sort first.
    """
    if isinstance(stream, UUID):
        raw = b"\x01\x00\x10" + stream.bytes
    else:
        encoded = stream.encode()
        raw = b"\x02" + len(encoded).to_bytes(2, "big") + encoded
    if version is None:
        return raw
    return raw + (version + (1 << 63)).to_bytes(8, "big")


def checked_stored(position: int, previous: bytes, stored: bytes, link: bytes,
                   body: bytes | None) -> Envelope:
    """The envelope of an event as another log stored it, once it is shown to fit.

    ``stored`` is its envelope bytes, ``link`` its chain link, ``body`` its stored body
    (``salt ‖ payload``, None once erased), and ``previous`` the link before it. A copy
    replayed verbatim (an import, a replica) is checked here before a byte is written.

    Raises:
        ReplayMismatchError: the envelope does not decode or is not at ``position``, the
            link does not follow from ``previous``, or the body does not match the
            commitment.
    """
    try:
        envelope = decode_envelope(stored)
    except msgspec.DecodeError as e:
        raise ReplayMismatchError(position, f"the envelope does not decode ({e})") from None
    if envelope.position != position:
        raise ReplayMismatchError(position, f"the envelope there is position "
                                  f"{envelope.position} (events missing or reordered)")
    if len(envelope.event_id) not in (0, 16) or len(envelope.stream) > 3 + MAX_STREAM_ID_BYTES:
        raise ReplayMismatchError(position, "its event id or stream id is not one a log stores")
    if encode_envelope(envelope) != stored:
        raise ReplayMismatchError(position, "the envelope is not in its canonical form")
    if chain_link(previous, stored) != link:
        raise ReplayMismatchError(position, "its chain link does not follow from the one "
                                  "before (an edited envelope, or events missing or reordered)")
    if body is not None and (len(body) < SALT_BYTES
                             or sha256(body).digest() != envelope.commitment):
        raise ReplayMismatchError(position, "its body does not match the envelope's commitment")
    return envelope
