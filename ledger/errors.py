"""Errors raised by the ledger: one root, facts as attributes, messages that say what to do.

Persistence failures subclass eventsourcing's PEP 249 family so that code written
against eventsourcing catches them unchanged.
"""

from __future__ import annotations

from eventsourcing.persistence import (
    DataError,
    IntegrityError,
    InternalError,
    OperationalError,
    ProgrammingError,
)

__all__ = [
    "BodyTooLargeError",
    "CredentialEventError",
    "HomeBusyError",
    "IdempotencyConflictError",
    "InvalidEventError",
    "LedgerClosedError",
    "LedgerConfigError",
    "LedgerCorruptError",
    "LedgerStorageError",
    "LessonLedgerError",
    "ReplayMismatchError",
    "StreamConflictError",
]


class LessonLedgerError(Exception):
    """Root of every error lessonledger raises on purpose."""


class LedgerConfigError(LessonLedgerError, ProgrammingError):
    """A ledger setting is missing or malformed."""


class LedgerClosedError(LessonLedgerError, ProgrammingError):
    """The ledger (or reader) was closed; nothing was read or written.

    Attributes:
        home: the home it had open.
    """

    def __init__(self, home: str) -> None:
        super().__init__(f"this ledger of {home!r} is closed; nothing was read or written: "
                         "open the home again (open_ledger) to use it")
        self.home = home


class HomeBusyError(LedgerConfigError):
    """The home is open somewhere, so it cannot be compacted now; nothing was changed.

    Attributes:
        path: the home's directory.
    """

    def __init__(self, path: str) -> None:
        msg = (
            f"ledger home {path} is open in another process (or this one); "
            "stop the agents using it, then run `lessonledger compact`"
        )
        super().__init__(msg)
        self.path = path


class InvalidEventError(LessonLedgerError, DataError, ValueError):
    """An event submitted to the ledger is malformed; nothing was written.

    Attributes:
        field: the JSON path of the offending field (``$.event.text``), or ``$`` when
            the problem is the whole input.
    """

    def __init__(self, message: str, field: str = "$") -> None:
        super().__init__(message)
        self.field = field


class BodyTooLargeError(InvalidEventError):
    """An event body exceeds the documented size limit; nothing was written."""

    def __init__(self, size: int, limit: int, field: str = "$") -> None:
        msg = (
            f"event body is {size} bytes, over the limit of {limit} bytes at {field}; "
            "store large content elsewhere and cite it by digest"
        )
        super().__init__(msg, field)
        self.size = size
        self.limit = limit


class CredentialEventError(InvalidEventError):
    """A field looks like a credential, and the ledger keeps what it is given; nothing was written.

    Attributes:
        pattern: the kind of credential it looks like (a detect-secrets secret type).
        field: the JSON path of the field (``$.principal``, ``$.event.text``).
    """

    def __init__(self, pattern: str, field: str) -> None:
        msg = f"{field} looks like a credential ({pattern}); remove the secret and resubmit"
        super().__init__(msg, field)
        self.pattern = pattern


class StreamConflictError(LessonLedgerError, IntegrityError):
    """A stream version was already taken: the writer acted on a stale view.

    Nothing of the batch was written. Re-read the stream and decide again.
    """

    def __init__(self, stream: object, version: int) -> None:
        msg = (
            f"stream {stream} already has version {version}; "
            "another writer got there first: re-read the stream and retry"
        )
        super().__init__(msg)
        self.stream = stream
        self.version = version


class IdempotencyConflictError(LessonLedgerError, IntegrityError):
    """An event id was reused for a different event; nothing of the batch was written."""

    def __init__(self, event_id: bytes, position: int) -> None:
        msg = (
            f"event id {event_id.hex()} was already used at position {position} for a "
            "different stream, version or type; use a fresh id for a new event"
        )
        super().__init__(msg)
        self.event_id = event_id
        self.position = position


class ReplayMismatchError(InvalidEventError):
    """A stored event given to be replayed verbatim does not fit the log; nothing was written.

    Its position is not the next one, its chain link does not follow from the one
    before, its body does not match the envelope's commitment, or its id or stream
    version is taken: the copy was damaged or edited.

    Attributes:
        position: the position the event claims.
        detail: what does not fit.
    """

    def __init__(self, position: int, detail: str) -> None:
        msg = (f"stored event at position {position} does not fit the log: {detail}; "
               "nothing was written: take the copy again from a sound source")
        super().__init__(msg, f"$[{position}]")
        self.position = position
        self.detail = detail


class LedgerCorruptError(LessonLedgerError, InternalError):
    """The log's stored state is inconsistent; nothing of the append was written.

    Attributes:
        position: where the log's stored entries disagree with each other.
    """

    def __init__(self, position: int) -> None:
        msg = (
            f"the log is inconsistent at position {position}; nothing was written: "
            "run `lessonledger verify` and restore from a copy"
        )
        super().__init__(msg)
        self.position = position


class LedgerStorageError(LessonLedgerError, OperationalError):
    """The store failed under a write (disk full, map full, I/O error); nothing committed.

    Attributes:
        cause: LMDB's own message.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(f"the store failed: {cause}; nothing of the failed write was "
                         "committed: free disk space or check the home, then retry")
        self.cause = cause
