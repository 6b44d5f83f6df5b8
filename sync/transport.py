"""The sync protocol over ZeroMQ: a ROUTER socket at the hub, a DEALER at each replica.

The hub's loop hands each frame to a :class:`~lessonledger.sync.service.SyncService`
and sends back its reply; it holds nothing between requests. The replica's
:class:`ZmqExchange` keeps at most ``credit`` fetches in flight (credit-based flow
control, the ZeroMQ guide's fileio3), so memory stays bounded on both sides, and gives up
with :class:`~lessonledger.sync.errors.UnreachableError` when the hub stays silent.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import zmq
from lessonledger.sync.authenticator import client_key
from lessonledger.sync.errors import UnreachableError
from lessonledger.sync.exchange import DEFAULT_CREDIT
from lessonledger.sync.protocol import MAX_FRAME_BYTES
from lessonledger.sync.service import SyncService

__all__ = ["DEFAULT_TIMEOUT", "ZmqExchange", "router", "serve"]

#: Seconds a replica waits for any reply before it calls the hub unreachable.
DEFAULT_TIMEOUT = 30.0


def serve(service: SyncService, socket: zmq.Socket[bytes], stop: threading.Event,
          *, poll_ms: int = 200) -> int:
    """Answer requests on a bound ROUTER ``socket`` until ``stop`` is set.

    Returns how many requests were answered.
    """
    answered = 0
    poller = zmq.Poller()
    poller.register(socket, zmq.POLLIN)
    while not stop.is_set():
        if not dict(poller.poll(poll_ms)):
            continue
        parts = socket.recv_multipart(copy=False)
        if len(parts) != 2:
            continue  # not a DEALER's single frame: nothing to answer
        peer, frame = parts[0].bytes, parts[1]
        # The CURVE key the connection authenticated with (ZAP User-Id), else the
        # connection's routing id.
        who = client_key(frame) or peer.hex()
        for reply in service.handle(frame.bytes, who):
            socket.send_multipart([peer, reply])
        answered += 1
    return answered


def router(context: zmq.Context[zmq.Socket[bytes]], bind: str, *,
           curve: tuple[bytes, bytes] | None = None) -> zmq.Socket[bytes]:
    """A ROUTER socket bound to ``bind`` with the hub's limits.

    With ``curve`` (the hub's public and secret key) it is a CURVE server: start an
    authenticator on ``context`` first, or every client is let in.
    """
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
    socket.setsockopt(zmq.LINGER, 0)
    if curve is not None:
        socket.curve_publickey, socket.curve_secretkey = curve
        socket.curve_server = True
    socket.bind(bind)
    return socket


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

    def _send(self, frame: bytes) -> None:
        self.socket.send(frame)
        self.sent += len(frame)

    def _recv(self) -> bytes:
        if not self.socket.poll(self.timeout_ms, zmq.POLLIN):
            msg = (f"the hub at {self.url} did not answer within "
                   f"{self.timeout_ms / 1000:g} s; check it is serving, then retry")
            raise UnreachableError(msg)
        frame = self.socket.recv()
        self.received += len(frame)
        return frame

    def call(self, frame: bytes) -> bytes:
        """Send one request and return its reply."""
        self._send(frame)
        return self._recv()

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT) -> None:
        """Keep up to ``credit`` requests in flight; replies come back in order."""
        queue = deque(first)
        flying = 0
        while queue or flying:
            while queue and flying < credit:
                self._send(queue.popleft())
                flying += 1
            reply = self._recv()
            flying -= 1
            queue.extend(on_reply(reply))

    def close(self) -> None:
        """Close the socket (nothing is waiting to be sent: every request was answered)."""
        self.socket.close()

    def __enter__(self) -> ZmqExchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
