"""The object view: the log as sync sees it, folded by the runner like any view.

Segments, body addresses, snapshots, refs and tombstones are not a second store: they
are folded from the log, so they can never drift from it, are rebuilt from position 0
like every view, and travel with the log (a snapshot and an erasure's acknowledgement
are events). What it keeps:

- the chain link at its position, recomputed from the envelopes;
- the ids of the closed segments, and the envelopes of the open one;
- the tombstones: every position an ``Erased`` record names (its body may never be
  sent, accepted or restored again), and the erasures with who acknowledged them;
- the snapshots, and the refs naming them. A ``SnapshotTaken`` moves its ref only when
  its ``previous`` is what the ref named (compare-and-swap) and its root, link and
  erasure count are what this view computes for the log up to its ``last``: a snapshot
  that does not match the log is never named.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import msgspec
from lessonledger.ledger.envelope import GENESIS, chain_link, encode_envelope
from lessonledger.ledger.events import (
    ERASED,
    ERASURE_ACKNOWLEDGED,
    SNAPSHOT_TAKEN,
    AnyEvent,
    Erased,
    ErasureAcknowledged,
    SnapshotTaken,
    decode_event,
)
from lessonledger.ledger.log import Record
from lessonledger.ledger.objects import (
    SEGMENT_SIZE,
    Snapshot,
    merkle_root,
    segment_id,
    snapshot_id,
)
from lessonledger.projections.state_view import StateCodec, StateView

__all__ = ["ErasureRow", "NamedSnapshot", "ObjectView"]


class NamedSnapshot(msgspec.Struct, frozen=True):
    """A snapshot as the view holds it.

    Attributes:
        id: its content address.
        name: the ref it was taken on.
        position: where its ``SnapshotTaken`` event is.
        snapshot: what it names.
    """

    id: bytes
    name: str
    position: int
    snapshot: Snapshot


class ErasureRow(msgspec.Struct):
    """An erasure and the replicas that acknowledged applying it.

    Attributes:
        position: the ``Erased`` record's.
        what: principal, session, lesson or outcome.
        subject: which.
        bodies: how many positions it names.
        acked_by: replica names, in the order they acknowledged.
    """

    position: int
    what: str
    subject: str
    bodies: int
    acked_by: list[str] = []


class _State(msgspec.Struct):
    position: int = 0
    link: bytes = GENESIS
    closed: list[bytes] = []
    open: list[bytes] = []
    tombstones: list[int] = []
    erasures: list[ErasureRow] = []
    snapshots: list[NamedSnapshot] = []
    refs: dict[str, bytes] = {}
    #: The positions whose bodies fed this state (erasures, snapshots, acknowledgements);
    #: None in a view saved before this was kept, which then cannot tell.
    read_at: list[int] | None = None


#: The events whose bodies the view reads; every other record counts by its envelope.
_READS: frozenset[str] = frozenset({ERASED, SNAPSHOT_TAKEN, ERASURE_ACKNOWLEDGED})


class ObjectView(StateView[_State]):
    """Folds every record into segment ids; folds snapshots, refs and erasures."""

    _codec = StateCodec(_State)

    def __init__(self) -> None:
        self._s = _State(read_at=[])
        self._tombs: set[int] = set()

    @property
    def link(self) -> bytes:
        """The chain link at :attr:`position`."""
        return self._s.link

    def _loaded(self) -> None:
        self._tombs = set(self._s.tombstones)

    # -- folding -------------------------------------------------------------------

    #: It folds every record (by its envelope) and reads the bodies of these types.
    folds: ClassVar[frozenset[str] | None] = None
    reads: ClassVar[frozenset[str]] = _READS
    decodes: ClassVar[frozenset[str]] = _READS

    def skip_to(self, position: int) -> None:
        """Never called: every record's envelope goes into a segment."""
        msg = "the object view folds every record; it cannot skip one"
        raise AssertionError(msg)

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        envelope = record.envelope
        kind = envelope.type
        if record.payload is not None and kind in _READS:
            if self._s.read_at is not None:
                self._s.read_at.append(envelope.position)
            if event is None:
                event = decode_event(record.payload)  # refused as it always was
            if isinstance(event, Erased):
                self._erased(envelope.position, event)
            elif isinstance(event, SnapshotTaken):
                self._snapshot(envelope.position, event)
            elif isinstance(event, ErasureAcknowledged):
                self._acknowledged(event)
        stored = encode_envelope(envelope)
        s = self._s
        s.link = chain_link(s.link, stored)
        s.open.append(stored)
        if len(s.open) == SEGMENT_SIZE:
            s.closed.append(segment_id(s.open))
            s.open = []
        s.position = envelope.position

    def survives_erasure(self, positions: Iterable[int]) -> bool:
        """True when erasing the bodies at ``positions`` leaves this state as it is.

        Only the bodies of erasures, snapshots and acknowledgements feed it; every other
        record counts by its envelope, which an erasure keeps. So the runner need not
        fold this view afresh at an erasure that names none of those.
        """
        read_at = self._s.read_at
        return read_at is not None and set(read_at).isdisjoint(positions)

    def _erased(self, position: int, event: Erased) -> None:
        named = [p for p in event.positions if p < position]
        new = [p for p in named if p not in self._tombs]
        self._tombs.update(new)
        self._s.tombstones.extend(new)
        self._s.erasures.append(ErasureRow(position, event.what, event.subject, len(named)))

    def _acknowledged(self, event: ErasureAcknowledged) -> None:
        for row in self._s.erasures:
            if row.position == event.erasure and event.replica not in row.acked_by:
                row.acked_by.append(event.replica)

    def _snapshot(self, position: int, event: SnapshotTaken) -> None:
        if event.last != position - 1:
            return  # a snapshot names the log up to its own event, nothing else
        current = self.snapshot_here(parent=event.parent, created_at=event.created_at,
                                     origin=event.origin)
        if (current.root, current.link, current.erasures) != (
                event.root, event.link, event.erasures):
            return
        if self._s.refs.get(event.name, b"") != event.previous:
            return  # the ref moved meanwhile: compare-and-swap failed
        if event.parent != event.previous:
            return  # a snapshot's parent is what its ref named before it, nothing else
        sid = snapshot_id(current)
        self._s.snapshots.append(NamedSnapshot(sid, event.name, position, current))
        self._s.refs[event.name] = sid

    # -- reading -------------------------------------------------------------------

    @property
    def closed_ids(self) -> list[bytes]:
        """The ids of the closed (full) segments, in order."""
        return list(self._s.closed)

    @property
    def open_envelopes(self) -> list[bytes]:
        """The stored envelopes of the open segment (none when the last one is full)."""
        return list(self._s.open)

    def segment_ids(self) -> list[bytes]:
        """The ids of every segment up to :attr:`position`, the open one last."""
        s = self._s
        return [*s.closed, segment_id(s.open)] if s.open else list(s.closed)

    def snapshot_here(self, *, parent: bytes, created_at: int, origin: str) -> Snapshot:
        """The snapshot of the log as this view has folded it."""
        s = self._s
        return Snapshot(parent=parent, first=1, last=s.position,
                        root=merkle_root(self.segment_ids()), link=s.link,
                        erasures=len(s.erasures), created_at=created_at, origin=origin)

    def is_tombstoned(self, position: int) -> bool:
        """True when an ``Erased`` record names ``position``: its body is gone for good."""
        return position in self._tombs

    def tombstoned_within(self, start: int, stop: int) -> bool:
        """True when an ``Erased`` record names a position from ``start`` to ``stop``."""
        tombs = self._tombs
        if len(tombs) < stop - start:
            return any(start <= position <= stop for position in tombs)
        return not tombs.isdisjoint(range(start, stop + 1))

    @property
    def tombstones(self) -> frozenset[int]:
        """Every position an erasure named."""
        return frozenset(self._tombs)

    @property
    def erasures(self) -> list[ErasureRow]:
        """Every erasure folded, in log order, with its acknowledgements."""
        return list(self._s.erasures)

    @property
    def snapshots(self) -> list[NamedSnapshot]:
        """Every snapshot a ref has named, in log order."""
        return list(self._s.snapshots)

    @property
    def refs(self) -> dict[str, bytes]:
        """Each ref's name and the snapshot id it names now."""
        return dict(self._s.refs)

    def find(self, text: str) -> NamedSnapshot | None:
        """The snapshot a full hex id, a ref name or a unique hex prefix names.

        A full id first: it names one snapshot whatever a ref is called.
        """
        by_id = {snap.id: snap for snap in self._s.snapshots}
        try:
            exact = by_id.get(bytes.fromhex(text))
        except ValueError:
            exact = None
        if exact is not None:
            return exact
        if text in self._s.refs:
            return by_id[self._s.refs[text]]
        matches = [snap for snap in self._s.snapshots if snap.id.hex().startswith(text.lower())]
        return matches[0] if len(matches) == 1 and text else None
