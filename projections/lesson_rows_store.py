"""The lesson view saved as rows: one per lesson, outcome, failure and session.

A big home's lesson view was one value of hundreds of megabytes, rewritten whole every
20,000 events. Saved as rows, a save writes only what changed since the last one, and
the parts that only grow (a lesson's moves and evidence, a session's recalls) are cut
into chunks of :data:`CHUNK` items, so a save appends to them instead of rewriting them.
A lesson's usage clocks, which every recall moves, are a row of their own, so a recall
rewrites sixteen bytes, not the lesson.

Keys are a family byte and the item's ordinal (its place in the view's dict, which is
the order it was first folded in), then what part of the item the row holds, and
loading the rows in key order rebuilds every dict in the order a fold from position 0
makes it (the view's dump is the same bytes either way). LMDB rewrites every page a
save touches, with the branch pages above it, so rows that change together sit
together: every lesson's usage clocks (a recall moves hundreds) in one family of
sixteen-byte rows, the lessons' rows (what opening reads) in another, and their
histories (read on demand) in a third.

===================  =========================================================
``h``                the header: position, epoch, erasure, adoptions, observed
``l`` + n            lesson n without its moves, evidence and usage clocks
``U`` + n            lesson n's usage clocks (last used, in play at epoch)
``H`` + n + ``m`` c  chunk c of lesson n's moves
``H`` + n + ``e`` c  chunk c of lesson n's evidence
``x`` + id           an irregular outcome (:mod:`.outcome_table`), by its id
``F`` + key          the failures under ``key`` (``project|op|target``) and n
``R`` + name         session ``name``'s ordinal n
``r`` + n + ``s`` c  chunk c of the lessons recalled in session n
===================  =========================================================

Failures and sessions are keyed by name, so a view opened on a big home reads one when
a query or a fold first needs it (:class:`~.store.PinnedRows`), and a lesson's moves and
evidence when something first reads its history; the header counts failures and
sessions, so a new one takes the next ordinal without reading the others, and lists
what demoted lessons said, so no lesson's moves are read to know it. That is layout 3.
Layout 2 kept a lesson's usage clocks, moves and evidence under the lesson
(``l`` + n + ``u``, ``m`` c, ``e`` c): a save after a day's recalls rewrote nearly
every page of the lessons, and opening read every history to reach the next lesson.
Rows saved before keep failures and sessions by ordinal (``f`` + n: failure n and its
key; ``r`` + n: session n's name), or have no such header. Such views are read whole
and saved afresh in layout 3.

Outcomes are not saved: the log holds them (:mod:`.outcome_table`) but for the irregular
ones. Rows saved before that hold one per outcome (``o`` + n), read as irregular ones.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar
from uuid import UUID

import msgspec
from lessonledger.projections.lesson_rows import (
    Adoption,
    Failure,
    LessonRow,
    Move,
    OutcomeRow,
    State,
)

__all__ = [
    "CHUNK",
    "LAYOUT",
    "Header",
    "chunk_rows",
    "failure_of",
    "failure_row_key",
    "ids_of",
    "irregular_key",
    "key",
    "moves_of",
    "read_header",
    "recalled_of",
    "session_of",
    "session_row_key",
    "state_from_rows",
    "state_rows",
]

#: Items per chunk of a growing list: a save rewrites the last one, which stays well
#: inside a page (a move is about 50 bytes, an id 37).
CHUNK = 16

HEADER = b"h"
LESSON, OUTCOME, FAILURE, SESSION = b"l", b"o", b"f", b"r"
#: Failures and sessions by name (from layout 1).
FAILURE_BY_KEY, SESSION_BY_NAME = b"F", b"R"
#: The layout :func:`state_rows` writes.
LAYOUT = 3
IRREGULAR = b"x"
#: What part of a lesson (or a session) a row under it holds.
USAGE, MOVES, EVIDENCE, RECALLED = b"u", b"m", b"e", b"s"
#: Lessons' usage clocks and histories, each a family of their own (from layout 3).
USAGE_BY_LESSON, HISTORY = b"U", b"H"
#: Which item family each part is kept under.
_OWNER = {MOVES: HISTORY, EVIDENCE: HISTORY, RECALLED: SESSION}


class Header(msgspec.Struct, array_like=True):
    """What the view holds beside its rows."""

    position: int
    epoch: int
    erased_at: int
    adoptions: list[Adoption]
    observed: dict[str, dict[str, str]]
    #: 0: failures and sessions by ordinal; 1: by name, counted below; 2: and what
    #: was demoted.
    layout: int = 0
    failures: int = 0
    sessions: int = 0
    #: What demoted lessons said (``same_as``), so a view need not read their moves.
    demoted: list[tuple[str, str, str, str]] = []


_encode = msgspec.msgpack.Encoder().encode
_header = msgspec.msgpack.Decoder(Header)
_lesson = msgspec.msgpack.Decoder(LessonRow)
_usage = msgspec.msgpack.Decoder(tuple[int, int])
_moves = msgspec.msgpack.Decoder(list[Move])
_ids = msgspec.msgpack.Decoder(list[UUID])
_outcome = msgspec.msgpack.Decoder(OutcomeRow)
_failure = msgspec.msgpack.Decoder(tuple[str, Failure])
_numbered_failure = msgspec.msgpack.Decoder(tuple[int, Failure])
_ordinal = msgspec.msgpack.Decoder(int)
_texts = msgspec.msgpack.Decoder(list[str])

def _sharing(row: LessonRow) -> LessonRow:
    """``row``, its repeated strings made one object each (``sys.intern``).

    A decoded row has a string of its own for every field. In a 1.8M-event home the
    42,000 lessons took 102 MB decoded; their operations, targets, scopes and the
    versions in their fingerprints are a few hundred strings, and sharing them took 27 MB
    off for 0.17 s of the open. Sessions and projects are left: interning a lesson's
    sessions took 0.3 s more for 7 MB.
    """
    intern = sys.intern
    row.avoid_op, row.prefer_op, row.target = (intern(row.avoid_op), intern(row.prefer_op),
                                               intern(row.target))
    row.scope, row.origin = intern(row.scope), intern(row.origin)
    fingerprint = row.fingerprint  # the row's own dict; its names msgspec shares already
    for name in fingerprint:
        fingerprint[name] = intern(fingerprint[name])
    return row

T = TypeVar("T")
_text = msgspec.msgpack.Decoder(str)


def key(family: bytes, ordinal: int, chunk: int | None = None) -> bytes:
    """A row's key: its family (or part), the item's ordinal, a chunk number for a list."""
    if family == USAGE:
        return USAGE_BY_LESSON + ordinal.to_bytes(8, "big")
    owner = _OWNER.get(family)
    if owner is None:
        return family + ordinal.to_bytes(8, "big")
    part = owner + ordinal.to_bytes(8, "big") + family
    return part if chunk is None else part + chunk.to_bytes(4, "big")


def irregular_key(outcome_id: UUID) -> bytes:
    """The key of an irregular outcome's row."""
    return IRREGULAR + outcome_id.bytes


