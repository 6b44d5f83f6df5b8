"""The lesson view: status, confidence, clocks, evidence and history of every lesson.

A fold over the log and nothing else: it reads events in position order and never
decides (the policies in ``commands`` decide, and write what they decide as events).
So the view rebuilt from position 0 equals the view kept incrementally, and every figure
it holds is explained by the moves it lists.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import ClassVar, Union, cast
from uuid import UUID

import msgspec
from lessonledger.ledger.events import (
    ENVIRONMENT_CHANGED,
    LESSON_CONFIRMED,
    LESSON_CONTRADICTED,
    LESSON_DEMOTED,
    LESSON_PROMOTED,
    LESSON_PROPOSED,
    LESSON_SUPERSEDED,
    RECONCILE_PASSED,
    AnyEvent,
    EnvironmentChanged,
    Erased,
    LessonConfirmed,
    LessonContradicted,
    LessonDemoted,
    LessonPromoted,
    LessonProposed,
    LessonRecalled,
    LessonSuperseded,
    OutcomeObserved,
    ReconcilePassed,
    RulesAdopted,
    tag_of,
)
from lessonledger.ledger.log import Record
from lessonledger.projections import lesson_rows_store as saved_rows
from lessonledger.projections.lesson_rows import (
    ACTIVE,
    Adoption,
    Failure,
    LessonRow,
    Move,
    OutcomeRow,
    State,
    Status,
    failure_key,
    grown,
    state_decoder,
    state_encoder,
)
from lessonledger.projections.outcome_table import OutcomeLog, OutcomeTable
from lessonledger.projections.rules import RULES_VERSION, Rules, clamp, rules_from
from lessonledger.projections.state_view import TypedFold
from lessonledger.projections.store import PinnedRows

__all__ = [
    "ACTIVE",
    "FOLDED",
    "Failure",
    "LessonRow",
    "LessonView",
    "Move",
    "OutcomeRow",
    "Status",
    "failure_key",
    "strongest_first",
]


class _Recalled(msgspec.Struct, frozen=True, tag=tag_of(LessonRecalled), tag_field="type"):
    """What the fold reads of a ``LessonRecalled``: its lesson ids, as their text.

    Recalls are the most frequent event and list up to a thousand lessons each; reading
    the ids as strings (the form they are stored in, which the writer made from UUIDs)
    skips making a UUID of each, and the other fields are skipped unread.
    """

    lesson_ids: list[str]


#: The events the lesson view folds; any other record is passed over without decoding.
_CLASSES = (OutcomeObserved, LessonProposed, LessonConfirmed, LessonContradicted,
            LessonPromoted, LessonDemoted, LessonSuperseded, ReconcilePassed, RulesAdopted,
            EnvironmentChanged, Erased)
FOLDED: frozenset[str] = frozenset({tag_of(LessonRecalled), *(tag_of(c) for c in _CLASSES)})
_RECALLED = tag_of(LessonRecalled)
#: A typed decoder for the events folded here (their catalogue types) and no other.
_decoder: msgspec.msgpack.Decoder[AnyEvent] = msgspec.msgpack.Decoder(
    Union[_CLASSES])  # noqa: UP007
_recalled = msgspec.msgpack.Decoder(_Recalled)
#: An operation's place in its task, what an outcome's operations are folded in order of.
_ORDER = attrgetter("order")
#: Sessions whose recalled lessons are kept as a set too (an agent's session is short).
_RECENT_SESSIONS = 256


def strongest_first(row: LessonRow) -> tuple[float, int, int]:
    """The order :meth:`LessonView.active_for` lists lessons in, as a sort key."""
    # By the id's int: the same order as by its text, without formatting 400 UUIDs.
    return (-row.confidence, -row.last_evidence_at, row.lesson_id.int)


class LessonView(TypedFold[State]):
    """Folds lesson and outcome events into rows; queries read the rows."""

    def __init__(self, rules: Rules | None = None) -> None:
        #: The rules whoever holds this view wants in force (None: whatever the log says).
        self.wanted = rules
        #: The rules in force at the position folded: the last adopted, else the defaults.
        self.rules = Rules()
        self._s = State()
        #: Lessons whose rows changed since the owner last looked (not saved): what a
        #: vector index must re-check to stay equal to the active set.
        self.changed: set[UUID] = set()
        # Active lesson ids by scope, so a query touches one project, not every lesson.
        self._by_scope: dict[str, set[UUID]] = {}
        self._by_same: dict[tuple[str, str, str, str], set[UUID]] = {}
        self._listed: dict[UUID, tuple[str, tuple[str, str, str, str]]] = {}
        #: Lessons an outcome can confirm or contradict (active, or claims) by scope and
        #: target: attribution reads the few on an outcome's targets, not every lesson.
        self._by_target: dict[tuple[str, str], set[UUID]] = {}
        self._targeted: dict[UUID, tuple[str, str]] = {}
        #: How many active lessons of a scope are bound to each value of a fingerprint
        #: component, and what each is bound under: an outcome asks whether its
        #: fingerprint differs from any (``bound_otherwise``) without walking them all.
        self._bound: dict[tuple[str, str], dict[str, int]] = {}
        self._binding: dict[UUID, tuple[str, tuple[tuple[str, str], ...]]] = {}
        #: By lesson, the lessons superseded as ``replaced`` by it (a merge, an edit):
        #: whoever was shown one of them acted on it (see :meth:`replacing`).
        self._replaced: dict[UUID, set[UUID]] = {}
        self._retired: set[UUID] = set()
        #: By session, the lessons recalled in it, as numbers into ``_id_texts``: four
        #: bytes an entry, where the ids' text took about ninety (a big home recalls
        #: millions). The saved state and the dump spell them out (:meth:`_state`).
        self._recalled: dict[str, array[int]] = {}
        self._id_texts: list[str] = []
        self._id_uuids: list[UUID] = []  # the same ids, made once: policies read them
        self._id_numbers: dict[str, int] = {}
        #: The recalled lessons of recent sessions as a set (a recall's check is then
        #: done in C); made again from ``_recalled`` when a session comes back.
        self._recalled_sets: dict[str, set[str]] = {}
        #: The outcomes folded: all in memory, or the last ones and the log's
        #: (:mod:`.outcome_table`); never saved with the view but for irregular ones.
        self._outcomes = OutcomeTable()
        self._rows_by_text: dict[str, LessonRow] = {}
        #: Usage clocks recalls set and no row holds yet, by lesson id (text): (when, in
        #: play at epoch), the last recall's. Rows get them before anything reads them
        #: (:meth:`_settle`), so a long fold writes each lesson's clocks once, not once
        #: per recall that listed it.
        self._usage: dict[str, tuple[int, int]] = {}
        #: Beside each lesson's evidence, its ids' bytes end to end, for the check that an
        #: outcome is not cited twice: a set of the ids took some 100 bytes an id (its
        #: table), these take 16, and the search is done in C (:func:`_cites`).
        self._evidence_bytes: dict[UUID, bytearray] = {}
        #: A set beside each lesson's ``sessions`` list, with the list it was made from:
        #: a long-lived lesson counts hundreds of sessions, and a confirmation asks
        #: whether its own is one of them.
        self._session_sets: dict[UUID, tuple[list[str], set[str]]] = {}
        #: What demoted lessons said (``same_as``): known not to hold in every project.
        self._demoted: set[tuple[str, str, str, str]] = set()
        self._generations: dict[str, int] = {}
        # -- saving as rows (projections/lesson_rows_store.py) --
        #: Every row must be written afresh at the next save (a fresh view, one loaded
        #: from a whole dump, one whose dicts took an item in an old place); while True
        #: nothing below is tracked, so a rebuild pays nothing for it.
        self._full = True
        #: Ordinals: each item's place in its dict, the order it was first folded in.
        self._lesson_n: dict[UUID, int] = {}
        self._failure_n: dict[str, int] = {}
        self._session_n: dict[str, int] = {}
        #: Rows changed since the last save.
        self._dirty_lessons: set[UUID] = set()
        self._dirty_usage: set[UUID] = set()
        self._dirty_failures: set[str] = set()
        self._dirty_sessions: set[str] = set()
        self._new_sessions: list[str] = []
        #: How many items each growing list held when last saved, by (family, ordinal).
        self._saved_len: dict[tuple[bytes, int], int] = {}
        self._saving: dict[tuple[bytes, int], int] = {}
        #: How many failures and sessions have ordinals (saved or not).
        self._nfailures = 0
        self._nsessions = 0
        # -- reading failures and sessions on demand (LessonView.pinned) --
        #: The saved rows of failures and sessions not read yet (None: all in memory).
        self._pin: PinnedRows | None = None
        #: Lessons whose moves and evidence are not read yet, with their ordinals.
        self._bare: dict[UUID, int] = {}
        #: Failures and sessions read and found to have no saved row.
        self._no_failure: set[str] = set()
        self._no_session: set[str] = set()
        #: The position the rows were last saved at (what a newer snapshot must hold).
        self._base = 0
        #: Saved since what was read on demand was last let go (:meth:`_let_go`).
        self._let_go_due = False

    # -- persistence -----------------------------------------------------------------

    @property
    def position(self) -> int:
        """The last log position folded in."""
        return self._s.position

    def dump(self) -> bytes:
        """The whole state as bytes: views folded from the same log dump the same bytes."""
        self._settle()
        return state_encoder.encode(self._state())

    @classmethod
    def load(cls, data: bytes, rules: Rules | None = None) -> LessonView:
        """Restore a view from :meth:`dump`'s bytes (its next save writes every row)."""
        return cls._restored(state_decoder.decode(data), rules)

    @classmethod
    def load_rows(cls, rows: Iterable[tuple[bytes, bytes]], rules: Rules | None = None,
                  log: OutcomeLog | None = None) -> LessonView:
        """Restore a view from the rows :meth:`rows` and :meth:`changes` gave.

        With ``log`` (the home's) outcomes are read from it when asked (see
        :mod:`.outcome_table`); without, the view holds the irregular ones alone.
        """
        rows = list(rows)
        state, irregular = saved_rows.state_from_rows(rows)
        # Rows saved before outcomes were read from the log hold every outcome (``o``
        # rows): they are kept as irregular, and every row is written afresh; so are
        # rows of an older layout (failures and sessions by ordinal).
        head = next((v for k, v in rows if k == saved_rows.HEADER), None)
        legacy = bool(state.outcomes) or (
            head is not None and saved_rows.read_header(head).layout < saved_rows.LAYOUT)
        view = cls._restored(state, rules, log)
        for row in irregular:
            view._outcomes.put(row, regular=False)
        view._full = legacy
        view._base = state.position
        if not legacy:
            view._outcomes.new_irregular.clear()
            view._saved_len = view._lengths()
        return view

    @classmethod
    def pinned(cls, pin: PinnedRows, rules: Rules | None = None,
               log: OutcomeLog | None = None) -> LessonView:
        """A view of the saved rows ``pin`` reads: its lessons now, the rest when needed.

        A big home's failures and recalled sessions are most of its rows, and a query
        reads a few: each is read when a fold or a query first asks for it. Rows of an
        older layout are read whole (:meth:`load_rows`).
        """
        head = pin.get(saved_rows.HEADER)
        if head is None or saved_rows.read_header(head).layout < saved_rows.LAYOUT:
            view = cls.load_rows(pin.under(), rules, log)
            pin.close()
            return view
        header = saved_rows.read_header(head)
        # Each lesson's row and usage clocks, two families of their own, not its moves and
        # evidence (most of its bytes, in a third).
        lessons = [*pin.under(saved_rows.LESSON), *pin.under(saved_rows.USAGE_BY_LESSON)]
        rows = [(saved_rows.HEADER, head), *lessons,
                *pin.under(saved_rows.OUTCOME), *pin.under(saved_rows.IRREGULAR)]
        view = cls.load_rows(rows, rules, log)
        if view._full:  # outcomes saved as rows: read whole, saved afresh
            everything = pin.under()
            pin.close()
            return cls.load_rows(everything, rules, log)
        view._nfailures, view._nsessions = header.failures, header.sessions
        view._demoted = {cast(tuple[str, str, str, str], tuple(d)) for d in header.demoted}
        view._bare = dict(view._lesson_n)
        view._pin = pin
        return view

    def _fill(self, row: LessonRow) -> None:
        """Give a lesson read without them its moves and evidence, from the saved rows."""
        n = self._bare.pop(row.lesson_id, None)
        if n is None or self._pin is None:
            return
        row.moves = saved_rows.moves_of(self._pin.under(saved_rows.key(saved_rows.MOVES, n)))
        row.evidence = saved_rows.ids_of(
            self._pin.under(saved_rows.key(saved_rows.EVIDENCE, n)), row.moves)
        self._saved_len[saved_rows.MOVES, n] = len(row.moves)
        self._saved_len[saved_rows.EVIDENCE, n] = len(row.evidence)

    def _row(self, lesson_id: UUID) -> LessonRow | None:
        """A lesson's row with its moves and evidence (None: no such lesson)."""
        row = self._s.lessons.get(lesson_id)
        if row is not None and self._bare:
            self._fill(row)
        return row

    def brief(self, lesson_id: UUID) -> LessonRow:
        """A lesson's row, whose moves and evidence may not be read yet (empty until then).

        For what reads its status, text and figures alone (the vector index): opening a
        big home reads no lesson's history.
        """
        self._settle()
        return self._s.lessons[lesson_id]

    def _briefs(self) -> Mapping[UUID, LessonRow]:
        self._settle()
        return self._s.lessons

    def briefs(self) -> Iterable[LessonRow]:
        """Every lesson's row, as :meth:`brief` gives it."""
        self._settle()
        return self._s.lessons.values()

    def _failure(self, key: str) -> Failure | None:
        """The failures under ``key``, read from the saved rows the first time."""
        found = self._s.failures.get(key)
        if found is not None or self._pin is None or key in self._no_failure:
            return found
        raw = self._pin.get(saved_rows.failure_row_key(key))
        if raw is None:
            self._no_failure.add(key)
            return None
        n, found = saved_rows.failure_of(raw)
        self._failure_n[key] = n
        self._s.failures[key] = found
        return found

    def _session(self, name: str) -> array[int] | None:
        """The lessons recalled in session ``name``, read from the saved rows the first time."""
        found = self._recalled.get(name)
        if found is not None or self._pin is None or name in self._no_session:
            return found
        raw = self._pin.get(saved_rows.session_row_key(name))
        if raw is None:
            self._no_session.add(name)
            return None
        n = saved_rows.session_of(raw)
        texts = saved_rows.recalled_of(self._pin.under(saved_rows.key(saved_rows.RECALLED, n)))
        self._session_n[name] = n
        self._saved_len[saved_rows.RECALLED, n] = len(texts)
        found = self._recalled[name] = self._numbers(texts)
        return found

    def _everything(self) -> None:
        """Read every failure and session not read yet; let the snapshot go.

        The dicts are then in the order of their ordinals, as a fold from 0 makes them.
        """
        pin = self._pin
        if pin is None:
            return
        for row in self._s.lessons.values():
            if row.lesson_id in self._bare:
                self._fill(row)
        for key, value in pin.under(saved_rows.FAILURE_BY_KEY):
            name = key[1:].decode()
            if name not in self._s.failures:
                self._failure_n[name], self._s.failures[name] = saved_rows.failure_of(value)
        for key, _ in pin.under(saved_rows.SESSION_BY_NAME):
            name = key[1:].decode()
            if name not in self._recalled:
                self._session(name)  # still pinned: read as a query would
        self._pin = None
        pin.close()
        self._no_failure.clear()
        self._no_session.clear()
        order = self._failure_n
        self._s.failures = dict(sorted(self._s.failures.items(), key=lambda i: order[i[0]]))
        ordinal = self._session_n
        self._recalled = dict(sorted(self._recalled.items(), key=lambda i: ordinal[i[0]]))

    def repin(self) -> None:
        """Read from a newer snapshot when the store holds what this view last saved.

        Once it reads the snapshot of its own last save, what it read on demand and has
        not changed since is let go (:meth:`_let_go`).
        """
        if self._pin is not None:
            self._pin.renew(self._base)
            if self._let_go_due and self._pin.position == self._base:
                self._let_go()

    def _let_go(self) -> None:
        """Forget the history, failures and sessions read on demand that are as saved.

        Read on demand and kept, they grew with every lesson, failure and session a
        process ever met (a day's reconcile alone moves most lessons): an agent's memory
        grew with the home. The snapshot now read is the view's own last save, and what
        nothing changed since is in it as held here, so reading it again when next needed
        gives the same (the dump reads everything first, in the order of the ordinals).

        The histories of active lessons are kept: every listing of a project reads those
        of its active lessons and the global ones, so forgetting them had the next
        listing read them all again, at every save, and they only grow: on a home of
        676,000 events that was most of the build's time (a listing 7.5 ms an event,
        profiled), and a process that lists holds them anyway.
        """
        self._let_go_due = False
        self._settle()
        for lesson_id, n in self._lesson_n.items():
            if lesson_id in self._bare or lesson_id in self._dirty_lessons:
                continue
            row = self._s.lessons.get(lesson_id)
            if row is None or row.active:
                continue
            row.moves, row.evidence = [], []
            self._evidence_bytes.pop(lesson_id, None)
            self._bare[lesson_id] = n
        failures = self._s.failures
        for key in [k for k in failures if k not in self._dirty_failures]:
            del failures[key]
        kept = self._dirty_sessions.union(self._new_sessions)
        for name in [k for k in self._recalled if k not in kept]:
            del self._recalled[name]
            self._recalled_sets.pop(name, None)
        self._no_failure.clear()
        self._no_session.clear()

    def unpin(self) -> None:
        """Read every saved row not read yet, and let the snapshot go."""
        self._everything()

    @classmethod
    def started(cls, rules: Rules | None = None, log: OutcomeLog | None = None) -> LessonView:
        """An empty view of a home: outcomes it folds past the last ones are read from ``log``."""
        view = cls(rules)
        view._outcomes = OutcomeTable(log)
        return view

    def rows(self) -> Iterable[tuple[bytes, bytes]]:
        """Every row of the view, in key order (see :mod:`.lesson_rows_store`)."""
        self._settle()
        return saved_rows.state_rows(self._state(outcomes=False), self._outcomes.irregular,
                                     self._demoted)

    def changes(self) -> list[tuple[bytes, bytes | None]] | None:
        """The rows changed since the last :meth:`saved` (None deletes a row).

        None when every row must be written afresh (:meth:`rows`): the view was never
        saved as rows, or an item took an old item's place in a dict.
        """
        self._settle()
        if self._full:
            return None
        s = self._s
        out: list[tuple[bytes, bytes | None]] = [
            (saved_rows.HEADER, saved_rows.header(s, self._nfailures, self._nsessions,
                                                  self._demoted))]
        self._saving = {}
        for lesson_id in self._dirty_lessons:
            row, n = s.lessons[lesson_id], self._lesson_n[lesson_id]
            out.append((saved_rows.key(saved_rows.LESSON, n), saved_rows.lesson(row)))
            if lesson_id in self._bare:
                continue  # its moves and evidence are as saved
            for family, items in ((saved_rows.MOVES, row.moves),
                                  (saved_rows.EVIDENCE, row.evidence)):
                out += saved_rows.chunk_rows(family, n, items,
                                             self._saved_len.get((family, n), 0))
                self._saving[family, n] = len(items)
        for lesson_id in self._dirty_usage:
            n = self._lesson_n[lesson_id]
            out.append((saved_rows.key(saved_rows.USAGE, n),
                        saved_rows.usage(s.lessons[lesson_id])))
        irregular = self._outcomes.irregular
        for outcome_id in self._outcomes.new_irregular:
            outcome = irregular.get(outcome_id)
            out.append((saved_rows.irregular_key(outcome_id),
                        None if outcome is None else saved_rows.outcome(outcome)))
        for name in self._dirty_failures:
            out.append((saved_rows.failure_row_key(name),
                        saved_rows.failure(self._failure_n[name], s.failures[name])))
        for name in self._new_sessions:
            out.append((saved_rows.session_row_key(name),
                        saved_rows.session(self._session_n[name])))
        for name in self._dirty_sessions:
            n = self._session_n[name]
            texts = self._texts(self._recalled[name])
            out += saved_rows.chunk_rows(saved_rows.RECALLED, n, texts,
                                         self._saved_len.get((saved_rows.RECALLED, n), 0))
            self._saving[saved_rows.RECALLED, n] = len(texts)
        return out

    def saved(self) -> None:
        """The rows :meth:`changes` (or :meth:`rows`) gave are stored: track afresh."""
        if self._full:
            self._lesson_n = {i: n for n, i in enumerate(self._s.lessons)}
            self._failure_n = {k: n for n, k in enumerate(self._s.failures)}
            self._session_n = {k: n for n, k in enumerate(self._recalled)}
            self._saved_len = self._lengths()
            self._nfailures, self._nsessions = len(self._failure_n), len(self._session_n)
            self._full = False
        else:
            self._saved_len.update(self._saving)
        self._saving = {}
        self._base = self._s.position
        self._forget_changes()
        self._let_go_due = True

    def _lengths(self) -> dict[tuple[bytes, int], int]:
        # A length left out is 0 (every reader defaults to it): a view restored from a
        # pin holds 50,000 bare rows on a big home, and 100,000 zero entries cost 0.1 s
        # of its open.
        lengths: dict[tuple[bytes, int], int] = {}
        for n, row in enumerate(self._s.lessons.values()):
            if row.moves:
                lengths[saved_rows.MOVES, n] = len(row.moves)
            if row.evidence:
                lengths[saved_rows.EVIDENCE, n] = len(row.evidence)
        for name, ids in self._recalled.items():
            lengths[saved_rows.RECALLED, self._session_n[name]] = len(ids)
        return lengths

    def _redo_all(self) -> None:
        """Every row is written afresh at the next save; stop tracking until then."""
        self._full = True
        self._forget_changes()

    def _forget_changes(self) -> None:
        self._dirty_lessons.clear()
        self._dirty_usage.clear()
        self._outcomes.new_irregular.clear()
        self._dirty_failures.clear()
        self._dirty_sessions.clear()
        self._new_sessions.clear()

    @classmethod
    def _restored(cls, state: State, rules: Rules | None,
                  log: OutcomeLog | None = None) -> LessonView:
        view = cls(rules)
        view._s = state
        view._outcomes = OutcomeTable(log)
        view._outcomes.limit = state.position
        view._lesson_n = {i: n for n, i in enumerate(state.lessons)}
        view._failure_n = {k: n for n, k in enumerate(state.failures)}
        view._session_n = {k: n for n, k in enumerate(state.recalled)}
        view._nfailures, view._nsessions = len(state.failures), len(state.recalled)
        for session, texts in state.recalled.items():
            view._recalled[session] = view._numbers(texts)
        state.recalled = {}
        for outcome in state.outcomes.values():  # the log's own are found there again
            if not view._outcomes.in_log(outcome):
                view._outcomes.put(outcome, regular=False)
        state.outcomes = {}
        if view._s.adoptions:
            view.rules = rules_from(view._s.adoptions[-1].figures)
        for row in view._s.lessons.values():
            view._place(row)
            view._rows_by_text[str(row.lesson_id)] = row
            if row.superseded_by is not None and row.reason == "replaced":
                view._replaced.setdefault(row.superseded_by, set()).add(row.lesson_id)
            # A pin's rows are bare (no moves yet): their demotions come from its header.
            if row.moves and any(move.type == LESSON_DEMOTED for move in row.moves):
                view._demoted.add(row.same_as)
        return view

    # -- queries ----------------------------------------------------------------------

    @property
    def lessons(self) -> Mapping[UUID, LessonRow]:
        """Every lesson ever proposed, by id (each row with its moves and evidence)."""
        self._settle()
        return _Lessons(self)

    def _settle(self) -> None:
        """Give the rows the usage clocks recalls set since the last read."""
        if not self._usage:
            return
        rows, dirty = self._rows_by_text, self._dirty_usage
        for key, (at, epoch) in self._usage.items():
            row = rows.get(key)
            if row is not None:
                row.last_used_at, row.in_play_epoch = at, epoch
                if not self._full:
                    dirty.add(row.lesson_id)
        self._usage.clear()

    @property
    def outcomes(self) -> OutcomeTable:
        """Every observed outcome, by id (a mapping; see :mod:`.outcome_table`)."""
        return self._outcomes

    @property
    def epoch(self) -> int:
        """How many reconcile passes have run."""
        return self._s.epoch

    def active_for(self, project: str, *, history: bool = True,
                   targets: Iterable[str] | None = None) -> list[LessonRow]:
        """Active lessons a project may see: its own and global ones, strongest first.

        Without ``history`` the rows are as :meth:`brief` gives them (for a ranking that
        reads no lesson's moves or evidence). With ``targets``, only those on them.
        """
        self._settle()
        if targets is None:
            ids = [*self._by_scope.get(project, ()), *self._by_scope.get("global", ())]
        else:
            listed = self._listed  # the active ones
            ids = [i for i in self.attributable((project, "global"), targets) if i in listed]
        lessons, bare = self._s.lessons, self._bare
        rows = [lessons[i] for i in ids]
        if history and bare:  # those whose history is not read yet, read now
            for row in rows:
                if row.lesson_id in bare:
                    self._fill(row)
        return sorted(rows, key=strongest_first)

    def attributable(self, scopes: Iterable[str], targets: Iterable[str]) -> list[UUID]:
        """Lessons in these scopes on these targets that are active or claims.

        What an outcome on those targets can confirm or contradict; in no set order.
        """
        index, targets = self._by_target, tuple(targets)
        return [i for scope in scopes for target in targets
                for i in index.get((scope, target), ())]

    def replacing(self, lesson_id: UUID) -> list[UUID]:
        """Lessons superseded as ``replaced`` by this one, in no set order.

        Candidates: one proposed again under its old id since is no longer replaced, so
        a caller checks the row (``superseded_by``, ``reason``) itself.
        """
        return list(self._replaced.get(lesson_id, ()))

    def recalled_place(self, session: str, lesson_id: UUID) -> int | None:
        """Where a lesson is among those recalled in a session (None: not recalled there).

        The same place it has in :meth:`recalled_in`, found without making that list.
        """
        numbers = self._session(session)
        n = self._id_numbers.get(str(lesson_id)) if numbers else None
        if n is None or numbers is None:
            return None
        try:
            return numbers.index(n)
        except ValueError:
            return None

    def to_adopt(self) -> Rules | None:
        """The rules to record as adopted before this holder's next write, if any.

        Those it wants, when they are not the ones in force (or were adopted under
        another version of the rules' logic); nothing when it wants none in particular.
        """
        if self.wanted is None:
            return None
        if not self._s.adoptions:
            return None if self.wanted == Rules() else self.wanted
        last = self._s.adoptions[-1]
        if self.wanted != self.rules or last.version != RULES_VERSION:
            return self.wanted
        return None

    def rules_at(self, position: int) -> Adoption | None:
        """The adoption in force at ``position`` (None: the defaults were)."""
        found = None
        for adoption in self._s.adoptions:
            if adoption.position > position:
                break
            found = adoption
        return found

    @property
    def adoptions(self) -> list[Adoption]:
        """Every adoption of rules folded, oldest first."""
        return self._s.adoptions

    def generation(self, scope: str) -> int:
        """A count that moves whenever a lesson in ``scope`` may have changed.

        Any change to a row that a query reads (text, kind, operations, target, scope,
        status, confidence, evidence clock, and so membership of the active set) moves it;
        usage (recalls, the usage clock, being in play) does not. So whatever a query
        derives from a scope's active rows stays valid while this number stands.
        """
        return self._generations.get(scope, 0)

    def active_like(self, same_as: tuple[str, str, str, str]) -> list[LessonRow]:
        """Active lessons that say the same thing (kind, operations, target), oldest first."""
        return self._oldest_first(self._by_same.get(same_as, ()))

    def demoted(self, same_as: tuple[str, str, str, str]) -> bool:
        """True when a lesson saying this was ever demoted from global.

        Some project contradicted it, so it does not hold everywhere.
        """
        return same_as in self._demoted

    def disagreeing(self, row: LessonRow) -> list[LessonRow]:
        """Active lessons, in any scope, that say the opposite of ``row``, oldest first.

        The opposite: the reverse preference, avoiding what it prefers, or doing what it
        avoids, on the same target.
        """
        t, avoid, prefer = row.target, row.avoid_op, row.prefer_op
        keys = [("prefer", prefer, avoid, t), ("avoid", prefer, "", t), ("do", "", avoid, t)]
        return [r for key in keys for r in self.active_like(key)
                if r.lesson_id != row.lesson_id]

    def retired(self) -> list[LessonRow]:
        """Lessons a person retired, oldest first."""
        return self._oldest_first(self._retired)

    def _oldest_first(self, ids: Iterable[UUID]) -> list[LessonRow]:
        lessons = self.lessons
        rows = [lessons[i] for i in ids]
        return sorted(rows, key=lambda r: r.moves[0].position if r.moves else 0)

    def bound_otherwise(self, scope: str, component: str, value: str) -> bool:
        """True when an active lesson of ``scope`` is bound to another ``component`` value."""
        values = self._bound.get((scope, component), {})
        return len(values) > 1 or (len(values) == 1 and value not in values)

    def _bind(self, row: LessonRow) -> None:
        """Keep :meth:`bound_otherwise`'s counts in step with the row's fingerprint."""
        lesson_id = row.lesson_id
        binding = (row.scope, tuple(row.fingerprint.items())) if row.active else None
        before = self._binding.get(lesson_id)
        if before == binding:
            return
        if before is not None:
            del self._binding[lesson_id]
            for component, value in before[1]:
                values = self._bound[before[0], component]
                values[value] -= 1
                if not values[value]:
                    del values[value]
        if binding is not None and binding[1]:
            self._binding[lesson_id] = binding
            for component, value in binding[1]:
                values = self._bound.setdefault((binding[0], component), {})
                values[value] = values.get(value, 0) + 1

    def _place(self, row: LessonRow) -> None:
        """Keep the derived indexes (by scope, by meaning, retired; not saved) in step."""
        lesson_id = row.lesson_id
        self._bind(row)
        listed = self._listed.get(lesson_id)
        self._touched(row.scope)
        if listed is not None and listed[0] == row.scope and row.active \
                and listed[1] == row.same_as:
            # Listed where it was (so targeted where it was: both are set together, and
            # the target is part of same_as): most moves change a figure, not a listing.
            return
        targeted = (row.scope, row.target) if row.active or row.status == "claimed" else None
        if self._targeted.get(lesson_id) != targeted:
            before = self._targeted.pop(lesson_id, None)
            if before is not None:
                self._by_target[before].discard(lesson_id)
            if targeted is not None:
                self._by_target.setdefault(targeted, set()).add(lesson_id)
                self._targeted[lesson_id] = targeted
        if listed is not None:
            del self._listed[lesson_id]
            self._touched(listed[0])
            self._by_scope[listed[0]].discard(row.lesson_id)
            self._by_same[listed[1]].discard(row.lesson_id)
        if row.active:
            self._by_scope.setdefault(row.scope, set()).add(row.lesson_id)
            self._by_same.setdefault(row.same_as, set()).add(row.lesson_id)
            self._listed[row.lesson_id] = (row.scope, row.same_as)
        if row.status == "retired":
            self._retired.add(row.lesson_id)

    def _touched(self, scope: str) -> None:
        self._generations[scope] = self._generations.get(scope, 0) + 1

    @property
    def erased_at(self) -> int:
        """The position of the last erasure folded in (0: none)."""
        return self._s.erased_at

    @property
    def failures(self) -> Mapping[str, Failure]:
        """Past failures by :func:`failure_key` (project, operation, target)."""
        return _Failures(self)

    def observed(self, project: str) -> dict[str, str]:
        """The last value the project's outcomes reported for each fingerprint component."""
        return self._s.observed.get(project, {})

    def recalled_in(self, session: str) -> list[UUID]:
        """Lessons put in front of an agent in this session."""
        uuids = self._id_uuids
        return [uuids[n] for n in self._session(session) or ()]

    def _texts(self, numbers: Iterable[int]) -> list[str]:
        texts = self._id_texts
        return [texts[n] for n in numbers]

    def _numbers(self, texts: Iterable[str]) -> array[int]:
        texts = list(texts)
        index = self._id_numbers
        # Most ids were recalled before: looked up in one pass in C, then numbered one by
        # one only if some are new (in the order they come, as a loop over all would).
        found = list(map(index.get, texts))
        if None in found:
            known = self._id_texts
            for place, text in enumerate(texts):
                if found[place] is None:
                    n = index.get(text)
                    if n is None:
                        n = index[text] = len(known)
                        known.append(text)
                        self._id_uuids.append(UUID(text))
                    found[place] = n
        return array("L", cast(list[int], found))

    def _state(self, *, outcomes: bool = True) -> State:
        """The state as dumped: recalls spelled out as the ids' text, every outcome."""
        self._everything()
        return msgspec.structs.replace(self._s, recalled={
            session: self._texts(numbers) for session, numbers in self._recalled.items()},
            outcomes=self._outcomes.everything() if outcomes else {})

    # -- the fold ---------------------------------------------------------------------

    #: The types it folds (the runner hands it no other record), whose bodies it reads,
    #: and whose catalogue event it takes from the runner (a recall it decodes itself).
    folds: ClassVar[frozenset[str] | None] = FOLDED
    reads: ClassVar[frozenset[str]] = FOLDED
    decodes: ClassVar[frozenset[str]] = FOLDED - {_RECALLED}

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        envelope = record.envelope
        self._s.position = self._outcomes.limit = envelope.position
        if record.payload is None or envelope.type not in FOLDED:
            return  # an erased body (the erasure's own event says what to forget), or
            # an event no lesson reads: passed over undecoded
        try:
            if envelope.type == _RECALLED:
                # Only this view reads a recall, and its partial decoder is the cheaper.
                self._recall(_recalled.decode(record.payload), envelope.session,
                             envelope.occurred_at)
                return
            if not isinstance(event, _CLASSES):
                event = _decoder.decode(record.payload)  # refused as it always was
        except msgspec.DecodeError:
            return  # not a lesson event (an eventsourcing application's, say)
        if isinstance(event, OutcomeObserved):
            self._outcomes.add(event, envelope)
        self._fold(event, envelope.position, envelope.occurred_at, envelope.session)
        # A lesson's version is the last version on its own stream: what an edit or a
        # retirement must name to change it, so concurrent changes conflict.
        row = self._s.lessons.get(getattr(event, "lesson_id", None))  # type: ignore[arg-type]
        if row is not None:
            self.changed.add(row.lesson_id)
            if not self._full:
                self._dirty_lessons.add(row.lesson_id)
            self._place(row)
            if _on_stream_of(envelope.stream, row.lesson_id):
                row.version = envelope.version
            if isinstance(event, LessonProposed) and event.vector:
                row.vector_at = envelope.position

    def _fold(self, event: AnyEvent, position: int, at: int, session: str) -> None:
        match event:
            case OutcomeObserved():
                for lesson_id in event.in_play:
                    self._touch(lesson_id)
                if event.fingerprint:
                    seen = self._s.observed.setdefault(event.project, {})
                    # Some component unseen or changed (compared in C, pair by pair).
                    if not event.fingerprint.items() <= seen.items():
                        seen.update(event.fingerprint)
                        self._touched(event.project)  # which global lessons hold there
                failures = self._s.failures
                for op in sorted(event.operations, key=_ORDER):
                    key = failure_key(event.project, op.op, op.target)
                    # The dict first: a fold from 0 holds every failure (no call).
                    failure = failures.get(key)
                    if failure is None and self._pin is not None:
                        failure = self._failure(key)
                    if op.ok:
                        if failure is not None:  # it worked: no streak of failures
                            failure.streak = 0
                            failure.streak_session = ""
                            self._dirty_failures.add(key)
                        continue
                    if failure is None:
                        failure = failures[key] = Failure()
                        self._no_failure.discard(key)
                        self._failure_n[key] = self._nfailures
                        self._nfailures += 1
                    self._dirty_failures.add(key)
                    if failure.streak and failure.error == op.error:
                        if failure.streak_session != session:
                            failure.streak += 1
                    else:
                        failure.streak = 1
                    failure.streak_session = session
                    failure.count += 1
                    failure.error, failure.outcome, failure.at = op.error, event.outcome_id, at
            case LessonProposed():
                self._propose(event, position, at)
            case LessonConfirmed():
                self._attribute(event.lesson_id, event.outcome_id, event.project, session,
                                position, at, confirmed=True)
            case LessonContradicted():
                self._attribute(event.lesson_id, event.outcome_id, event.project, session,
                                position, at, confirmed=False, failed=event.failed)
            case LessonSuperseded():
                self._supersede(event, position)
            case LessonPromoted():
                self._promote(event, position)
            case LessonDemoted():
                row = self._row(event.lesson_id)
                if row is not None:
                    row.scope = event.to_scope
                    if row.longevity == "explicit" and event.to_scope != row.origin:
                        # A person said it where it was learned; where only the loop
                        # learned it, it lasts as the loop's lessons do.
                        row.longevity = "ongoing"
                    self._demoted.add(row.same_as)
                    self._move(row, position, LESSON_DEMOTED, event.outcome_id,
                               f"to {event.to_scope}")
            case EnvironmentChanged():
                self._environment(event, position)
            case ReconcilePassed():
                self._reconcile(event, position)
            case Erased():
                self._s.erased_at = position
            case RulesAdopted():
                self._s.adoptions.append(Adoption(position, event.version,
                                                  dict(event.figures)))
                self.rules = rules_from(dict(event.figures))
            case _:
                pass

    def _move(self, row: LessonRow, position: int, kind: str, outcome: UUID | None = None,
              note: str = "") -> None:
        row.moves = grown(row.moves)  # a listing may share it
        # The note is mostly a project's digest: one string for all, not one a move.
        row.moves.append(Move(position, kind, _shown(row.confidence), outcome,
                              sys.intern(note)))

    def _propose(self, event: LessonProposed, position: int, at: int) -> None:
        outcomes = self._outcomes
        found = [(o, outcomes.get(o)) for o in event.evidence]
        cited = [o for o, row in found if row is not None]
        row = LessonRow(
            lesson_id=event.lesson_id, text=event.text, kind=event.kind,
            avoid_op=event.avoid_op, prefer_op=event.prefer_op, target=event.target,
            scope=event.scope, origin=event.scope, source=event.source,
            derivation=event.derivation, longevity=event.longevity,
            fingerprint=dict(event.fingerprint), evidence=list(event.evidence),
            confidence=event.confidence, status="trial" if cited else "claimed",
            created_at=at, supersedes=event.supersedes,
            # The evidence's own time: a lesson made from old evidence (a demoted lesson's
            # copy, an extractor's reading of a past session) is as fresh as it, not as
            # the event that made it. What a person states is a correction, fresh now.
            last_evidence_at=at if event.source == "user" else max(
                (row.at for _, row in found if row is not None), default=at),
            projects=[event.scope] if cited else [], in_play_epoch=self._s.epoch,
            sessions=sorted({row.session for _, row in found if row is not None}),
        )
        edited = self._row(event.supersedes) if event.supersedes is not None else None
        if edited is not None and _is_edit(edited, row):
            # The same lesson reworded: where it was learned and confirmed, and the trust
            # it earned there, are its own still (a global one demotes to its last
            # confirmer; a trusted one is not on trial again for a new wording).
            row.origin, row.projects = edited.origin, list(edited.projects)
            row.recent, row.doubted = list(edited.recent), list(edited.doubted)
            # What it is trusted by: an environment change or clustered contradictions
            # may have cleared them, and the evidence behind them must not bring them back.
            row.sessions = list(edited.sessions)
            row.last_evidence_at = at  # an edit is a human correction
            if edited.status == "trusted":
                row.status = "trusted"
        if not self._full:
            if event.lesson_id in self._s.lessons:
                self._redo_all()  # a new row in the old one's place: rewrite its lists
            else:
                self._lesson_n[event.lesson_id] = len(self._lesson_n)
                self._dirty_usage.add(event.lesson_id)
        self._s.lessons[event.lesson_id] = row
        self._bare.pop(event.lesson_id, None)
        text = str(event.lesson_id)
        self._rows_by_text[text] = row
        self._usage.pop(text, None)  # a recall before this proposal used no such row
        self._evidence_bytes.pop(event.lesson_id, None)  # a re-proposed id starts afresh
        self._move(row, position, LESSON_PROPOSED, cited[0] if cited else None, event.source)

    def _attribute(self, lesson_id: UUID, outcome_id: UUID, project: str, session: str,
                   position: int, at: int, *, confirmed: bool, failed: bool = False) -> None:
        """Credit or blame a lesson on an outcome.

        ``session`` is the event's own; the cited outcome's counts instead when it is known.
        """
        row = self._s.lessons.get(lesson_id)
        if row is not None and self._bare:
            self._fill(row)
        if row is None:
            return
        lesson_id = row.lesson_id  # the key object itself: found by identity from here
        outcome = self._outcomes.get(outcome_id)
        if outcome is not None:
            # The session it was observed in is the one its attribution counts for; and
            # the rows citing it hold its own id object, not one per citing event.
            session, outcome_id = outcome.session, outcome.outcome_id
        # In doubt where what it prefers last failed for good, until it works there again
        # (what it avoids failing there confirms the lesson, but says nothing of that).
        if confirmed and project in row.doubted and _works(outcome, row):
            row.doubted = [p for p in row.doubted if p != project]
        elif failed and project not in row.doubted:
            row.doubted = [*row.doubted, project]
        rules = self.rules
        step = rules.confirm if confirmed else rules.contradict
        row.confidence = clamp(row.confidence + step)
        row.recent = [*row.recent, confirmed][-rules.cluster_window:]
        if confirmed:
            row.last_evidence_at = at
            # The ids' bytes beside the saved list (made again when the list grew
            # elsewhere, as a promotion's merge does): long-lived lessons cite thousands.
            known = self._evidence_bytes.get(lesson_id)
            if known is None or len(known) != 16 * len(row.evidence):
                known = self._evidence_bytes[lesson_id] = bytearray(
                    b"".join(o.bytes for o in row.evidence))
            cited = outcome_id.bytes
            if not _cites(known, cited):
                known += cited
                row.evidence = grown(row.evidence)
                row.evidence.append(outcome_id)
            # Last confirmer last: a global lesson is demoted to it (DESIGN §4). Most
            # confirmations come from the project already last (each is listed once).
            projects = row.projects
            if not projects or projects[-1] != project:
                row.projects = [*(p for p in projects if p != project), project]
            if session:
                kept = self._session_sets.get(lesson_id)
                # Made again when the row's list was replaced or grew elsewhere (a
                # promotion's merge, an erasure's refold).
                if kept is None or kept[0] is not row.sessions \
                        or len(kept[1]) != len(row.sessions):
                    kept = self._session_sets[lesson_id] = (row.sessions, set(row.sessions))
                if session not in kept[1]:
                    kept[1].add(session)
                    row.sessions = grown(row.sessions)  # a copy, if a listing holds it
                    row.sessions.append(session)
                    self._session_sets[lesson_id] = (row.sessions, kept[1])
            if row.status == "claimed":
                row.status = "trial"
            if row.status == "trial" and len(row.sessions) >= rules.trusted_sessions:
                row.status = "trusted"
        elif row.status == "trusted" and row.recent.count(False) >= rules.cluster:
            row.status = "trial"
            row.sessions = []
        kind = LESSON_CONFIRMED if confirmed else LESSON_CONTRADICTED
        self._move(row, position, kind, outcome_id, project)

    def _supersede(self, event: LessonSuperseded, position: int) -> None:
        row = self._row(event.lesson_id)
        # A successor is always proposed before the lesson it replaces is superseded, so
        # an unknown one was erased since: the lesson it would have replaced stays.
        if row is None or (event.by is not None and event.by not in self._s.lessons):
            return
        statuses: dict[str, Status] = {"retired:user": "retired", "expired": "expired"}
        row.status = statuses.get(event.reason, "superseded")
        row.superseded_by = event.by
        row.reason = event.reason
        if event.by is not None and event.reason == "replaced":
            self._replaced.setdefault(event.by, set()).add(event.lesson_id)
            survivor = self._s.lessons[event.by]
            if row.longevity == "explicit" and survivor.longevity != "explicit":
                # A person said it: what absorbed the statement (the lesson on file, a
                # promotion's global one) never expires either, as the statement would
                # not have, and keeps the trust it earned (DESIGN §4 Clocks).
                self._fill(survivor)
                survivor.longevity = "explicit"
                if row.scope != "global":
                    # Where the person said it: a demotion keeps it explicit only there
                    # (a promotion's global lesson came from the loop's project first).
                    survivor.origin = row.scope
                self.changed.add(survivor.lesson_id)
                if not self._full:
                    self._dirty_lessons.add(survivor.lesson_id)
        self._move(row, position, LESSON_SUPERSEDED, None,
                   f"{event.reason}: {event.note}" if event.note else event.reason)

    def _promote(self, event: LessonPromoted, position: int) -> None:
        row = self._row(event.lesson_id)
        if row is None:
            return
        row.scope = "global"
        for project in event.projects:
            if project not in row.projects:
                row.projects = [*row.projects, project]
        for merged_id in event.merged:
            merged = self._row(merged_id)
            if merged is None:
                continue
            row.evidence = [*row.evidence,
                            *(o for o in merged.evidence if o not in row.evidence)]
            row.sessions = [*row.sessions,
                            *(s for s in merged.sessions if s not in row.sessions)]
            row.confidence = max(row.confidence, merged.confidence)
            row.last_evidence_at = max(row.last_evidence_at, merged.last_evidence_at)
        if row.status == "trial" and len(row.sessions) >= self.rules.trusted_sessions:
            row.status = "trusted"
        self._move(row, position, LESSON_PROMOTED, None, ",".join(event.projects))

    def _touch(self, lesson_id: UUID) -> None:
        row = self._s.lessons.get(lesson_id)
        if row is not None:
            used = self._usage.pop(str(lesson_id), None)
            if used is not None:
                row.last_used_at = used[0]
            row.in_play_epoch = self._s.epoch
            if not self._full:
                self._dirty_usage.add(lesson_id)

    def _recall(self, event: _Recalled, session: str, at: int) -> None:
        ids = event.lesson_ids
        seen = self._recalled.get(session)
        if seen is None and self._pin is not None:
            seen = self._session(session)
        if seen is None:
            seen = self._recalled[session] = array("L")
            self._no_session.discard(session)
            self._session_n[session] = self._nsessions
            self._nsessions += 1
            self._new_sessions.append(session)
        before = len(seen)
        # Measured, per-id work was most of a rebuild: the set beside the saved list is
        # checked in C, and the usage clocks wait in one dict (see _settle).
        members = self._recalled_sets.get(session)
        if members is None:
            if len(self._recalled_sets) >= _RECENT_SESSIONS:
                self._recalled_sets.clear()
            members = self._recalled_sets[session] = set(self._texts(seen))
        if not members.issuperset(ids):
            new = ([key for key in dict.fromkeys(ids) if key not in members] if members
                   else list(dict.fromkeys(ids)))
            members.update(new)
            seen.extend(self._numbers(new))
        if len(seen) != before and not self._full:
            self._dirty_sessions.add(session)
        # Pairs straight into the dict: half the cost of a dict.fromkeys merged in.
        self._usage.update(zip(ids, repeat((at, self._s.epoch))))

    def _environment(self, event: EnvironmentChanged, position: int) -> None:
        # A lesson bound to the old value goes back on trial and is bound to the new one:
        # its trust must be earned again there, and declaring the same value again later
        # is no change. The move keeps what it was bound to before.
        for row in self._s.lessons.values():
            bound = row.fingerprint.get(event.component)
            if (row.active or row.status == "claimed") and row.scope == event.scope \
                    and bound is not None and bound != event.new:
                self._fill(row)
                if row.status == "trusted":
                    row.status = "trial"
                self._touched(row.scope)
                self._dirty_lessons.add(row.lesson_id)
                row.sessions = []
                row.fingerprint[event.component] = event.new
                self._bind(row)
                self._move(row, position, ENVIRONMENT_CHANGED, None,
                           f"{event.component}: {bound} -> {event.new}")

    def _reconcile(self, event: ReconcilePassed, position: int) -> None:
        self._settle()  # which lessons were in play this epoch
        epoch, note = self._s.epoch, f"-{event.decay}"
        for row in self._s.lessons.values():
            # In play during this epoch (recalled, listed, or new) means no decay. The
            # status is read in place, not through ``active``: a pass meets every lesson
            # ever proposed.
            if row.status in ACTIVE and row.in_play_epoch < epoch \
                    and row.longevity not in event.exempt:
                self._fill(row)
                self._touched(row.scope)
                if not self._full:
                    self._dirty_lessons.add(row.lesson_id)
                row.confidence = clamp(row.confidence - event.decay)
                self._move(row, position, RECONCILE_PASSED, None, note)
        self._s.epoch += 1


