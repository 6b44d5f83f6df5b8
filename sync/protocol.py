"""The sync protocol's messages, without sockets: one msgpack frame each.

A replica asks, the hub answers each request with exactly one reply, so the hub keeps
no state between requests and flow control is the replica's: it keeps at most
``credit`` requests outstanding (ZeroMQ guide, fileio3), so the hub never has more than
that many chunks in flight to it, and a slow replica holds up no one else.

- :class:`Hello` → :class:`Refs`: the hub's head, its chain link, the Merkle root over
  its segment ids, the erasures it holds, its refs. The replica's ``have`` (its head
  position and link) is the whole have set of a single-writer linear log: the hub checks
  it is a prefix of its own and says so (:class:`Refused` ``diverged``).
- :class:`SegmentIds` → :class:`Ids`: the ids of the segments from an index on.
- :class:`Fetch` → :class:`Chunk`: the stored envelopes of a position range (never
  across a segment's end), which joined are the bytes its segment id hashes, and the
  bodies the replica may read, erased ones never.
- :class:`FetchMany` → one :class:`Chunk` per segment the range touches, in order,
  each its own reply frame: several segments for one request (the only request with
  more than one reply; a refusal is one frame).
- :class:`Push` → :class:`Pushed`: commands made on a replica, decided by the hub.
- :class:`Ack` → :class:`Acked`: a replica applied an erasure and compacted.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from lessonledger.ledger.objects import join_envelopes
from lessonledger.sync import wire
from lessonledger.sync.errors import ProtocolError
from msgspec import Meta

__all__ = [
    "MAX_FETCH_SEGMENTS",
    "MAX_FRAME_BYTES",
    "Ack",
    "Acked",
    "Chunk",
    "Fetch",
    "FetchMany",
    "Hello",
    "Ids",
    "Push",
    "PushResult",
    "Pushed",
    "Refs",
    "Refused",
    "Reply",
    "Request",
    "SegmentIds",
    "SyncFrame",
    "SyncReplyFrame",
    "decode_reply",
    "decode_request",
    "encode",
    "encode_reply_frame",
]

#: Segments one :class:`FetchMany` may span (so many reply frames, at most).
MAX_FETCH_SEGMENTS = 16
#: The largest frame either side accepts: a full segment of envelopes with 1 MiB bodies
#: would be more, so a chunk stops adding bodies at about 8 MiB.
MAX_FRAME_BYTES = 64 << 20
Name = Annotated[str, Meta(max_length=200)]
Hash = Annotated[bytes, Meta(max_length=32)]


class _Message(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="op"):
    pass


class Hello(_Message, frozen=True, tag="hello"):
    """Who asks and what it has: its head position and the chain link there."""

    replica: Name
    have: Annotated[int, Meta(ge=0)] = 0
    link: Hash = b""


class SegmentIds(_Message, frozen=True, tag="ids"):
    """The ids of the segments from index ``start`` (from 0) on, of the log up to ``upto``.

    ``upto`` is the head the hub's :class:`Refs` named (0: its head now): the hub
    commits between the two requests, and the ids must hash to the root it sent.
    """

    start: Annotated[int, Meta(ge=0)]
    upto: Annotated[int, Meta(ge=0)] = 0


class Fetch(_Message, frozen=True, tag="fetch"):
    """Records ``start`` to ``stop`` (inclusive), within one segment."""

    start: Annotated[int, Meta(ge=1)]
    stop: Annotated[int, Meta(ge=1)]


class FetchMany(_Message, frozen=True, tag="fetch_many"):
    """Records ``start`` to ``stop`` (inclusive), across at most :data:`MAX_FETCH_SEGMENTS`."""

    start: Annotated[int, Meta(ge=1)]
    stop: Annotated[int, Meta(ge=1)]


class Push(_Message, frozen=True, tag="push"):
    """Commands made on a replica while away, each msgpack-encoded (or a JSON line)."""

    replica: Name
    #: For each command, the replica's head when it was made.
    based_on: Annotated[list[int], Meta(max_length=10_000)]
    commands: Annotated[list[bytes], Meta(max_length=10_000)]


class Ack(_Message, frozen=True, tag="ack"):
    """The replica applied the erasure at ``erasure``: bodies gone, views refolded, compacted."""

    replica: Name
    erasure: Annotated[int, Meta(ge=1)]


class Refs(_Message, frozen=True, tag="refs"):
    """The hub's head, what it commits to, and its refs.

    ``erased`` lists the positions whose bodies an erasure later than the hub's own log
    took (the hub is a checkout of a snapshot older than that erasure): a replica that
    still holds one deletes it, since no ``Erased`` record will ever tell it.
    ``principal`` is whose the hub writes the peer's pushed commands as (its key's
    grant's, a keyless hub's own; empty when the hub binds none): a queued command
    names no principal, so the replica needs it to drop a principal's commands at
    that principal's erasure.
    """

    head: int
    link: Hash
    root: Hash
    segments: int
    erasures: list[int]
    refs: dict[str, Hash]
    erased: list[int] = []
    principal: str = ""


class Ids(_Message, frozen=True, tag="segment_ids"):
    """Segment ids from ``start`` to the hub's head (the open segment's last)."""

    start: int
    ids: list[Hash]


class Chunk(_Message, frozen=True, tag="chunk"):
    """Stored envelopes from ``start`` on, with bodies (``b""`` where none is sent).

    ``envelopes`` are the stored envelope bytes, one msgpack ``bin`` each, so a replica
    gets them split by the decoder; :attr:`run` joins them as a segment id hashes them
    (:func:`~lessonledger.ledger.objects.join_envelopes`), so a chunk of a whole segment
    is verified with one hash. ``withheld`` lists positions whose bodies the replica's
    key may not read (or that the hub itself was never sent); ``erased`` those the hub
    holds no body of because an erasure later than its own log took it: a hub checked
    out from a snapshot taken before that erasure (its ``erased_later``), where no
    ``Erased`` record in the log names them.
    """

    start: int
    envelopes: list[bytes]
    bodies: list[bytes]
    withheld: list[int] = []
    erased: list[int] = []

    @property
    def run(self) -> bytes:
        """The envelopes as one run: the bytes their segment id hashes after its tag."""
        return join_envelopes(self.envelopes)


class PushResult(_Message, frozen=True, tag="result"):
    """One pushed command: the positions it wrote, or why it was refused."""

    key: str
    positions: list[int] = []
    refused: str = ""


class Pushed(_Message, frozen=True, tag="pushed"):
    """What the hub decided for each pushed command, in order."""

    results: list[PushResult]


class Acked(_Message, frozen=True, tag="acked"):
    """The acknowledgement is recorded (at ``position`` of the hub's log)."""

    erasure: int
    position: int


class Refused(_Message, frozen=True, tag="refused"):
    """The request is refused: ``code`` for programs, ``message`` for people."""

    code: str
    message: str


Request = Hello | SegmentIds | Fetch | FetchMany | Push | Ack
Reply = Refs | Ids | Chunk | Pushed | Acked | Refused



class SyncFrame(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sync request carried in a hub frame (kind ``sync``): one endpoint serves both."""

    frame: bytes


class SyncReplyFrame(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sync reply carried in a hub frame (kind ``sync.reply``)."""

    frame: bytes


# The hub's envelope (version, size and kind checks) carries sync's frames too.
wire.register_kind("sync", SyncFrame)
wire.register_kind("sync.reply", SyncReplyFrame)

#: An empty ``bin 8``: how an empty reply frame's bytes end.
_EMPTY_BIN = b"\xc4\x00"


def encode_reply_frame(frame: bytes, request_id: int) -> bytes:
    """``wire.encode_frame(SyncReplyFrame(frame), request_id)``, with one copy of ``frame``.

    The hub wraps every chunk a clone moves: encoded as a struct inside a frame, each
    chunk's bytes would be copied twice. The bytes are the same: the frame's body is its
    last field and the reply's only field is the chunk, so the wrapping is the encoding
    of an empty reply, less its empty ``bin``, then the ``bin`` header msgpack gives
    ``frame`` (its shortest) and ``frame`` itself.
    """
    head = wire.encode_frame(SyncReplyFrame(b""), request_id)
    size = len(frame)
    if size < 1 << 8:
        header = b"\xc4" + size.to_bytes(1, "big")
    elif size < 1 << 16:
        header = b"\xc5" + size.to_bytes(2, "big")
    else:
        header = b"\xc6" + size.to_bytes(4, "big")
    return b"".join((head[:-len(_EMPTY_BIN)], header, frame))

_encoder = msgspec.msgpack.Encoder()
_requests = msgspec.msgpack.Decoder(Request)
_replies = msgspec.msgpack.Decoder(Reply)


def encode(message: Request | Reply) -> bytes:
    """One frame's bytes."""
    return _encoder.encode(message)


def decode_request(frame: bytes) -> Request:
    """A request from its frame.

    Raises:
        ProtocolError: the frame is not one.
    """
    if len(frame) > MAX_FRAME_BYTES:
        msg = f"a request of {len(frame):,} bytes is over the {MAX_FRAME_BYTES:,} limit"
        raise ProtocolError(msg)
    try:
        return _requests.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        msg = f"not a sync request: {e}"
        raise ProtocolError(msg) from e


def decode_reply(frame: bytes) -> Reply:
    """A reply from its frame.

    Raises:
        ProtocolError: the frame is not one.
    """
    try:
        return _replies.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        msg = f"not a sync reply (damaged on the way?): {e}"
        raise ProtocolError(msg) from e