def header(state: State, failures: int, sessions: int,
           demoted: Iterable[tuple[str, str, str, str]] = ()) -> bytes:
    """The header row's value: how many failures and sessions have ordinals, what was demoted."""
    return _encode(Header(state.position, state.epoch, state.erased_at, state.adoptions,
                          state.observed, LAYOUT, failures, sessions, sorted(demoted)))


def _joined(decoder: msgspec.msgpack.Decoder[list[T]],
            rows: Iterable[tuple[bytes, bytes]]) -> list[T]:
    """One list from chunk rows in key order, each row's value a piece of it."""
    found: list[T] = []
    for _, value in rows:
        found.extend(decoder.decode(value))
    return found


def moves_of(rows: Iterable[tuple[bytes, bytes]]) -> list[Move]:
    """A lesson's moves, from its chunk rows in key order.

    Their types and notes (mostly a project's digest) are one string each for all
    moves, not a string a move: a long-lived lesson holds thousands of moves, and those
    strings were a third of their memory.
    """
    kinds: dict[str, str] = {}
    return [Move(m.position, kinds.setdefault(m.type, m.type), m.confidence, m.outcome,
                 sys.intern(m.note)) for m in _joined(_moves, rows)]


def ids_of(rows: Iterable[tuple[bytes, bytes]], moves: Iterable[Move] = ()) -> list[UUID]:
    """A lesson's evidence, from its chunk rows in key order.

    Each id a move cites is that move's id object, not one more copy of it: nearly every
    piece of evidence is an outcome that confirmed the lesson, a move of its own.
    """
    ids = _joined(_ids, rows)
    # By the ids' ints: hashed in C, where a UUID's own hash is a Python call.
    same = {move.outcome.int: move.outcome for move in moves if move.outcome is not None}
    return [same.get(i.int, i) for i in ids] if same else ids


