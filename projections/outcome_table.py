"""The outcomes the lesson view has folded: all of them in memory, or the log's.

Outcomes are most of a big lesson view (a 2,000,000-event home holds some 650,000), and
the rules read few of them: the session of the outcome an attribution cites, whether a
cited outcome shows what a lesson prefers working, the project of a lesson's evidence.
An outcome never changes once observed, and the log already holds it: an outcome's
event is the first on its own stream (its id), so the log's stream index finds it in one
lookup. So a view loaded from a home keeps only the outcomes it folded last in memory
and reads any other from the log when asked, and none is saved with the view.

Three things make that exact, whatever the log holds:

- an outcome is found only at or before the position the view has folded (a view
  behind the head, or a proposal citing an outcome observed after it, sees what a fold
  would have seen);
- an outcome not first on a stream of its own id (a raw submission on another stream,
  or an id observed again) is *irregular*: it is kept in memory and saved with the view
  (``x`` rows), and the last observation of an id wins, as in a fold;
- an outcome folded in the write transaction still open is never dropped from memory
  (the log read finds only what is committed), however many one group commit holds.

A view folded from position 0 outside a home (a rebuild, ``--as-of``, the refold at an
erasure, whose log may hold bodies the committed log still shows) keeps every outcome in
memory, as before. Either way the view's dump lists every outcome in the order first
folded: read from the log, it is the same fold restricted to outcomes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol
from uuid import UUID

import msgspec
from lessonledger.ledger.envelope import Envelope, stream_key
from lessonledger.ledger.events import OUTCOME_OBSERVED, Operation, OutcomeObserved
from lessonledger.ledger.log import Record
from lessonledger.projections.lesson_rows import OutcomeRow

__all__ = ["RECENT", "OutcomeLog", "OutcomeTable", "is_regular", "outcome_row"]

#: Outcomes a view reading the log keeps in memory: the ones it folded last. One not yet
#: committed is kept whatever their number (the log read is of what is committed), so a
#: group commit of more outcomes than this holds them all until it commits.
RECENT = 32_768
#: Distinct operations kept once for all the outcomes holding them, at most.
_SHARED = 65_536

_outcome = msgspec.msgpack.Decoder(OutcomeObserved)


class OutcomeLog(Protocol):
    """What the table reads: a log's records by stream, and its records in order."""

    def stream(self, stream: UUID, *, limit: int | None = None) -> list[Record]:
        """The stream's records by version (the first ``limit``)."""
        ...

    def scan(self, start: int = 1, stop: int | None = None) -> Iterator[Record]:
        """Every record from ``start`` to ``stop``, in position order."""
        ...

    def head(self) -> int:
        """The last position committed (what a read of the log can find)."""
        ...


def is_regular(envelope: Envelope, outcome_id: UUID) -> bool:
    """True for an outcome observed first on a stream of its own id (the log finds it)."""
    return envelope.version == 0 and envelope.stream == stream_key(outcome_id)


def outcome_row(event: OutcomeObserved, envelope: Envelope) -> OutcomeRow:
    """The row the lesson view keeps of an outcome."""
    return OutcomeRow(outcome_id=event.outcome_id, project=event.project,
                      session=envelope.session, passed=event.passed,
                      operations=event.operations, at=envelope.occurred_at)


def _decoded(record: Record) -> OutcomeObserved | None:
    if record.envelope.type != OUTCOME_OBSERVED or record.payload is None:
        return None
    try:
        return _outcome.decode(record.payload)
    except msgspec.DecodeError:
        return None  # another writer's body under the tag: no outcome to the view


