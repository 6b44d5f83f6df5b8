"""The sync protocol over ZeroMQ: the hub's own endpoint, a DEALER at each replica.

Each sync frame travels inside a hub frame (kind ``sync``, :mod:`lessonledger.sync.wire`),
so ``lessonledger serve`` answers replicas and agents on one endpoint, with one
authority and one writer (:class:`~lessonledger.sync.hub.Hub`). The replica's
:class:`ZmqExchange` keeps at most ``credit`` fetches in flight (credit-based flow
control, the ZeroMQ guide's fileio3), so memory stays bounded on both sides, and gives up
with :class:`~lessonledger.sync.errors.UnreachableError` when the hub stays silent.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable

import msgspec
import zmq
from lessonledger.sync import wire
from lessonledger.sync.errors import ProtocolError, UnreachableError
from lessonledger.sync.exchange import DEFAULT_CREDIT
from lessonledger.sync.protocol import MAX_FRAME_BYTES, SyncFrame, SyncReplyFrame

__all__ = ["DEFAULT_TIMEOUT", "ZmqExchange"]

#: Seconds a replica waits for any reply before it calls the hub unreachable.
DEFAULT_TIMEOUT = 30.0


class ZmqExchange:
    """A replica's connection to a hub's sync socket.

    Args:
        url: the hub's address, ``tcp://host:port``.
        timeout: seconds to wait for a reply before giving up.
        curve: this replica's public and secret key and the hub's public key, to
            connect with CURVE (a hub that does not know the key never answers).
    """

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT,
                 context: zmq.Context[zmq.Socket[bytes]] | None = None,
                 curve: tuple[bytes, bytes, bytes] | None = None) -> None:
        self.url = url
        self.timeout_ms = int(timeout * 1000)
        self._context = context or zmq.Context.instance()
        self.socket = self._context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        if curve is not None:
            (self.socket.curve_publickey, self.socket.curve_secretkey,
             self.socket.curve_serverkey) = curve
        self.socket.connect(url)
        self.received = self.sent = 0
        self._ids = itertools.count(1)

    def _send(self, frame: bytes) -> None:
        data = wire.encode_frame(SyncFrame(frame), next(self._ids))
        self.socket.send(data)
        self.sent += len(data)

    def _recv(self) -> bytes:
        """The next sync reply; a hub refusal of the frame itself is raised as its error."""
        if not self.socket.poll(self.timeout_ms, zmq.POLLIN):
            msg = (f"the hub at {self.url} did not answer within "
                   f"{self.timeout_ms / 1000:g} s; check it is serving (`lessonledger "
                   "serve`), then retry")
            raise UnreachableError(msg)
        data = self.socket.recv()
        self.received += len(data)
        try:
            frame = wire.decode_frame(data, limit=MAX_FRAME_BYTES)
            body: msgspec.Struct = wire.decode_body(frame)
        except wire.WireError as e:
            msg = f"the hub at {self.url} sent a frame this replica cannot read: {e}"
            raise ProtocolError(msg) from e
        if isinstance(body, SyncReplyFrame):
            return body.frame
        if isinstance(body, wire.Refused):
            raise wire.refusal_error(body)
        if isinstance(body, wire.Busy):
            raise _Busy(body.retry_after_ms)
        msg = f"the hub at {self.url} answered a sync request with a {frame.kind!r} frame"
        raise ProtocolError(msg)

    def call(self, frame: bytes) -> bytes:
        """Send one request and return its reply (a busy hub is asked again)."""
        while True:
            self._send(frame)
            try:
                return self._recv()
            except _Busy as busy:
                time.sleep(busy.retry_after_ms / 1000)

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT) -> None:
        """Keep up to ``credit`` requests in flight; replies come back in order."""
        queue = deque(first)
        flying = 0
        while queue or flying:
            while queue and flying < credit:
                self._send(queue.popleft())
                flying += 1
            try:
                reply = self._recv()
            except _Busy as busy:
                msg = (f"the hub at {self.url} is busy (or stopping) mid-transfer; run "
                       "the same command again: it continues from what arrived")
                raise UnreachableError(msg) from busy
            flying -= 1
            queue.extend(on_reply(reply))

    def close(self) -> None:
        """Close the socket (nothing is waiting to be sent: every request was answered)."""
        self.socket.close()

    def __enter__(self) -> ZmqExchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Busy(Exception):
    """The hub answered ``busy``: nothing was taken; ask again after a moment."""

    def __init__(self, retry_after_ms: int) -> None:
        super().__init__(f"busy, retry after {retry_after_ms} ms")
        self.retry_after_ms = retry_after_ms
