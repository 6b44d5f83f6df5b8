"""The catalogue and the transcoder round-trip whatever they are given."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from lessonledger.ledger.events import EVENT_TYPES, AnyEvent, decode_event, encode_event
from lessonledger.ledger.transcoder import MsgspecTranscoder
from strategies import events


@given(events())
def test_catalogue_events_round_trip(event: AnyEvent) -> None:
    body = encode_event(event)
    assert decode_event(body) == event
    assert encode_event(decode_event(body)) == body


def test_every_tag_is_explicit_and_namespaced() -> None:
    assert len(EVENT_TYPES) == 23
    assert all("." in tag for tag in EVENT_TYPES)


_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False), st.text(max_size=20), st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.datetimes(timezones=st.sampled_from([None, UTC])), st.dates(),
)
_plain = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)


@given(_plain)
@example({"id": UUID(int=1), "amount": Decimal("1.10"), "at": datetime(2026, 1, 1, tzinfo=UTC),
          "day": date(2026, 1, 2), "nested": [{"x": [UUID(int=2)]}]})
def test_transcoder_round_trips_plain_data(value: Any) -> None:
    transcoder = MsgspecTranscoder()
    decoded = transcoder.decode(transcoder.encode(value))
    assert decoded == value
    assert type(decoded) is type(value)


def test_transcoder_turns_tuples_into_lists_like_json() -> None:
    transcoder = MsgspecTranscoder()
    assert transcoder.decode(transcoder.encode((1, (2, UUID(int=3))))) == [1, [2, UUID(int=3)]]


def test_transcoder_refuses_unknown_types_with_a_clear_error() -> None:
    transcoder = MsgspecTranscoder()
    with pytest.raises(TypeError, match="cannot transcode 'object'"):
        transcoder.encode({"x": object()})
