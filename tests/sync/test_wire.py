"""The wire protocol: a corpus of good and bad frames, and round trips of every kind."""

from __future__ import annotations

from uuid import UUID, uuid4

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.commands.errors import (
    BatchRefusedError,
    InvalidCommandError,
    StaleVersionError,
    UnknownLessonError,
)
from lessonledger.ledger.errors import BodyTooLargeError, LessonLedgerError
from lessonledger.sync import wire
from lessonledger.sync.wire import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Answer,
    BatchRequest,
    Busy,
    CommandRequest,
    Frame,
    QueryRequest,
    Receipted,
    Refused,
    WireError,
    decode_body,
    decode_frame,
    encode_frame,
    refusal,
    refusal_error,
)
from msgspec import Raw

enc = msgspec.msgpack.encode

GOOD = [
    CommandRequest(Raw(enc({"command": "observe_outcome", "key": "k"}))),
    BatchRequest([Raw(enc({"command": "reconcile"}))]),
    QueryRequest("recall", {"project": "a" * 32, "query": "run the tests"}),
    QueryRequest("head"),
    wire.SubmitRequest(b'{"event_id": "x"}'),
    wire.SubscribeRequest(),
    wire.StatusRequest(),
    Receipted([1, 2], {"outcome_id": uuid4()}),
    wire.Receipts([Receipted([3])]),
    Refused("UnknownLessonError", "no lesson", [("lesson_id", "u", str(uuid4()))]),
    Answer(Raw(enc([1, 2, 3]))),
    Busy(50),
    wire.Subscribed("tcp://127.0.0.1:7651", 9),
]

BAD: list[tuple[bytes, str]] = [
    (b"", "garbage"),
    (b"\x00\x01\x02garbage", "garbage"),
    (b"GET / HTTP/1.1\r\n\r\n", "garbage"),
    (enc({"version": 1, "kind": "command"}), "garbage"),
    (enc([PROTOCOL_VERSION, "command"]), "garbage"),
    (enc([PROTOCOL_VERSION, "command", "not-an-int", b""]), "garbage"),
    (enc([PROTOCOL_VERSION + 1, "command", 1, None]), "version"),
    (enc([0, "command", 1, None]), "version"),
    (enc(["1", "command", 1, None]), "garbage"),
    (enc([PROTOCOL_VERSION, "drop_tables", 1, None]), "kind"),
    (b"\x94\x01" + b"\xff" * 10, "garbage"),
    (b"\x00" * (MAX_FRAME_BYTES + 1), "oversize"),
]


@pytest.mark.parametrize("body", GOOD, ids=lambda b: type(b).__name__)
def test_every_kind_round_trips(body: msgspec.Struct) -> None:
    frame = decode_frame(encode_frame(body, 7))
    assert (frame.version, frame.id) == (PROTOCOL_VERSION, 7)
    assert decode_body(frame, type(body)) == body


@pytest.mark.parametrize(("data", "problem"), BAD, ids=[p + str(i) for i, (_, p) in
                                                        enumerate(BAD)])
def test_bad_frames_are_refused_by_name(data: bytes, problem: str) -> None:
    with pytest.raises(WireError) as caught:
        decode_frame(data)
    assert caught.value.problem == problem
    assert "nothing was done" in str(caught.value)


def test_a_body_that_does_not_hold_to_its_kind_is_garbage() -> None:
    frame = decode_frame(enc([PROTOCOL_VERSION, "query", 1, {"query": "drop"}]))
    with pytest.raises(WireError) as caught:
        decode_body(frame)
    assert caught.value.problem == "garbage"
    frame = decode_frame(encode_frame(Busy(1)))
    with pytest.raises(WireError, match="expected a"):
        decode_body(frame, Answer)


def test_a_smaller_limit_is_kept() -> None:
    data = encode_frame(QueryRequest("recall", {"query": "x" * 2000}))
    with pytest.raises(WireError) as caught:
        decode_frame(data, limit=1000)
    assert caught.value.problem == "oversize"


def test_a_value_msgpack_cannot_carry_is_refused_before_sending() -> None:
    with pytest.raises(WireError):
        encode_frame(QueryRequest("head", {"n": 2**70}))


def test_kinds_can_be_added_but_not_taken() -> None:
    class Chunk(msgspec.Struct, frozen=True):
        offset: int

    wire.register_kind("test.chunk", Chunk)
    assert decode_body(decode_frame(encode_frame(Chunk(5)))) == Chunk(5)
    with pytest.raises(ValueError, match="taken"):
        wire.register_kind("command", Chunk)


ERRORS: list[LessonLedgerError] = [
    UnknownLessonError(UUID(int=5)),
    StaleVersionError(UUID(int=6), 1, 2),
    InvalidCommandError("invalid ObserveOutcome: bad project", "$.project"),
    BodyTooLargeError(5 << 20, 1 << 20, "$.event"),
    BatchRefusedError(2, StaleVersionError(UUID(int=7), 3, 4)),
    wire.BatchTooLargeError(501),
    WireError("bad bytes", "garbage"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_a_refusal_comes_back_as_the_same_error(error: LessonLedgerError) -> None:
    frame = decode_frame(encode_frame(refusal(error)))
    back = refusal_error(decode_body(frame, Refused))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert {k: v for k, v in vars(back).items() if not isinstance(v, Exception)} == {
        k: v for k, v in vars(error).items() if not isinstance(v, Exception)}
    if isinstance(error, BatchRefusedError):
        assert isinstance(back, BatchRefusedError)
        assert type(back.cause) is StaleVersionError
        assert back.cause.current == 4


def test_an_unknown_error_class_comes_back_as_the_root() -> None:
    back = refusal_error(Refused("SomethingNew", "a future refusal"))
    assert type(back) is LessonLedgerError
    assert str(back) == "a future refusal"


@given(st.integers(min_value=0, max_value=2**63 - 1),
       st.lists(st.integers(min_value=1, max_value=2**62), max_size=50),
       st.dictionaries(st.sampled_from(["outcome_id", "lesson_id"]), st.uuids()))
def test_receipts_round_trip(request_id: int, positions: list[int],
                             ids: dict[str, UUID]) -> None:
    body = Receipted(positions, ids)
    frame = decode_frame(encode_frame(body, request_id))
    assert frame.id == request_id
    assert decode_body(frame, Receipted) == body


@given(st.binary(max_size=300))
def test_random_bytes_never_get_past_decode_unchecked(data: bytes) -> None:
    try:
        frame = decode_frame(data)
    except WireError:
        return
    assert isinstance(frame, Frame)
    assert frame.version == PROTOCOL_VERSION
    assert frame.kind in wire.KINDS
    problems = []
    try:
        decode_body(frame)
    except WireError as e:
        problems.append(e.problem)
    assert problems in ([], ["garbage"])


@given(st.text(max_size=200),
       st.dictionaries(st.text(max_size=10), st.integers(-(2**63), 2**63 - 1), max_size=5))
def test_queries_round_trip(text: str, extra: dict[str, int]) -> None:
    body = QueryRequest("recall", {"query": text, **extra})
    assert decode_body(decode_frame(encode_frame(body))) == body
