"""Confidences rounded by value: the answers kept are the rounding's own, bit for bit.

``clamp`` and a move's shown confidence keep the rounding of each value they met (it costs
near a microsecond); whatever was asked before, each answers as the arithmetic does,
sign of zero and type included.
"""

from __future__ import annotations

import math
import struct

from hypothesis import given
from hypothesis import strategies as st
from lessonledger.projections.lessons import _shown
from lessonledger.projections.rules import clamp

_values = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 0.5, 0.65, 0.2, 1.0, 1e-10, -1e-10, 0.1 + 0.2])


def _bits(value: float) -> bytes:
    return struct.pack(">d", value)


@given(st.lists(_values, min_size=1, max_size=40))
def test_clamp_and_shown_answer_as_the_rounding_whatever_came_before(values: list[float]) -> None:
    for value in [*values, *reversed(values)]:
        clamped = round(min(1.0, max(0.0, value)), 9)
        assert type(clamp(value)) is float
        assert _bits(clamp(value)) == _bits(clamped)
        if not math.isnan(value):
            assert _bits(_shown(value)) == _bits(round(value, 6))


def test_a_negative_zero_is_shown_as_itself_after_a_zero() -> None:
    assert _bits(_shown(0.0)) == _bits(0.0)
    assert _bits(_shown(-0.0)) == _bits(-0.0)
    assert _bits(clamp(-0.0)) == _bits(0.0)
