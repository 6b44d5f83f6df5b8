"""The export file: what ``lessonledger export`` writes and ``import`` replays.

JSON lines, UTF-8. The first line is the header, ``{"lessonledger_export": {...}}``:
the format, the log, the source's ``head``, what was selected, the ``last`` position the
selection covers and the chain link there (``chain``, hex), whether the stored form is
included, and when it was written. Every further line is one event, in log order, as
``log --json`` shows it (times ISO 8601 UTC, each with its exact nanoseconds in a
``…_ns`` field) plus its ``schema``; an erased body is ``"erased"``, never anything else.

With ``--include-envelopes`` each event also carries ``stored``: its envelope bytes, its
chain link and its stored body (``salt ‖ payload``; null once erased), base64. That is
what an import replays, verbatim: positions, recorded times, salts, commitments and
chain links are the source's, so the new home's chain head equals the source's and
``verify`` passes there. An event's readable fields must say exactly what its stored
form says, or the line was edited.

Which events a selection takes (:func:`selected`):

- ``principal P`` (a subject-access export): every event whose envelope names P as its
  principal or its actor, or whose body names P (``names_a_person``: a grant to P, an
  erasure of P or one P made, a delta P approved, rejected or archived). A body that is
  erased names no one any more: such an event is taken only by its envelope. A
  revocation of a key granted to P names only the key, and is not taken.
- ``project P``: every event whose envelope's scope is P.
- ``from N`` / ``to M``: positions N to M.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
from lessonledger.ledger.envelope import SALT_BYTES, Envelope, decode_envelope
from lessonledger.ledger.events import NAMES_A_PERSON, decode_event
from lessonledger.ledger.log import EventLog, Record
from lessonledger.ops.render import record_json

__all__ = ["FORMAT", "HEADER_KEY", "Header", "Selection", "Stored", "event_line",
           "header_line", "rows", "selected"]

FORMAT = 1
HEADER_KEY = "lessonledger_export"


class Selection(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """What an export takes: one principal, one project, or a range of positions."""

    principal: str | None = None
    project: str | None = None
    start: int | None = msgspec.field(default=None, name="from")
    stop: int | None = msgspec.field(default=None, name="to")

    @property
    def whole(self) -> bool:
        """True when it takes every event from position 1 (a prefix when ``stop``)."""
        return self.principal is None and self.project is None and (self.start or 1) == 1


class Header(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The export's first line: what it holds, and the chain link it ends at."""

    format: int
    #: The log's name (``log`` in the file).
    log_name: str = msgspec.field(name="log")
    head: int
    last: int
    chain: str
    selection: Selection
    envelopes: bool
    exported_at: str
    exported_at_ns: int


class Stored(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An event's stored form, replayed verbatim by an import."""

    envelope: bytes
    link: bytes
    body: bytes | None


class Row(msgspec.Struct, frozen=True):
    """One stored event as the log holds it, decoded."""

    envelope: Envelope
    stored: Stored

    @property
    def record(self) -> Record:
        """The record as a reader of the log sees it."""
        body = self.stored.body
        return Record(self.envelope, body[SALT_BYTES:] if body is not None else None)


def rows(log: EventLog, start: int, stop: int) -> Iterator[Row]:
    """The log's stored events from ``start`` to ``stop``, as stored."""
    for position, envelope, body, link in log.raw(start):
        if position > stop:
            return
        yield Row(decode_envelope(envelope), Stored(envelope, link or b"", body))


def header_line(header: Header) -> dict[str, Any]:
    """The header as its line's object."""
    return {HEADER_KEY: msgspec.to_builtins(header)}


def event_line(row: Row, *, envelopes: bool) -> dict[str, Any]:
    """One event as its line's object (with its stored form when ``envelopes``)."""
    line = record_json(row.record)
    line["schema"] = row.envelope.schema
    if envelopes:
        line["stored"] = msgspec.to_builtins(row.stored)
    return line


def _named_in_body(row: Row) -> frozenset[str]:
    """The people an event's body names beyond its envelope (none once it is erased)."""
    record = row.record
    if record.payload is None or row.envelope.type not in NAMES_A_PERSON:
        return frozenset()
    try:
        return decode_event(record.payload).principals()
    except msgspec.DecodeError:
        return frozenset()  # another writer's body under our tag names no one we know


def selected(row: Row, selection: Selection) -> bool:
    """True when the selection takes this event (see the module's docstring)."""
    envelope = row.envelope
    if selection.principal is not None:
        return selection.principal in (envelope.principal, envelope.actor) or \
            selection.principal in _named_in_body(row)
    if selection.project is not None:
        return envelope.scope == selection.project
    return True  # the range is read as such
