"""ZmqExchange against a real CURVE ROUTER on 127.0.0.1: a refused handshake is resent.

libzmq drops the pipe of a refused handshake, with the request in it, and does not
reconnect: the exchange resends the same frame on a fresh socket, a bounded number of
times, and names the refusal when the key never gets in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from lessonledger.sync import wire
from lessonledger.sync.authenticator import start_authenticator
from lessonledger.sync.errors import UnreachableError
from lessonledger.sync.keys import load_secret, new_keys
from lessonledger.sync.protocol import SyncFrame, SyncReplyFrame
from lessonledger.sync.transport import HANDSHAKE_TRIES, ZmqExchange


def _pair(tmp_path: Path, name: str) -> tuple[bytes, bytes]:
    _, secret = new_keys(tmp_path / "keys", name)
    return load_secret(secret)


class _Echo:
    """A ROUTER that lets a key in from its ``admit_after``-th handshake and echoes."""

    def __init__(self, tmp_path: Path, admit_after: int) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.public, secret = _pair(tmp_path, "hub")
        self.handshakes = 0
        self.requests: list[bytes] = []
        self._admit_after = admit_after
        self.auth = start_authenticator(self.context, self._allowed)
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.linger = 0
        self.socket.curve_secretkey, self.socket.curve_publickey = secret, self.public
        self.socket.curve_server = True
        port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.url = f"tcp://127.0.0.1:{port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve)
        self._thread.start()

    def _allowed(self, key: bytes) -> bool:
        self.handshakes += 1
        return self.handshakes > self._admit_after

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self.socket.poll(50):
                continue
            identity, data = self.socket.recv_multipart()
            frame = wire.decode_frame(data)
            body = wire.decode_body(frame, SyncFrame)
            self.requests.append(body.frame)
            self.socket.send_multipart([identity, wire.encode_frame(
                SyncReplyFrame(b"echo " + body.frame), frame.id)])

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close(0)
        self.auth.stop()
        self.context.destroy(linger=0)


@pytest.fixture
def client_keys(tmp_path: Path) -> tuple[bytes, bytes]:
    return _pair(tmp_path, "replica")


def _echo(tmp_path: Path, admit_after: int) -> Iterator[_Echo]:
    server = _Echo(tmp_path, admit_after)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def refused_twice(tmp_path: Path) -> Iterator[_Echo]:
    yield from _echo(tmp_path, 2)


@pytest.fixture
def never_admitted(tmp_path: Path) -> Iterator[_Echo]:
    yield from _echo(tmp_path, 10**6)


def test_a_request_lost_with_a_refused_handshake_is_resent_on_a_fresh_socket(
        refused_twice: _Echo, client_keys: tuple[bytes, bytes]) -> None:
    curve = (*client_keys, refused_twice.public)
    with ZmqExchange(refused_twice.url, curve=curve, timeout=10) as exchange:
        first = exchange.socket
        assert exchange.call(b"push me") == b"echo push me"
        assert exchange.socket is not first
    assert refused_twice.handshakes == 3
    # The two refused tries never reached the server: it answered the request once.
    assert refused_twice.requests == [b"push me"]


def test_a_key_never_let_in_is_named_refused_after_the_bounded_tries(
        never_admitted: _Echo, client_keys: tuple[bytes, bytes]) -> None:
    curve = (*client_keys, never_admitted.public)
    started = time.monotonic()
    with ZmqExchange(never_admitted.url, curve=curve, timeout=30) as exchange, \
            pytest.raises(UnreachableError, match="refused this key at the handshake"):
        exchange.call(b"let me in")
    # Told by the handshakes, not by the 30 s timeout.
    assert time.monotonic() - started < 15
    assert never_admitted.handshakes == HANDSHAKE_TRIES
    assert never_admitted.requests == []
