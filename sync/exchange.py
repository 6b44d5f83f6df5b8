"""How a replica talks to a hub, whatever carries the frames.

An :class:`Exchange` sends request frames and hands back their replies in order:
:meth:`~Exchange.call` for one, :meth:`~Exchange.pipeline` for a stream of fetches with
at most ``credit`` outstanding. :class:`LocalExchange` calls a
:class:`~lessonledger.sync.service.SyncService` in the same process (the protocol
without sockets); :mod:`lessonledger.sync.transport` carries the same frames over
ZeroMQ.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from lessonledger.sync.service import SyncService

__all__ = ["DEFAULT_CREDIT", "Exchange", "LocalExchange"]

#: Fetches a replica keeps in flight: enough to hide a round trip, few enough to bound
#: what either side holds (each is at most a segment).
DEFAULT_CREDIT = 8


class Exchange(Protocol):
    """Carries request frames to a hub and replies back."""

    #: Bytes received and sent so far.
    received: int
    sent: int

    def call(self, frame: bytes) -> bytes:
        """Send one request and return its reply."""
        ...

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT) -> None:
        """Send ``first`` and what each reply asks for, at most ``credit`` in flight.

        ``on_reply`` gets the replies in request order and returns more requests.
        """
        ...


class LocalExchange:
    """An exchange with a service in this process: no sockets, same frames."""

    def __init__(self, service: SyncService, peer: str = "") -> None:
        self.service, self.peer = service, peer
        self.received = self.sent = 0

    def call(self, frame: bytes) -> bytes:
        """Send one request and return its reply."""
        self.sent += len(frame)
        reply = self.service.handle(frame, self.peer)[0]
        self.received += len(reply)
        return reply

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT) -> None:
        """Send every request in turn (one process: nothing to overlap)."""
        queue = deque(first)
        while queue:
            queue.extend(on_reply(self.call(queue.popleft())))
