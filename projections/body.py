"""A record's body, decoded at most once however many views read it.

Each view used to decode the bodies it folds itself, so an outcome (most of a big log)
was decoded four times over, once per view that reads outcomes. The runner now decodes a
record's body once, with the catalogue's own decoder, when any view it hands the record
to reads it (:attr:`~lessonledger.projections.runner.Selective.decodes`), and hands every
such view the same event.

The event is what :func:`~lessonledger.ledger.events.decode_event` returns, so a view
that decoded with a narrower decoder (one class, a few, or a partial struct) gets the
same values when the event is of the class it expects. When it is not (None: the body
was erased, or does not decode; or another class than the record's type promises), a
view falls back to its own decoder on the record's payload, which fails or skips exactly
as it did before: sharing the decode changes the cost of a fold, never its result.
"""

from __future__ import annotations

import msgspec
from lessonledger.ledger.events import AnyEvent

__all__ = ["decode", "shared_event"]

#: The catalogue's decoder (as :func:`~lessonledger.ledger.events.decode_event`), bound
#: once: the runner's loop calls it for every body a view reads.
decode = msgspec.msgpack.Decoder(AnyEvent).decode


def shared_event(payload: bytes | None) -> AnyEvent | None:
    """The catalogue event a body holds; None when erased or not a catalogue body.

    A body that does not decode gives None: the view that needs the reason decodes the
    payload itself.
    """
    if payload is None:
        return None
    try:
        return decode(payload)
    except msgspec.DecodeError:
        return None
