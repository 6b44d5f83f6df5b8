"""The sync protocol over ZeroMQ: the hub's own endpoint, a DEALER at each replica.

Each sync frame travels inside a hub frame (kind ``sync``, :mod:`lessonledger.sync.wire`),
so ``lessonledger serve`` answers replicas and agents on one endpoint, with one
authority and one writer (:class:`~lessonledger.sync.hub.Hub`). The replica's
:class:`ZmqExchange` keeps at most ``credit`` chunks due (credit-based flow control,
the ZeroMQ guide's fileio3; a request asks for :data:`FETCH_SEGMENTS` segments, each
answered by a chunk of its own), so memory stays bounded on both sides, and gives up
with :class:`~lessonledger.sync.errors.UnreachableError` when the hub stays silent.

A hub that refuses the key at the CURVE handshake sends nothing back, and libzmq drops
the pipe with the request in it and does not reconnect: the request would only time
out. The exchange watches its socket's handshakes (a monitor socket), and
:meth:`ZmqExchange.call` resends the same frame (the same idempotency keys) on a fresh
socket, up to :data:`HANDSHAKE_TRIES` times with a growing pause: a key granted moments
ago by another process gets in once the hub has seen the grant.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable

import msgspec
import zmq
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.sync import wire
from lessonledger.sync.errors import ProtocolError, UnreachableError
from lessonledger.sync.exchange import DEFAULT_CREDIT
from lessonledger.sync.protocol import MAX_FRAME_BYTES, SyncFrame, SyncReplyFrame
from zmq.utils.monitor import recv_monitor_message

__all__ = ["DEFAULT_TIMEOUT", "FETCH_SEGMENTS", "HANDSHAKE_TRIES", "ZmqExchange"]

#: Segments a replica asks for in one request over ZeroMQ (a ``FetchMany``).
FETCH_SEGMENTS = 4
#: Seconds a replica waits for any reply before it calls the hub unreachable.
DEFAULT_TIMEOUT = 30.0
#: Handshakes one call tries before it reports the key refused; the pauses between
#: them (0.1 s, doubling) add up to 1.5 s, past the hub's own grant refresh.
HANDSHAKE_TRIES = 5
_FIRST_PAUSE = 0.1


class ZmqExchange:
    """A replica's connection to a hub's sync socket.

    Args:
        url: the hub's address, ``tcp://host:port``.
        timeout: seconds to wait for a reply before giving up.
        curve: this replica's public and secret key and the hub's public key, to
            connect with CURVE (a hub that does not know the key never answers).
    """

    #: Segments one fetch asks for: a request's chunks come back as one reply each,
    #: and the hub answers them one request at a time, so fewer, larger requests cost
    #: it less while the credit still bounds what is in flight.
    fetch_segments = FETCH_SEGMENTS

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT,
                 context: zmq.Context[zmq.Socket[bytes]] | None = None,
                 curve: tuple[bytes, bytes, bytes] | None = None) -> None:
        self.url = url
        self.timeout_ms = int(timeout * 1000)
        self._context = context or zmq.Context.instance()
        self._curve = curve
        self.received = self.sent = 0
        self._ids = itertools.count(1)
        self.socket, self._monitor = self._open()

    def _open(self) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
        """A connected DEALER, and the monitor that reports its refused handshakes."""
        socket = self._context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        if self._curve is not None:
            (socket.curve_publickey, socket.curve_secretkey,
             socket.curve_serverkey) = self._curve
        monitor = socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        try:
            socket.connect(self.url)
        except zmq.ZMQError as e:
            socket.disable_monitor()
            monitor.close(0)
            socket.close()
            msg = f"cannot connect to {self.url!r} ({e.strerror}); give tcp://HOST:PORT"
            raise LedgerConfigError(msg) from e
        return socket, monitor

    def _reopen(self) -> None:
        self._close_sockets()
        self.socket, self._monitor = self._open()

    def _close_sockets(self) -> None:
        self.socket.disable_monitor()
        self._monitor.close(0)
        self.socket.close()

    def _send(self, frame: bytes) -> None:
        data = wire.encode_frame(SyncFrame(frame), next(self._ids))
        try:
            # A DEALER whose only pipe a refused handshake took blocks on send for good.
            self.socket.send(data, zmq.NOBLOCK)
        except zmq.Again as e:
            raise _HandshakeRefused from e
        self.sent += len(data)

    def _recv(self) -> bytes:
        """The next sync reply; a hub refusal of the frame itself is raised as its error.

        Raises:
            _HandshakeRefused: the hub refused the key: nothing sent on this socket
                arrives.
        """
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        ready = dict(poller.poll(self.timeout_ms))
        if self.socket not in ready:
            if self._monitor in ready:
                recv_monitor_message(self._monitor)
                raise _HandshakeRefused
            msg = (f"the hub at {self.url} did not answer within "
                   f"{self.timeout_ms / 1000:g} s; check it is serving (`lessonledger "
                   "serve`), then retry")
            raise UnreachableError(msg)
        # Without a copy: the chunk's bytes are copied out once, as the reply decodes.
        data = self.socket.recv(copy=False).buffer
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
        """Send one request and return its reply.

        A busy hub is asked again after the pause it names. A refused handshake took the
        request with it: it is sent again, the same bytes, on a fresh socket.

        Raises:
            UnreachableError: no reply in time, or the key was refused
                :data:`HANDSHAKE_TRIES` times.
        """
        pause, refusals = _FIRST_PAUSE, 0
        while True:
            try:
                self._send(frame)
                return self._recv()
            except _Busy as busy:
                time.sleep(busy.retry_after_ms / 1000)
            except _HandshakeRefused as refused:
                refusals += 1
                if refusals >= HANDSHAKE_TRIES:
                    msg = (f"the hub at {self.url} refused this key at the handshake "
                           f"({refusals} tries): it has no grant there; ask the hub's admin "
                           "for `lessonledger access grant`, then retry")
                    raise UnreachableError(msg) from refused
                time.sleep(pause)
                pause *= 2
                self._reopen()

    def pipeline(self, first: list[bytes], on_reply: Callable[[bytes], list[bytes]],
                 credit: int = DEFAULT_CREDIT,
                 replies: Callable[[bytes], int] | None = None) -> None:
        """Keep up to ``credit`` replies due (``replies(frame)`` per request, else 1).

        Replies come back in order. A request due more replies than the credit is sent
        alone. The credit freed by a reply is spent before ``on_reply`` works on it, so
        the hub prepares the next chunks while this side checks and commits one.
        """
        queue = deque(first)
        flying = 0
        due = replies or (lambda frame: 1)
        while queue or flying:
            try:
                flying = self._top_up(queue, flying, credit, due)
                reply = self._recv()
                flying = self._top_up(queue, flying - 1, credit, due)
            except (_Busy, _HandshakeRefused) as lost:
                msg = (f"the hub at {self.url} is busy, stopping or refusing this key "
                       "mid-transfer; run the same command again: it continues from "
                       "what arrived")
                raise UnreachableError(msg) from lost
            queue.extend(on_reply(reply))

    def _top_up(self, queue: deque[bytes], flying: int, credit: int,
                due: Callable[[bytes], int]) -> int:
        """Send queued requests while the credit allows; how many replies are then due."""
        while queue and (not flying or flying + due(queue[0]) <= credit):
            frame = queue.popleft()
            self._send(frame)
            flying += due(frame)
        return flying

    def close(self) -> None:
        """Close the socket (nothing is waiting to be sent: every request was answered)."""
        self._close_sockets()

    def __enter__(self) -> ZmqExchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Busy(Exception):
    """The hub answered ``busy``: nothing was taken; ask again after a moment."""

    def __init__(self, retry_after_ms: int) -> None:
        super().__init__(f"busy, retry after {retry_after_ms} ms")
        self.retry_after_ms = retry_after_ms


class _HandshakeRefused(Exception):
    """The hub refused this key at the handshake: what was sent on the socket is lost."""
