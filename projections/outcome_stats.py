"""Per-project outcome statistics: how many outcomes, how many passed, what failed where.

A fold over ``OutcomeObserved`` events alone: a project's outcomes and passes, and per
operation on a target how often it was tried and how often it failed, with the last
error. It reads only the outcome events (the runner hands it no other), so it folds a log
of any mix at the speed of a scan. Rebuilt from position 0 it equals the view kept
incrementally; an erasure refolds it (the runner's job), so an erased outcome's figures
go with it.

It is saved as rows (see :class:`~lessonledger.projections.runner.RowProjection`): a
header with the position, a row per project (its outcomes and passes) and one per
operation on a target in it, under the project's, so a project's rows sort together and
a save writes only the rows its outcomes changed, in the command's transaction.

Loaded from a home, it reads what it is asked for: a query a project's rows, a fold the
project's row and those of the operations the outcome names. Once its own save is what
it reads, it forgets the rows that have not changed since (read again when next needed):
most operations of a big home are tried once (one-off noise), and holding every one a
fold ever read made an agent's memory grow with the home.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

import msgspec
from lessonledger.ledger.events import OUTCOME_OBSERVED, AnyEvent, OutcomeObserved
from lessonledger.ledger.log import Record
from lessonledger.projections.state_view import TypedFold
from lessonledger.projections.store import PinnedRows

__all__ = ["OperationStats", "OutcomeStats", "ProjectStats"]


class OperationStats(msgspec.Struct, kw_only=True):
    """One operation on one target in one project."""

    tried: int = 0
    failed: int = 0
    last_error: str = ""


class ProjectStats(msgspec.Struct, kw_only=True):
    """One project's outcomes.

    Attributes:
        outcomes: how many were observed.
        passed: how many of them passed.
        operations: by ``"operation target"`` (one space between), what was tried.
    """

    outcomes: int = 0
    passed: int = 0
    operations: dict[str, OperationStats] = {}

    @property
    def pass_rate(self) -> float:
        """The share of outcomes that passed (0 when there are none)."""
        return self.passed / self.outcomes if self.outcomes else 0.0


class _State(msgspec.Struct, kw_only=True):
    position: int = 0
    projects: dict[str, ProjectStats] = {}


_HEADER, _PROJECT, _OPERATION = b"h", b"p", b"o"
_row_encoder = msgspec.msgpack.Encoder()
_counts = msgspec.msgpack.Decoder(tuple[int, int])
_operation = msgspec.msgpack.Decoder(tuple[int, int, str])
_outcome = msgspec.msgpack.Decoder(OutcomeObserved)
_FOLDS = frozenset({OUTCOME_OBSERVED})
_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(_State)


class OutcomeStats(TypedFold[_State]):
    """The view: :class:`ProjectStats` by project digest."""

    def __init__(self) -> None:
        self._s = _State()
        #: Every row is written afresh at the next save (nothing tracked until then).
        self._full = True
        #: Rows changed since the last save: (project, "operation target" or "").
        self._dirty: set[tuple[str, str]] = set()
        #: The saved rows of projects not read yet (None: every project is in memory).
        #: A project is read whole when first asked for or folded; one with no saved
        #: rows is then known absent.
        self._pin: PinnedRows | None = None
        self._absent: set[str] = set()
        #: Projects in memory with only some of their operations: the rest are saved.
        self._partial: set[str] = set()
        #: The position the rows were last saved at (what a newer snapshot must hold).
        self._base = 0
        #: Saved since the rows read were last let go (see :meth:`repin`).
        self._let_go_due = False

    @property
    def position(self) -> int:
        """The last log position folded in."""
        return self._s.position

    def project(self, project: str) -> ProjectStats:
        """A project's statistics (empty when it has no outcome)."""
        return self._get(project) or ProjectStats()

    def _get(self, project: str) -> ProjectStats | None:
        """A project's statistics, read from the saved rows the first time; None if none."""
        found = self._s.projects.get(project)
        if self._pin is None or project in self._absent or (
                found is not None and project not in self._partial):
            return found
        rows = self._pin.under(_key(project))
        self._partial.discard(project)
        if not rows:  # none saved: what is held (folded since) is all there is
            if found is None:
                self._absent.add(project)
            return found
        saved = next(iter(dict(_projects(rows)).values()))
        whole = self._s.projects[project] = saved if found is None else _over(saved, found)
        return whole

    def _head(self, project: str) -> ProjectStats | None:
        """As :meth:`_get`, but of a project not in memory only its own row is read."""
        found = self._s.projects.get(project)
        if found is not None or self._pin is None or project in self._absent:
            return found
        raw = self._pin.get(_key(project))
        if raw is None:
            self._absent.add(project)
            return None
        found = self._s.projects[project] = ProjectStats()
        found.outcomes, found.passed = _counts.decode(raw)
        self._partial.add(project)
        return found

    def _operation(self, project: str, stats: ProjectStats, name: str) -> OperationStats:
        """An operation's statistics in ``stats``, read from its saved row if not there."""
        entry = stats.operations.get(name)
        if entry is not None:
            return entry
        raw = None
        if project in self._partial and self._pin is not None:
            raw = self._pin.get(_key(project, name))
        if raw is None:
            entry = stats.operations[name] = OperationStats()
        else:
            tried, failed, error = _operation.decode(raw)
            entry = stats.operations[name] = OperationStats(
                tried=tried, failed=failed, last_error=error)
        return entry

    def _everything(self) -> dict[str, ProjectStats]:
        """Every project, each read from the saved rows unless already in memory."""
        if self._pin is not None:
            known, projects = self._s.projects, {}
            for project, stats in _projects(self._pin.under(_PROJECT)):
                mine = known.get(project)
                projects[project] = stats if mine is None else \
                    _over(stats, mine) if project in self._partial else mine
            # Those folded since and never saved have no rows yet.
            projects.update((p, stats) for p, stats in known.items() if p not in projects)
            self._s.projects = projects
            self._pin.close()
            self._pin = None
            self._absent.clear()
            self._partial.clear()
        return self._s.projects

    def repin(self) -> None:
        """Read from a newer snapshot when the store holds what this view last saved.

        Once that snapshot is this view's own last save, what is as saved there is let
        go: every project but the rows changed since, and those it knew had none.
        """
        if self._pin is None:
            return
        self._pin.renew(self._base)
        if not self._let_go_due or self._pin.position != self._base:
            return
        self._let_go_due = False
        changed: dict[str, set[str]] = {}
        for project, name in self._dirty:
            changed.setdefault(project, set()).add(name)
        projects = self._s.projects
        for project in [p for p in projects if p not in changed]:
            del projects[project]
        for project, names in changed.items():
            operations = projects[project].operations
            for name in [n for n in operations if n not in names]:
                del operations[name]
        self._partial = set(projects)
        self._absent.clear()

    def unpin(self) -> None:
        """Read every saved row not read yet, and let the snapshot go."""
        self._everything()

    #: The types it folds (the runner hands it no other record) and whose bodies it reads.
    folds: ClassVar[frozenset[str] | None] = _FOLDS
    reads: ClassVar[frozenset[str]] = _FOLDS
    decodes: ClassVar[frozenset[str]] = _FOLDS

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        self._s.position = record.envelope.position
        if record.envelope.type != OUTCOME_OBSERVED or record.payload is None:
            return
        if not isinstance(event, OutcomeObserved):
            try:
                event = _outcome.decode(record.payload)  # refused as it always was
            except msgspec.DecodeError:
                return  # another writer's body under our tag: not ours to count
        stats = self._head(event.project)
        if stats is None:
            stats = self._s.projects[event.project] = ProjectStats()
            self._absent.discard(event.project)
        stats.outcomes += 1
        stats.passed += event.passed
        track = not self._full
        if track:
            self._dirty.add((event.project, ""))
        for op in event.operations:
            name = f"{op.op} {op.target}"
            entry = self._operation(event.project, stats, name)
            if track:
                self._dirty.add((event.project, name))
            entry.tried += 1
            if not op.ok:
                entry.failed += 1
                entry.last_error = op.error

    def dump(self) -> bytes:
        """The whole state as bytes; views folded from the same log dump the same."""
        self._everything()
        return _encoder.encode(self._s)

    @classmethod
    def load(cls, data: bytes) -> OutcomeStats:
        """A view from :meth:`dump`'s bytes (its next save writes every row)."""
        view = cls()
        view._s = _decoder.decode(data)
        return view

    # -- saved as rows -------------------------------------------------------------------

    def rows(self) -> Iterator[tuple[bytes, bytes]]:
        """Every row, in key order."""
        yield _HEADER, self._s.position.to_bytes(8, "big")
        projects = self._everything()
        for project in sorted(projects):
            stats = projects[project]
            yield _key(project), _row_encoder.encode((stats.outcomes, stats.passed))
            for name in sorted(stats.operations):
                yield _key(project, name), _op_row(stats.operations[name])

    def changes(self) -> list[tuple[bytes, bytes | None]] | None:
        """The rows changed since the last :meth:`saved`; None: write every row."""
        if self._full:
            return None
        out: list[tuple[bytes, bytes | None]] = [
            (_HEADER, self._s.position.to_bytes(8, "big"))]
        for project, name in sorted(self._dirty):
            stats = self._s.projects[project]
            out.append((_key(project, name), _op_row(stats.operations[name]) if name
                        else _row_encoder.encode((stats.outcomes, stats.passed))))
        return out

    def saved(self) -> None:
        """What :meth:`changes` (or :meth:`rows`) gave is stored: track from here."""
        self._full = False
        self._dirty.clear()
        self._base = self._s.position
        self._let_go_due = self._pin is not None

    @classmethod
    def load_rows(cls, rows: Iterable[tuple[bytes, bytes]]) -> OutcomeStats:
        """A view from the rows :meth:`rows` and :meth:`changes` gave."""
        view = cls()
        rows = list(rows)
        for key, value in rows:
            if key == _HEADER:
                view._s.position = view._base = int.from_bytes(value, "big")
        view._s.projects = dict(_projects(r for r in rows if r[0] != _HEADER))
        view._full = False
        return view

    @classmethod
    def pinned(cls, pin: PinnedRows) -> OutcomeStats:
        """A view of the saved rows ``pin`` reads, each project read when first needed."""
        view = cls()
        view._s.position = view._base = pin.position
        view._pin = pin
        view._full = False
        return view


