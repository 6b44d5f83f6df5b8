"""Per-project outcome statistics: how many outcomes, how many passed, what failed where.

A fold over ``OutcomeObserved`` events alone: a project's outcomes and passes, and per
operation on a target how often it was tried and how often it failed, with the last
error. It reads only the outcome events (the runner hands it no other), so it folds a log
of any mix at the speed of a scan. Rebuilt from position 0 it equals the view kept
incrementally; an erasure refolds it (the runner's job), so an erased outcome's figures
go with it.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec
from lessonledger.ledger.events import OUTCOME_OBSERVED, AnyEvent, OutcomeObserved
from lessonledger.ledger.log import Record
from lessonledger.projections.body import shared_event

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


_outcome = msgspec.msgpack.Decoder(OutcomeObserved)
_FOLDS = frozenset({OUTCOME_OBSERVED})
_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(_State)


class OutcomeStats:
    """The view: :class:`ProjectStats` by project digest."""

    def __init__(self) -> None:
        self._s = _State()

    @property
    def position(self) -> int:
        """The last log position folded in."""
        return self._s.position

    def project(self, project: str) -> ProjectStats:
        """A project's statistics (empty when it has no outcome)."""
        return self._s.projects.get(project) or ProjectStats()

    #: The types it folds (the runner hands it no other record) and whose bodies it reads.
    folds: ClassVar[frozenset[str] | None] = _FOLDS
    reads: ClassVar[frozenset[str]] = _FOLDS
    decodes: ClassVar[frozenset[str]] = _FOLDS

    def apply(self, record: Record) -> None:
        """Fold one record in; only an outcome with its body counts."""
        self.fold(record, shared_event(record.payload)
                  if record.envelope.type in self.decodes else None)

    def skip_to(self, position: int) -> None:
        """Move the position over records that are not outcomes."""
        self._s.position = position

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
        stats = self._s.projects.setdefault(event.project, ProjectStats())
        stats.outcomes += 1
        stats.passed += event.passed
        for op in event.operations:
            entry = stats.operations.setdefault(f"{op.op} {op.target}", OperationStats())
            entry.tried += 1
            if not op.ok:
                entry.failed += 1
                entry.last_error = op.error

    def dump(self) -> bytes:
        """The whole state as bytes; views folded from the same log dump the same."""
        return _encoder.encode(self._s)

    @classmethod
    def load(cls, data: bytes) -> OutcomeStats:
        """A view from :meth:`dump`'s bytes."""
        view = cls()
        view._s = _decoder.decode(data)
        return view
