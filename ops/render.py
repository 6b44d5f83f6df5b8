"""How records look to a person and to a program (``--json``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from lessonledger.ledger.events import decode_event
from lessonledger.ledger.log import Record
from lessonledger.ledger.text import printable

__all__ = [
    "TimeRangeError", "echo", "json_line", "nonblank", "parse_time", "print_json", "printable",
    "record_json", "record_line", "time_fields", "timestamp",
]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(ns: int) -> str:
    """Format nanoseconds since the epoch as an ISO 8601 UTC time, to the microsecond.

    Integer arithmetic, never a float: ``ns / 1e9`` is off by up to a microsecond at
    today's times. Where the nanoseconds matter (``log``, ``why``, ``export``) the exact
    figure goes beside it in a ``…_ns`` field (:func:`time_fields`).
    """
    return (_EPOCH + timedelta(microseconds=ns // 1000)).isoformat(timespec="microseconds")


def time_fields(name: str, ns: int) -> dict[str, str | int]:
    """``{name: ISO time, name + "_ns": ns}``: a time as people read it, and exactly."""
    return {name: timestamp(ns), f"{name}_ns": ns}


def echo(line: str) -> None:
    """Print a line of human output; stored text in it shows its controls as escapes.

    Every human output that carries stored text prints through here (or formats with
    :func:`printable`), so no stored line break, NUL, terminal escape or bidi override
    reaches the terminal. ``--json`` output is exact and does not.
    """
    print(printable(line))


#: What ``str.splitlines`` ends a line at that JSON writes raw: the other line breaks
#: (``\n``, ``\r``, ``\v``, ``\f``, ``\x1c``-``\x1e``) are controls, escaped by JSON itself.
_RAW_LINE_BREAKS = {ord("\x85"): "\\u0085", ord("\u2028"): "\\u2028", ord("\u2029"): "\\u2029"}


def print_json(obj: object) -> None:
    r"""Write one object as a line of JSON (what every ``--json`` prints).

    U+0085 (NEL), U+2028 and U+2029 are written as ``\u0085``, ``\u2028`` and ``\u2029``:
    the same JSON value, but a reader splitting on every line break ``str.splitlines``
    knows still sees one object per line (JSON escapes the others, which are controls).
    """
    sys.stdout.write(json_line(obj))


def json_line(obj: object) -> str:
    """One object as a line of JSON, newline included, as :func:`print_json` writes it."""
    return msgspec.json.encode(obj).decode().translate(_RAW_LINE_BREAKS) + "\n"


class TimeRangeError(ValueError):
    """A well-formed time the ledger's clock cannot hold."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time from the command line; a time without a zone is taken as UTC.

    Raises:
        ValueError: ``text`` is not an ISO 8601 time, or not one the ledger's clock holds;
            the message says which.
    """
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        msg = f"expected an ISO 8601 time such as 2026-11-29T12:00:00Z, got {text!r}"
        raise ValueError(msg) from None
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    # The ledger's clock is 64-bit nanoseconds since 1970.
    if not datetime(1970, 1, 1, tzinfo=UTC) <= value < datetime(2262, 1, 1, tzinfo=UTC):
        msg = f"{text!r} is outside 1970-2261, the years the ledger's clock can hold"
        raise TimeRangeError(msg)
    return value


def _body(record: Record) -> Any:
    if record.payload is None:
        return "erased"
    try:
        return msgspec.to_builtins(decode_event(record.payload))
    except msgspec.DecodeError:
        # Not one of our catalogue events (an eventsourcing application's, say).
        return {"raw_hex": record.payload.hex()}


def record_json(record: Record) -> dict[str, Any]:
    """Everything an auditor may see of one event, as plain data.

    Times are ISO 8601 UTC to the microsecond, each with its exact nanoseconds beside it
    (``recorded_at_ns``): the ledger's clock, which ``--as-of`` and ``export`` use.
    """
    e = record.envelope
    return {
        "position": e.position,
        **time_fields("recorded_at", e.recorded_at),
        **time_fields("occurred_at", e.occurred_at),
        "type": e.type,
        "stream": str(e.stream_id),
        "version": e.version,
        "event_id": e.event_id.hex(),
        "actor": e.actor,
        "principal": e.principal,
        "session": e.session,
        "scope": e.scope,
        "body": _body(record),
    }


def record_line(record: Record) -> str:
    """One event as a line of text, its stored text escaped (:func:`printable`)."""
    d = record_json(record)
    body = d["body"] if d["body"] == "erased" else msgspec.json.encode(d["body"]).decode()
    return printable(
        f"{d['position']:>8}  {d['recorded_at']}  {d['type']:<20} stream={d['stream']} "
        f"v{d['version']} actor={d['actor'] or '-'} principal={d['principal'] or '-'}  {body}"
    )


def add_read_only(parser: Any) -> None:
    """The ``--read-only`` option every query and audit command takes."""
    parser.add_argument("--read-only", action="store_true", help=(
        "write nothing to the home, not even a lock or a record of what was shown: for a "
        "backup or a snapshot that no process writes to (automatic on a read-only "
        "filesystem)"))


#: The largest count or position a command takes (a log position is 64-bit).
MOST_COUNT = (1 << 63) - 1


def count_option(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``minimum`` to :data:`MOST_COUNT`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= MOST_COUNT:
            msg = f"expected a whole number from {minimum} to {MOST_COUNT}, got {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse


def nonblank(text: str) -> str:
    """An argparse type: text that is more than spaces (a name, a reason, an id prefix).

    An empty prefix matches every id and an empty name nobody: either is a slip (an
    unset shell variable, say), never what a person erasing or granting meant.
    """
    if not text.strip():
        msg = f"expected a name or text, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return text
