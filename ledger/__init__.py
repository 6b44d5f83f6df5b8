"""The ledger: an LMDB event log that is an eventsourcing persistence module.

``PERSISTENCE_MODULE=lessonledger.ledger`` selects :class:`LMDBFactory`, the only
infrastructure factory in this namespace (eventsourcing requires exactly one).
"""

from lessonledger.ledger.envelope import MAX_BODY_BYTES, Envelope, Position
from lessonledger.ledger.errors import (
    BodyTooLargeError,
    HomeBusyError,
    IdempotencyConflictError,
    InvalidEventError,
    LedgerConfigError,
    LedgerCorruptError,
    LessonLedgerError,
    StreamConflictError,
)
from lessonledger.ledger.lmdb_recorders import (
    LMDBAggregateRecorder,
    LMDBApplicationRecorder,
    LMDBFactory,
    LMDBProcessRecorder,
    LMDBTrackingRecorder,
)
from lessonledger.ledger.log import EventLog, NewEvent, Record

__all__ = [
    "MAX_BODY_BYTES",
    "BodyTooLargeError",
    "Envelope",
    "EventLog",
    "HomeBusyError",
    "IdempotencyConflictError",
    "InvalidEventError",
    "LMDBAggregateRecorder",
    "LMDBApplicationRecorder",
    "LMDBFactory",
    "LMDBProcessRecorder",
    "LMDBTrackingRecorder",
    "LedgerConfigError",
    "LedgerCorruptError",
    "LessonLedgerError",
    "NewEvent",
    "Position",
    "Record",
    "StreamConflictError",
]