def read_header(value: bytes) -> Header:
    """The header row's value read."""
    return _header.decode(value)


def failure_row_key(name: str) -> bytes:
    """The key of the row of the failures under ``name`` (``project|op|target``)."""
    return FAILURE_BY_KEY + name.encode()


def failure_of(value: bytes) -> tuple[int, Failure]:
    """A failure row's value read: its ordinal and the failures."""
    return _numbered_failure.decode(value)


def session_row_key(name: str) -> bytes:
    """The key of the row of session ``name``'s ordinal."""
    return SESSION_BY_NAME + name.encode()


def session_of(value: bytes) -> int:
    """A session row's value read: its ordinal."""
    return _ordinal.decode(value)


def recalled_of(rows: Iterable[tuple[bytes, bytes]]) -> list[str]:
    """The lessons recalled in a session, from its chunk rows in key order."""
    return _joined(_texts, rows)


def lesson(row: LessonRow) -> bytes:
    """A lesson row's value: the lesson without what has rows of its own."""
    return _encode(msgspec.structs.replace(row, moves=[], evidence=[], last_used_at=0,
                                           in_play_epoch=0))


def usage(row: LessonRow) -> bytes:
    """A lesson's usage row's value."""
    return _encode((row.last_used_at, row.in_play_epoch))


def outcome(row: OutcomeRow) -> bytes:
    """An outcome row's value."""
    return _encode(row)


def failure(ordinal: int, row: Failure) -> bytes:
    """A failure row's value, with its ordinal (its place in the view's dict)."""
    return _encode((ordinal, row))


def session(ordinal: int) -> bytes:
    """A session row's value: its ordinal."""
    return _encode(ordinal)


