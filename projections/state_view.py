"""What the small views share: one msgspec state with its position, dumped and loaded whole.

The access, delta, fact and object views each keep their whole state in one Struct whose
``position`` field is the last position folded. Their position, :meth:`apply`,
:meth:`skip_to`, :meth:`dump` and :meth:`load` are this base's (each folds in
:meth:`StateView.fold`); a view rebuilds what it derives from the state (an index by
key, say) in :meth:`StateView._loaded`. They stay saved whole: each is a few hundred
kilobytes at most in a home of millions of events.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import msgspec
from lessonledger.ledger.events import AnyEvent
from lessonledger.ledger.log import Record
from lessonledger.projections.body import shared_event

__all__ = ["StateCodec", "StateView", "TypedFold"]


class _Positioned(Protocol):
    position: int


S = TypeVar("S", bound=_Positioned)


class StateCodec(Generic[S]):
    """Bytes of a view's state and back (``deterministic``: dicts in key order)."""

    def __init__(self, kind: type[S], *, deterministic: bool = False) -> None:
        self.encode = msgspec.msgpack.Encoder(
            order="deterministic" if deterministic else None).encode
        self.decode = msgspec.msgpack.Decoder(kind).decode


class TypedFold(Generic[S]):
    """A view that folds the record types it names, its position in its state's field.

    The state views below, the lesson view and the outcome statistics share this: the
    runner hands each only the types in :attr:`folds`, with the catalogue event decoded
    once for all of them when the type is in :attr:`decodes`.
    """

    _s: S

    #: The types it folds (None: every record; the runner hands it no other), those whose
    #: bodies it reads, and those whose catalogue event it takes decoded from the runner.
    folds: ClassVar[frozenset[str] | None]
    reads: ClassVar[frozenset[str]]
    decodes: ClassVar[frozenset[str]]

    def apply(self, record: Record) -> None:
        """Fold one record in (every record moves the position, erased or not)."""
        self.fold(record, shared_event(record.payload)
                  if record.envelope.type in self.decodes else None)

    def skip_to(self, position: int) -> None:
        """Move the position over records of types it does not fold."""
        self._s.position = position

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        raise NotImplementedError


class StateView(TypedFold[S]):
    """A view whose state is one Struct: its position, dump and load."""

    _codec: ClassVar[StateCodec[Any]]

    @property
    def position(self) -> int:
        """The last log position folded in."""
        return self._s.position

    def dump(self) -> bytes:
        """The whole state: views folded from the same log dump the same bytes."""
        return self._codec.encode(self._s)

    @classmethod
    def load(cls, data: bytes) -> Self:
        """A view from :meth:`dump`'s bytes."""
        view = cls()
        view._s = cls._codec.decode(data)
        view._loaded()
        return view

    def _loaded(self) -> None:
        """Rebuild what the view derives from its state (nothing here)."""
