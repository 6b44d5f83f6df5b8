"""The rows of the lesson view: a lesson, an outcome, past failures, and the saved state.

Plain msgspec Structs, so the whole view is saved and restored as one msgpack value and
two views folded from the same log dump the same bytes. A view holds tens of thousands of
moves, outcomes and failures; they hold only scalars, ids and lists of frozen operations,
so none can be part of a reference cycle, and the cycle collector does not track them
(``gc=False``): the first collection after a rebuild had to traverse each of them.
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn, TypeVar, cast
from uuid import UUID

import msgspec
import msgspec.inspect as mi
from lessonledger.ledger.events import Derivation, LessonKind, Longevity, Operation, Source

__all__ = [
    "ACTIVE",
    "Adoption",
    "Failure",
    "LessonRow",
    "Move",
    "OutcomeRow",
    "Shared",
    "State",
    "Status",
    "failure_key",
    "grown",
    "snapshot",
    "state_decoder",
    "state_encoder",
]


def failure_key(project: str, op: str, target: str) -> str:
    """The key of an operation's failures on a target in a project."""
    return f"{project}|{op}|{target}"

Status = Literal["claimed", "trial", "trusted", "superseded", "retired", "expired"]
#: Statuses that recall and attribution consider.
ACTIVE: frozenset[str] = frozenset({"trial", "trusted"})


class Move(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One event that changed a lesson: where, what, and the confidence after it."""

    position: int
    type: str
    confidence: float
    outcome: UUID | None = None
    note: str = ""


class LessonRow(msgspec.Struct, kw_only=True):
    """A lesson as the log has made it."""

    lesson_id: UUID
    text: str
    #: Typed as the events' literals: besides checking, msgspec then decodes each to the
    #: one string object, not a copy of its own per lesson (a big home has 40,000 rows).
    kind: LessonKind
    avoid_op: str
    prefer_op: str
    target: str
    scope: str
    origin: str
    source: Source
    derivation: Derivation
    longevity: Longevity
    fingerprint: dict[str, str]
    evidence: list[UUID]
    confidence: float
    status: Status
    created_at: int
    last_evidence_at: int
    last_used_at: int = 0
    #: The projects that supported it, the one that confirmed it last at the end.
    projects: list[str] = []
    sessions: list[str] = []
    recent: list[bool] = []
    in_play_epoch: int = 0
    supersedes: UUID | None = None
    superseded_by: UUID | None = None
    reason: str = ""
    version: int = 0
    moves: list[Move] = []
    #: Where the publisher's own vector for this lesson is (its proposal), 0 if none.
    vector_at: int = 0
    #: Projects where what it prefers last failed for a lasting reason (issue 12, rule
    #: 10): there it is in doubt, and vouches for nothing, until it works there again.
    doubted: list[str] = []

    @property
    def active(self) -> bool:
        """True while the lesson is trial or trusted."""
        return self.status in ACTIVE

    @property
    def same_as(self) -> tuple[str, str, str, str]:
        """What makes two lessons the same lesson, wherever learned."""
        return (self.kind, self.avoid_op, self.prefer_op, self.target)


class OutcomeRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An observed outcome, as far as lessons need it."""

    outcome_id: UUID
    project: str
    session: str
    passed: bool
    operations: list[Operation]
    at: int


class Failure(msgspec.Struct, kw_only=True, gc=False):
    """Past failures of one operation on one target in one project."""

    count: int = 0
    error: str = ""
    outcome: UUID | None = None
    at: int = 0
    #: Sessions in a row in which it failed with ``error`` and never worked (rule 12).
    streak: int = 0
    #: The last of them.
    streak_session: str = ""


class Adoption(msgspec.Struct, frozen=True, array_like=True):
    """Rules that came into force at a position (``RulesAdopted``)."""

    position: int
    version: int
    figures: dict[str, Any]


class State(msgspec.Struct, kw_only=True):
    """Everything the view holds, saved with the position it reflects."""

    position: int = 0
    epoch: int = 0
    lessons: dict[UUID, LessonRow] = {}
    outcomes: dict[UUID, OutcomeRow] = {}
    #: By session, the lessons recalled in it (their ids' text, as UUIDs are stored).
    recalled: dict[str, list[str]] = {}
    failures: dict[str, Failure] = {}
    #: The position of the last erasure folded: anything derived before it (a saved
    #: vector index, say) may hold what it erased.
    erased_at: int = 0
    #: Every adoption of rules folded, oldest first (none: the defaults were in force).
    adoptions: list[Adoption] = []
    #: By project, the last value its outcomes reported for each fingerprint component.
    observed: dict[str, dict[str, str]] = {}


state_encoder = msgspec.msgpack.Encoder()
state_decoder = msgspec.msgpack.Decoder(State)


#: A row's list and dict fields.
CONTAINERS = tuple(field.name for field in cast(mi.StructType, mi.type_info(LessonRow)).fields
                    if isinstance(field.type, mi.ListType | mi.DictType))
#: The lists that grow with a lesson's age (hundreds of items on a long-lived lesson).
HISTORY = ("evidence", "sessions", "moves")
#: The lists copies share, as :class:`Shared`, rather than copy: its history, and the
#: short lists the view replaces rather than changes (projects, recent verdicts, doubts).
SHARED = (*HISTORY, "projects", "recent", "doubted")
#: The containers a copy copies (the fingerprint, a dict of a few items).
_COPIED = tuple(name for name in CONTAINERS if name not in SHARED)

T = TypeVar("T")


class Shared(list[T]):
    """A list that a view and the copies it gave out hold alike (history...): read-only.

    Copying every listed lesson's history on every listing cost a big home most of its
    build time (a listing of 200 lessons copied some 100,000 items), and more the older
    the home. So :func:`snapshot` shares these lists, and nobody changes one: a caller
    that tries gets a ``TypeError``, and the view, before it grows a list it shared,
    takes a copy of its own (:func:`grown`). It equals, encodes and iterates as a list.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[type[Shared[T]], tuple[list[T]]]:
        return (Shared, (list(self),))  # pickled and copied whole, not item by item


def _refuse(self: Shared[Any], *args: object, **kwargs: object) -> NoReturn:
    msg = ("a lesson's evidence, sessions and moves are shared with the ledger's view: "
           "read-only; take a list of your own (list(row.moves)) to change one")
    raise TypeError(msg)


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(Shared, _name, _refuse)


def grown(items: list[T]) -> list[T]:
    """``items`` to grow in place: itself, or a copy of its own if copies share it."""
    return list(items) if type(items) is Shared else items


def snapshot(rows: list[LessonRow]) -> list[LessonRow]:
    """Copies of view rows: what a caller holds neither changes under it nor changes the view.

    The items in a row's lists and dicts (ids, strings, frozen moves) never change, so
    copying the containers would be enough; the lists are not even copied but shared,
    read-only (:class:`Shared`), and the view makes itself a new list before it grows
    one (:func:`grown`) or replaces it. So a listing costs the same on a lesson with a
    thousand moves as on a new one.
    """
    copies = []
    for row in rows:
        for name in SHARED:
            items = getattr(row, name)
            if type(items) is not Shared:
                setattr(row, name, Shared(items))  # the same items, now read-only
        copies.append(msgspec.structs.replace(
            row, **{name: getattr(row, name).copy() for name in _COPIED}))
    return copies
