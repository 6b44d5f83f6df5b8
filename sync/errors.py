"""Errors of sync: typed, naming what failed and what to do."""

from __future__ import annotations

from lessonledger.ledger.errors import LessonLedgerError

__all__ = [
    "DivergedError",
    "NotAReplicaError",
    "ProtocolError",
    "RefusedError",
    "ReplicaMarkerError",
    "SyncError",
    "TamperedObjectError",
    "UnknownSnapshotError",
    "UnreachableError",
]


class SyncError(LessonLedgerError):
    """Root of the errors sync raises."""


class ProtocolError(SyncError):
    """A frame is not a message of the sync protocol (malformed, unknown, oversized)."""


class TamperedObjectError(SyncError):
    """An object arrived that does not hash to its address: refused, nothing written.

    Attributes:
        kind: ``segment``, ``body``, ``chain`` or ``root``.
        address: the hex hash it should have had.
    """

    def __init__(self, kind: str, address: bytes, detail: str) -> None:
        super().__init__(f"refused a tampered {kind} {address.hex()}: {detail}; nothing of it "
                         "was written (run the command again; if it repeats, the path to the "
                         "hub is altering data)")
        self.kind = kind
        self.address = address


class DivergedError(SyncError):
    """This replica's log is not a prefix of the hub's: they cannot be reconciled."""


class RefusedError(SyncError):
    """The hub refused a request; its reason is the message."""


class ReplicaMarkerError(SyncError):
    """A home's ``REPLICA`` file is there but is no replica's marker (cut short or edited).

    Attributes:
        path: the marker file.
    """

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"{path} is damaged ({detail}); it names this replica's hub and name: write it "
            'back as JSON, {"hub": "tcp://HOST:PORT", "name": "NAME"} as `clone` was given '
            "them, or clone the hub into a new directory")
        self.path = path


class UnreachableError(SyncError):
    """The hub did not answer in time."""


class NotAReplicaError(SyncError):
    """The home was not cloned from a hub, so it has nothing to pull from or push to."""


class UnknownSnapshotError(SyncError, KeyError):
    """No snapshot has that name or id."""

    def __init__(self, text: str) -> None:
        super().__init__(f"no snapshot {text!r}; list them with `lessonledger snapshots`")

    def __str__(self) -> str:
        return str(self.args[0])