def _over(saved: ProjectStats, mine: ProjectStats) -> ProjectStats:
    """A project's saved statistics under those held (newer: counts and operations)."""
    saved.outcomes, saved.passed = mine.outcomes, mine.passed
    saved.operations.update(mine.operations)
    return saved


def _projects(rows: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[str, ProjectStats]]:
    """Each project of ``rows`` (in key order: a project's row, then its operations')."""
    project, stats = "", None
    for key, value in rows:
        size = int.from_bytes(key[1:3], "big")
        name, rest = key[3:3 + size].decode(), key[3 + size:]
        if stats is None or name != project:
            if stats is not None:
                yield project, stats
            project, stats = name, ProjectStats()
        if rest:
            tried, failed, error = _operation.decode(value)
            stats.operations[rest[1:].decode()] = OperationStats(
                tried=tried, failed=failed, last_error=error)
        else:
            stats.outcomes, stats.passed = _counts.decode(value)
    if stats is not None:
        yield project, stats


def _key(project: str, operation: str = "") -> bytes:
    """A project's row key, or that of an operation on a target in it (under it)."""
    raw = project.encode()
    key = _PROJECT + len(raw).to_bytes(2, "big") + raw
    return key + _OPERATION + operation.encode() if operation else key


def _op_row(entry: OperationStats) -> bytes:
    return _row_encoder.encode((entry.tried, entry.failed, entry.last_error))