class OutcomeTable(Mapping[UUID, OutcomeRow]):
    """Outcomes by id, as far as the view has folded.

    Args:
        log: where outcomes not in memory are read; None keeps every outcome in memory.
    """

    def __init__(self, log: OutcomeLog | None = None) -> None:
        self._log = log
        #: Every outcome (no log), or the ones folded last, oldest first.
        self._rows: dict[UUID, OutcomeRow] = {}
        #: Where each of ``_rows`` was folded (0: loaded), when the log is read.
        self._folded_at: dict[UUID, int] = {}
        #: A position the log had committed when last asked: rows at or before it may go.
        self._committed = 0
        #: Outcomes the log's stream index does not find as they stand (see module).
        self.irregular: dict[UUID, OutcomeRow] = {}
        #: Irregular outcomes added since the owner last took them (to save).
        self.new_irregular: set[UUID] = set()
        #: The position folded: no outcome after it is found.
        self.limit = 0
        self._operations: dict[Operation, Operation] = {}
        self._strings: dict[str, str] = {}

    @property
    def reads_log(self) -> bool:
        """True when outcomes not in memory are read from the log."""
        return self._log is not None

    def add(self, event: OutcomeObserved, envelope: Envelope) -> None:
        """An outcome folded at ``envelope``'s position."""
        self._keep(self._kept(event.outcome_id, event.project, envelope.session, event.passed,
                              event.operations, envelope.occurred_at),
                   regular=is_regular(envelope, event.outcome_id), position=envelope.position)

    def put(self, row: OutcomeRow, *, regular: bool, position: int = 0) -> None:
        """Keep ``row``, folded at ``position`` (in its first place if folded before)."""
        self._keep(self._kept(row.outcome_id, row.project, row.session, row.passed,
                              row.operations, row.at), regular=regular, position=position)

    def _keep(self, row: OutcomeRow, *, regular: bool, position: int) -> None:
        outcome_id = row.outcome_id
        if regular:
            if self.irregular and self.irregular.pop(outcome_id, None) is not None:
                self.new_irregular.add(outcome_id)  # its saved row goes (see rows)
        else:
            self.irregular[outcome_id] = row
            self.new_irregular.add(outcome_id)
        rows = self._rows
        if self._log is None:
            rows[outcome_id] = row
            return
        folded_at = self._folded_at
        rows.pop(outcome_id, None)  # the most recent last
        folded_at.pop(outcome_id, None)
        rows[outcome_id] = row
        folded_at[outcome_id] = position
        while len(rows) > RECENT:
            oldest = next(iter(rows))
            if folded_at[oldest] > self._committed:
                self._committed = self._log.head()
                if folded_at[oldest] > self._committed:
                    break  # folded in the write transaction still open: the log lacks it
            del rows[oldest]
            del folded_at[oldest]

    def _kept(self, outcome_id: UUID, project: str, session: str, passed: bool,
              operations: list[Operation], at: int) -> OutcomeRow:
        """A row with each operation, project and session held once for all outcomes.

        Outcomes' operations repeat (the same operation on the same target failing the
        same way), and they are frozen, so one object stands for all that hold it: an
        operation is its own key (equal and hashed by its fields, and, holding only
        scalars, never tracked by the cycle collector, as a tuple of them is).
        """
        shared, texts = self._operations, self._strings
        if len(shared) > _SHARED:
            shared.clear()
            texts.clear()
        return OutcomeRow(
            outcome_id=outcome_id, project=texts.setdefault(project, project),
            session=texts.setdefault(session, session), passed=passed,
            operations=list(map(shared.setdefault, operations, operations)), at=at)

    # -- the mapping --------------------------------------------------------------------

    def get(self, key: object, default: OutcomeRow | None = None) -> OutcomeRow | None:  # type: ignore[override]
        """The outcome with id ``key`` folded so far, else ``default``."""
        if not isinstance(key, UUID):
            return default
        irregular = self.irregular  # mostly empty, and a UUID's hash is Python code
        found = irregular.get(key) if irregular else None
        if found is None:
            found = self._rows.get(key)
        if found is None and self._log is not None:
            found = self._read(key)
        return default if found is None else found

    def _read(self, outcome_id: UUID) -> OutcomeRow | None:
        assert self._log is not None
        records = self._log.stream(outcome_id, limit=1)
        if not records:
            return None
        record = records[0]
        envelope = record.envelope
        if envelope.position > self.limit or envelope.version != 0:
            return None
        event = _decoded(record)
        if event is None or event.outcome_id != outcome_id:
            return None
        return outcome_row(event, envelope)

    def in_log(self, row: OutcomeRow) -> bool:
        """True when the log finds ``row`` as it stands (it need not be kept as irregular)."""
        return self._log is not None and self._read(row.outcome_id) == row

    def __getitem__(self, key: UUID) -> OutcomeRow:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def everything(self) -> dict[UUID, OutcomeRow]:
        """Every outcome folded, in the order first folded (read from the log if need be)."""
        if self._log is None:
            return self._rows
        found: dict[UUID, OutcomeRow] = {}
        for record in self._log.scan(1, stop=self.limit):
            event = _decoded(record)
            if event is not None:
                found[event.outcome_id] = outcome_row(event, record.envelope)
        return found

    def __iter__(self) -> Iterator[UUID]:
        return iter(self.everything())

    def __len__(self) -> int:
        return len(self.everything())
