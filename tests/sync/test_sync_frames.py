"""The protocol without sockets: a corpus of good and bad frames.

Every good request decodes to what was encoded and is answered; every bad one (cut
short, another tag, a wrong type, out of range, oversized, not msgpack at all) is
refused with a ``Refused`` reply saying so, and the service writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.commands import open_ledger
from lessonledger.ledger.objects import SEGMENT_SIZE, segment_of
from lessonledger.sync import wire
from lessonledger.sync.errors import ProtocolError
from lessonledger.sync.protocol import (
    MAX_FRAME_BYTES,
    Ack,
    Chunk,
    Fetch,
    FetchMany,
    Hello,
    Push,
    Refs,
    Refused,
    SegmentIds,
    SyncReplyFrame,
    decode_reply,
    decode_request,
    encode,
    encode_reply_frame,
)
from lessonledger.sync.service import SyncService
from sync_workload import fill

GOOD = [Hello("r1"), Hello("r1", 3, b"\x00" * 32), SegmentIds(0), Fetch(1, 10),
        Push("r1", [0], [b'{"command":"reconcile","key":"k","now":"2026-01-01T00:00:00Z"}']),
        Ack("r1", 5)]
BAD = [
    b"",
    b"\xc1",
    encode(Hello("r1"))[:-2],
    msgspec.msgpack.encode({"op": "nope"}),
    msgspec.msgpack.encode({"op": "fetch", "start": 0, "stop": 3}),
    msgspec.msgpack.encode({"op": "fetch", "start": "1", "stop": 3}),
    msgspec.msgpack.encode({"op": "hello", "replica": "r", "have": -1}),
    msgspec.msgpack.encode({"op": "hello", "replica": "r" * 201}),
    msgspec.msgpack.encode({"op": "hello", "replica": "r", "link": b"x" * 33}),
    msgspec.msgpack.encode({"op": "ids", "start": 0, "extra": 1}),
    msgspec.msgpack.encode([1, 2, 3]),
    encode(Refs(1, b"", b"", 1, [], {})),  # a reply is not a request
]


@pytest.mark.parametrize("message", GOOD, ids=lambda m: type(m).__name__)
def test_a_good_request_decodes_to_itself(message: object) -> None:
    assert decode_request(encode(message)) == message  # type: ignore[arg-type]


@pytest.mark.parametrize("frame", BAD)
def test_a_bad_request_is_refused_by_the_decoder(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_request(frame)


def test_an_oversized_request_is_refused_before_decoding() -> None:
    with pytest.raises(ProtocolError, match="limit"):
        decode_request(b"\x00" * (MAX_FRAME_BYTES + 1))


@pytest.fixture
def service(tmp_path: Path) -> Iterator[SyncService]:
    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        fill(ledger, 30)
        yield SyncService(ledger)


@pytest.mark.parametrize("frame", BAD)
def test_the_service_answers_a_bad_frame_with_a_refusal_and_writes_nothing(
        service: SyncService, frame: bytes) -> None:
    head = service.ledger.head()
    (reply,) = service.handle(frame, "peer")
    refused = decode_reply(reply)
    assert isinstance(refused, Refused)
    assert refused.code == "malformed"
    assert refused.message
    assert service.ledger.head() == head


@given(st.binary(max_size=200))
def test_no_frame_makes_the_decoder_raise_anything_but_its_error(frame: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(frame)


def test_out_of_range_fetches_and_unknown_erasures_are_refused(service: SyncService) -> None:
    head = service.ledger.head()
    for request in (Fetch(head, head + 1), Fetch(250, 260), Fetch(5, 4), Ack("r1", 3),
                    Hello("r1", head + 1, b"\x00" * 32), Hello("r1", 2, b"\x01" * 32)):
        refused = decode_reply(service.handle(encode(request))[0])
        assert isinstance(refused, Refused), request
    assert service.ledger.head() == head


def test_a_multi_segment_fetch_decodes_and_a_bad_one_is_refused() -> None:
    assert decode_request(encode(FetchMany(1, 600))) == FetchMany(1, 600)
    for bad in ({"op": "fetch_many", "start": 0, "stop": 3},
                {"op": "fetch_many", "start": 1}, {"op": "fetch_many", "start": 1, "stop": -2}):
        with pytest.raises(ProtocolError):
            decode_request(msgspec.msgpack.encode(bad))


@pytest.fixture
def segments(tmp_path: Path) -> Iterator[SyncService]:
    """A hub of a little over three segments."""
    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        fill(ledger, 420)
        assert 3 * SEGMENT_SIZE < ledger.head() < 16 * SEGMENT_SIZE
        yield SyncService(ledger)


def test_a_multi_segment_fetch_is_answered_by_one_chunk_per_segment_as_fetches_are(
        segments: SyncService) -> None:
    head = segments.ledger.head()
    for start, stop in ((1, head), (100, 3 * SEGMENT_SIZE + 5), (5, 9)):
        many = [decode_reply(frame) for frame in segments.handle(encode(FetchMany(start, stop)))]
        singles = []
        at = start
        while at <= stop:
            last = min(stop, (segment_of(at) + 1) * SEGMENT_SIZE)
            singles.append(decode_reply(segments.handle(encode(Fetch(at, last)))[0]))
            at = last + 1
        assert many == singles
        assert all(isinstance(chunk, Chunk) for chunk in many)


def test_out_of_range_multi_segment_fetches_are_refused_in_one_frame(
        segments: SyncService, monkeypatch: pytest.MonkeyPatch) -> None:
    from lessonledger.sync import service as service_module

    monkeypatch.setattr(service_module, "MAX_FETCH_SEGMENTS", 2)
    head = segments.ledger.head()
    for request in (FetchMany(head, head + 1), FetchMany(5, 4),
                    FetchMany(1, 2 * SEGMENT_SIZE + 1)):
        (frame,) = segments.handle(encode(request))
        refused = decode_reply(frame)
        assert isinstance(refused, Refused), request
        assert refused.code == "range"
    assert len(segments.handle(encode(FetchMany(1, 2 * SEGMENT_SIZE)))) == 2


def test_past_the_body_budget_a_multi_segment_fetch_holds_a_record_a_segment(
        segments: SyncService, monkeypatch: pytest.MonkeyPatch) -> None:
    from lessonledger.sync import service as service_module

    monkeypatch.setattr(service_module, "BODY_BUDGET", 20_000)
    frames = segments.handle(encode(FetchMany(1, 3 * SEGMENT_SIZE)))
    chunks = [decode_reply(frame) for frame in frames]
    assert all(isinstance(c, Chunk) for c in chunks)
    starts = [c.start for c in chunks if isinstance(c, Chunk)]
    assert starts == [1, SEGMENT_SIZE + 1, 2 * SEGMENT_SIZE + 1]
    sizes = [[len(b) for b in c.bodies] for c in chunks if isinstance(c, Chunk)]
    assert 1 < len(sizes[0]) < SEGMENT_SIZE
    assert sum(sizes[0]) <= 20_000
    # The budget is the request's: the later segments get what is left, at least a record.
    assert all(1 <= len(s) < len(sizes[0]) for s in sizes[1:])
    assert sum(map(sum, sizes)) <= 20_000 + max(map(max, sizes)) * (len(sizes) - 1)


@given(st.one_of(st.integers(0, 300), st.sampled_from([255, 256, 65_535, 65_536, 200_000])),
       st.binary(min_size=1, max_size=8), st.integers(0, 2**63 - 1))
def test_a_reply_wrapped_with_one_copy_is_the_frame_encode_frame_makes(
        size: int, pattern: bytes, request: int) -> None:
    frame = (pattern * (size // len(pattern) + 1))[:size]
    wrapped = encode_reply_frame(frame, request)
    assert wrapped == wire.encode_frame(SyncReplyFrame(frame), request)
    decoded = wire.decode_frame(wrapped)
    assert decoded.id == request
    assert wire.decode_body(decoded, SyncReplyFrame).frame == frame