class _Lessons(Mapping[UUID, LessonRow]):
    """A view's lessons by id, each given its moves and evidence when first asked for."""

    __slots__ = ("_view",)

    def __init__(self, view: LessonView) -> None:
        self._view = view

    def __getitem__(self, lesson_id: UUID) -> LessonRow:
        row = self._view._row(lesson_id)
        if row is None:
            raise KeyError(lesson_id)
        return row

    def __contains__(self, lesson_id: object) -> bool:
        return lesson_id in self._view._s.lessons

    def __iter__(self) -> Iterator[UUID]:
        return iter(self._view._s.lessons)

    def __len__(self) -> int:
        return len(self._view._s.lessons)


class _Failures(Mapping[str, Failure]):
    """A view's failures by key, each read from its saved rows when first asked for."""

    __slots__ = ("_view",)

    def __init__(self, view: LessonView) -> None:
        self._view = view

    def __getitem__(self, key: str) -> Failure:
        found = self._view._failure(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        self._view._everything()
        return iter(self._view._s.failures)

    def __len__(self) -> int:
        self._view._everything()
        return len(self._view._s.failures)


def _cites(known: bytearray, cited: bytes) -> bool:
    """True when ``cited`` (an id's 16 bytes) is one of the ids in ``known``."""
    at = known.find(cited)
    while at > 0 and at % 16:  # straddling two ids: look on (astronomically rare)
        at = known.find(cited, at + 1)
    return at != -1


def _shown(confidence: float) -> float:
    """A confidence as a move records it: rounded to 6 places.

    Kept by value, as :func:`~.rules.clamp` is (confidences take few values, and
    round() costs near a microsecond), but for zero: -0.0 rounds to -0.0, and a cache
    keyed by value would answer it with 0.0's rounding.
    """
    return _rounded(confidence) if confidence else round(confidence, 6)


@lru_cache(maxsize=1 << 16)
def _rounded(confidence: float) -> float:
    return round(confidence, 6)


def _is_edit(old: LessonRow, new: LessonRow) -> bool:
    """Whether ``new``, proposed to supersede ``old``, is ``old`` in other words.

    An edit copies every field but the text (``handlers._edit``); a lesson the loop
    proposes in another's place says something else, or the same with another longevity
    and a fresh confidence, and starts afresh.
    """
    return (old.same_as == new.same_as and old.source == new.source
            and old.longevity == new.longevity and old.confidence == new.confidence
            and old.scope == new.scope)


def _works(outcome: OutcomeRow | None, row: LessonRow) -> bool:
    """True when the outcome shows what the lesson prefers working on its target."""
    return outcome is not None and any(
        op.ok and op.op == row.prefer_op and op.target == row.target
        for op in outcome.operations)


def _on_stream_of(stream: bytes, lesson_id: UUID) -> bool:
    """True when the stream key ``stream`` is the lesson's own stream.

    What ``stream_id_of(stream) == lesson_id`` says, without making a UUID of the key
    (a UUID's stream key is tag 1, a 2-byte length, then its 16 bytes).
    """
    return stream[0] == 1 and int.from_bytes(stream[3:19], "big") == lesson_id.int
