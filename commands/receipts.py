"""What a command wrote: its receipt, and the ids it minted."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec
from lessonledger.ledger.events import EVENT_CLASSES, MINTS_AN_ID, tag_of

__all__ = ["MINTED_BY", "Receipt", "minted", "minted_events"]

#: The id field each id-minting event carries, by tag (``outcome_id`` for an outcome).
MINTED_BY: dict[str, str] = {
    tag_of(cls): next(name for name in ("outcome_id", "lesson_id", "delta_id")
                      if name in cls.__struct_fields__)
    for cls in EVENT_CLASSES if tag_of(cls) in MINTS_AN_ID
}


class Receipt(msgspec.Struct, frozen=True):
    """What a command wrote: the positions of its own events and the ids it minted."""

    positions: list[int]
    ids: dict[str, UUID] = {}


def minted(decided: list[Any]) -> dict[str, UUID]:
    """The ids a command's decided events minted (its outcome's, its lesson's)."""
    return minted_events([d.event for d in decided])


def minted_events(events: list[Any]) -> dict[str, UUID]:
    """The ids the first outcome, proposed lesson and proposed delta among ``events`` carry.

    Minted where the events are decided, so a hub's receipt names the ids its principal's
    command got: a client cannot derive them, since a key is scoped by the principal the
    hub binds to the client's key.
    """
    ids: dict[str, UUID] = {}
    for event in events:
        for name in ("outcome_id", "lesson_id", "delta_id"):
            value = getattr(event, name, None)
            if value is not None and name not in ids and tag_of(type(event)) in MINTS_AN_ID:
                ids[name] = value
    return ids