def chunk_rows(family: bytes, ordinal: int, items: list[Any], saved: int,
               ) -> Iterator[tuple[bytes, bytes | None]]:
    """The chunk rows of a list that held ``saved`` items when last saved.

    A list only grows, so only its last saved chunk and the ones after it change; a list
    shorter than it was (its lesson proposed afresh) has its extra chunks removed.
    """
    if saved == len(items):
        return
    first = saved // CHUNK if saved < len(items) else 0
    for chunk in range(first, -(-len(items) // CHUNK)):
        yield key(family, ordinal, chunk), _encode(items[chunk * CHUNK:(chunk + 1) * CHUNK])
    for chunk in range(-(-len(items) // CHUNK), -(-saved // CHUNK)):
        yield key(family, ordinal, chunk), None


def state_rows(state: State, irregular: Mapping[UUID, OutcomeRow],
               demoted: Iterable[tuple[str, str, str, str]] = (),
               ) -> Iterator[tuple[bytes, bytes]]:
    """Every row of ``state`` and of its ``irregular`` outcomes (each list's chunks in order)."""
    yield HEADER, header(state, len(state.failures), len(state.recalled), demoted)
    for n, row in enumerate(state.lessons.values()):
        yield key(LESSON, n), lesson(row)
    for n, row in enumerate(state.lessons.values()):
        for k, v in chunk_rows(MOVES, n, row.moves, 0):
            assert v is not None
            yield k, v
    for n, row in enumerate(state.lessons.values()):
        for k, v in chunk_rows(EVIDENCE, n, row.evidence, 0):
            assert v is not None
            yield k, v
    for outcome_id, out in irregular.items():
        yield irregular_key(outcome_id), outcome(out)
    for n, (name, fail) in enumerate(state.failures.items()):
        yield failure_row_key(name), failure(n, fail)
    for n, name in enumerate(state.recalled):
        yield session_row_key(name), session(n)
    for n, ids in enumerate(state.recalled.values()):
        for k, v in chunk_rows(RECALLED, n, ids, 0):
            assert v is not None
            yield k, v
    for n, row in enumerate(state.lessons.values()):
        yield key(USAGE, n), usage(row)


def state_from_rows(rows: Iterable[tuple[bytes, bytes]],
                    ) -> tuple[State, list[OutcomeRow]]:
    """The state :func:`state_rows` (and saves of what changed since) wrote; irregular outcomes.

    Outcomes saved as ``o`` rows (before outcomes were read from the log) are in the
    state's ``outcomes``.
    """
    state = State()
    irregular: list[OutcomeRow] = []
    lessons: dict[int, LessonRow] = {}
    moves: dict[int, list[Move]] = {}
    evidence: dict[int, list[UUID]] = {}
    used: dict[int, tuple[int, int]] = {}
    outcomes: list[OutcomeRow] = []
    names: dict[int, str] = {}
    recalled: dict[int, list[str]] = {}
    failures: dict[int, tuple[str, Failure]] = {}
    for k, value in rows:
        if k[:1] == IRREGULAR:
            irregular.append(_outcome.decode(value))
            continue
        if k[:1] == FAILURE_BY_KEY:
            n, fail = failure_of(value)
            failures[n] = (k[1:].decode(), fail)
            continue
        if k[:1] == SESSION_BY_NAME:
            names[session_of(value)] = k[1:].decode()
            continue
        family, n = k[9:10] or k[:1], int.from_bytes(k[1:9], "big")
        if family == HEADER:
            head = _header.decode(value)
            state.position, state.epoch, state.erased_at = (head.position, head.epoch,
                                                            head.erased_at)
            state.adoptions, state.observed = head.adoptions, head.observed
        elif family == LESSON:
            lessons[n] = _sharing(_lesson.decode(value))
        elif family in (USAGE, USAGE_BY_LESSON):  # layout 3's, or under the lesson
            used[n] = _usage.decode(value)
        elif family == MOVES:
            moves.setdefault(n, []).extend(_moves.decode(value))
        elif family == EVIDENCE:
            evidence.setdefault(n, []).extend(_ids.decode(value))
        elif family == OUTCOME:
            outcomes.append(_outcome.decode(value))
        elif family == FAILURE:
            failures[n] = _failure.decode(value)
        elif family == SESSION:
            names[n] = _text.decode(value)
        elif family == RECALLED:
            recalled.setdefault(n, []).extend(_texts.decode(value))
    for n in sorted(lessons):
        row = lessons[n]
        row.moves, row.evidence = moves.get(n, []), evidence.get(n, [])
        row.last_used_at, row.in_play_epoch = used.get(n, (0, 0))
        state.lessons[row.lesson_id] = row
    state.failures = {failures[n][0]: failures[n][1] for n in sorted(failures)}
    state.outcomes = {o.outcome_id: o for o in outcomes}
    state.recalled = {names[n]: recalled.get(n, []) for n in sorted(names)}
    return state, irregular
