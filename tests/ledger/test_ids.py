"""Minted event ids: valid UUIDv7, strictly increasing within a process, unique."""

from __future__ import annotations

import time
from itertools import pairwise

from lessonledger.ledger import ids
from lessonledger.ledger.ids import derived_id, new_event_id


def test_ids_minted_in_a_burst_are_strictly_increasing() -> None:
    minted = [new_event_id() for _ in range(20_000)]  # many share a millisecond
    assert all(a.bytes < b.bytes for a, b in pairwise(minted))
    assert len({m.bytes[:6] for m in minted}) < len(minted)


def test_ids_are_version_7_and_carry_the_time() -> None:
    before = time.time_ns() // 1_000_000
    minted = new_event_id()
    assert (minted.version, minted.variant) == (7, "specified in RFC 4122")
    assert before <= int.from_bytes(minted.bytes[:6], "big") <= time.time_ns() // 1_000_000 + 1


def test_a_spent_counter_borrows_the_next_millisecond() -> None:
    first = new_event_id()
    ids._counter = ids._COUNTER_MAX  # as if 2**42 ids had been minted this millisecond
    ids._last_ms = int.from_bytes(first.bytes[:6], "big") + 10_000  # and the clock stepped back
    later = new_event_id()
    assert later.bytes > first.bytes
    assert int.from_bytes(later.bytes[:6], "big") == ids._last_ms


def test_derived_ids_keep_the_parent_time_prefix() -> None:
    parent = new_event_id()
    assert derived_id(parent, "x") == derived_id(parent, "x")
    assert derived_id(parent, "x").bytes[:6] == parent.bytes[:6]
