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
    #: Segments a replica asks for in one request here (a ``FetchMany``); 1: one each.
    fetch_segments: int

    def call(self, frame: bytes) -> bytes:
        """Send one request and return its reply."""
        ...

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT,
                 replies: Callable[[bytes], int] | None = None) -> None:
        """Send ``first`` and what each reply asks for, at most ``credit`` replies due.

        ``on_reply`` gets the replies in request order and returns more requests;
        ``replies`` says how many reply frames a request gets (1 when None).
        """
        ...


class LocalExchange:
    """An exchange with a service in this process: no sockets, same frames."""

    #: One segment a request unless set otherwise (a test's exchange may override
    #: :meth:`call`, which hands back one reply).
    fetch_segments = 1

    def __init__(self, service: SyncService, peer: str = "") -> None:
        self.service, self.peer = service, peer
        self.received = self.sent = 0

    def call(self, frame: bytes) -> bytes:
        """Send one request and return its reply."""
        return self.answers(frame)[0]

    def answers(self, frame: bytes) -> list[bytes]:
        """Send one request and return every reply frame (several for a ``FetchMany``)."""
        self.sent += len(frame)
        replies = self.service.handle(frame, self.peer)
        self.received += sum(map(len, replies))
        return replies

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT,
                 replies: Callable[[bytes], int] | None = None) -> None:
        """Send every request in turn (one process: nothing to overlap)."""
        queue = deque(first)
        while queue:
            frame = queue.popleft()
            several = replies is not None and replies(frame) > 1
            for reply in self.answers(frame) if several else [self.call(frame)]:
                queue.extend(on_reply(reply))
