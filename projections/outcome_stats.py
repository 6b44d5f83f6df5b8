"""Per-project outcome statistics: how many outcomes, how many passed, what failed where.

A fold over ``OutcomeObserved`` events alone: a project's outcomes and passes, and per
operation on a target how often it was tried and how often it failed, with the last
error. It decodes only the outcome events (a typed decoder for one tag), so it folds a
log of any mix at the speed of a scan. Rebuilt from position 0 it equals the view kept
incrementally; an erasure refolds it (the runner's job), so an erased outcome's figures
go with it.
"""

from __future__ import annotations

import msgspec
from lessonledger.ledger.events import OUTCOME_OBSERVED, OutcomeObserved
from lessonledger.ledger.log import Record

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

    def apply(self, record: Record) -> None:
        """Fold one record in; only an outcome with its body counts."""
        self._s.position = record.envelope.position
        if record.envelope.type != OUTCOME_OBSERVED or record.payload is None:
            return
        try:
            event = _outcome.decode(record.payload)
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
