"""The hub's ZAP handler: CURVE clients are let in exactly while their key is allowed.

    auth = start_authenticator(context, lambda key: key.decode() in reader.allowed_keys(),
                               on_refused=count_refusal)
    server = context.socket(zmq.ROUTER)
    server.curve_secretkey, server.curve_publickey = secret, public
    server.curve_server = True
    server.bind("tcp://127.0.0.1:7650")
    frames = server.recv_multipart(copy=False)
    key = client_key(frames[-1])        # the client's Z85 public key (ZAP User-Id)
    ...
    auth.stop()

pyzmq's ``ThreadAuthenticator`` answers libzmq's ZAP requests in a thread of its own;
its CURVE credentials callback asks ``allowed`` for every new connection, so a key
allowed or revoked in the log counts from the next handshake. An established session
is not cut by a revocation (libzmq asks ZAP at the handshake only): the hub must check
the grant of the message's User-Id on every request. The User-Id is the Z85 public key
(pyzmq's default ``curve_user_id``).

A refused key gets nothing (libzmq drops the handshake) and the hub logs one line for
it, on the logger ``lessonledger.sync.auth``. libzmq's client reconnects and tries again
every ``reconnect_ivl`` (100 ms by default), so a key is logged once per
:data:`LOG_EVERY` seconds, the line saying how many tries were refused since; each try
is still refused, and ``on_refused`` is told of each (a counter, a metric). pyzmq's own
ZAP log goes to a child logger kept at WARNING, so it adds no line.

A key granted by another process moments ago is not in the hub's grants until its next
refresh. Given ``refresh``, the handler calls it when it meets a key ``allowed`` does not
know, and asks again before refusing, so the new key's first handshake gets in. A
client spraying unknown keys could make every handshake a refresh: they are at most one
per :data:`REFRESH_EVERY` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

import zmq
from zmq.auth.thread import ThreadAuthenticator

__all__ = ["LOGGER", "LOG_EVERY", "REFRESH_EVERY", "Authenticator", "client_key",
           "start_authenticator"]

#: The logger the refusals go to.
LOGGER = logging.getLogger("lessonledger.sync.auth")
_ZAP_LOG = LOGGER.getChild("zap")
_ZAP_LOG.setLevel(logging.WARNING)
#: Seconds between two log lines about the same refused key.
LOG_EVERY = 60.0
#: Seconds between two refreshes made for unknown keys.
REFRESH_EVERY = 0.05
#: Refused keys remembered for the log's sake; past this many the memory starts afresh
#: (a client spraying keys cannot grow it without bound).
_REMEMBERED = 10_000


class _Provider:
    """pyzmq's credentials provider: ``callback(domain, key)`` with the key as Z85 bytes."""

    def __init__(self, allowed: Callable[[bytes], bool],
                 on_refused: Callable[[bytes], None] | None,
                 refresh: Callable[[], None] | None = None) -> None:
        self.allowed = allowed
        self.on_refused = on_refused
        self.refresh = refresh
        self._refreshed = -REFRESH_EVERY
        self._lock = threading.Lock()
        #: Per refused key: when it was last logged, and tries refused since.
        self._seen: dict[bytes, tuple[float, int]] = {}

    def callback(self, domain: str, key: bytes) -> bool:
        try:
            ok = bool(self.allowed(key))
            if not ok and self._may_refresh():
                assert self.refresh is not None
                self.refresh()
                ok = bool(self.allowed(key))
            why = "it has no grant"
        except Exception as e:  # the ZAP thread must answer, whatever the check did
            ok, why = False, f"checking its grant failed ({type(e).__name__}: {e})"
        if not ok:
            self._log(key, why)
            if self.on_refused is not None:
                try:
                    self.on_refused(key)
                except Exception:
                    LOGGER.exception("on_refused failed for key %s", key.decode("ascii",
                                                                               "replace"))
        return ok

    def _may_refresh(self) -> bool:
        """Whether to refresh now (there is a refresh, and none ran just before)."""
        if self.refresh is None:
            return False
        now = time.monotonic()
        if now - self._refreshed < REFRESH_EVERY:
            return False
        self._refreshed = now
        return True

    def _log(self, key: bytes, why: str) -> None:
        now = time.monotonic()
        with self._lock:
            last, since = self._seen.get(key, (-LOG_EVERY, 0))
            if now - last < LOG_EVERY:
                self._seen[key] = (last, since + 1)
                return
            if len(self._seen) >= _REMEMBERED:
                self._seen.clear()
            self._seen[key] = (now, 0)
        more = f" ({since} more tries refused since the last line)" if since else ""
        LOGGER.warning("refused CURVE client key %s: %s%s", key.decode("ascii", "replace"),
                       why, more)


class Authenticator:
    """A running ZAP handler for one context; :meth:`stop` it on shutdown."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]],
                 allowed: Callable[[bytes], bool],
                 on_refused: Callable[[bytes], None] | None = None,
                 refresh: Callable[[], None] | None = None) -> None:
        self._thread = ThreadAuthenticator(context, log=_ZAP_LOG)
        self._thread.start()
        self._thread.configure_curve_callback("*", _Provider(allowed, on_refused, refresh))

    @property
    def running(self) -> bool:
        """Whether the handler still answers."""
        return bool(self._thread.is_alive())

    def stop(self) -> None:
        """Stop answering ZAP requests (new connections then fail); idempotent."""
        if self._thread.is_alive():
            self._thread.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def start_authenticator(context: zmq.Context[zmq.Socket[bytes]],
                        allowed: Callable[[bytes], bool],
                        on_refused: Callable[[bytes], None] | None = None,
                        refresh: Callable[[], None] | None = None) -> Authenticator:
    """Start a ZAP handler on ``context`` that lets in a CURVE client while ``allowed``.

    Args:
        context: the context of the server sockets (ZAP is per context).
        allowed: asked with the client's Z85 public key (bytes) at each handshake.
        on_refused: told each refused key, after the log line.
        refresh: brings what ``allowed`` knows up to date; called (at most every
            :data:`REFRESH_EVERY` s) before an unknown key is refused.
    """
    return Authenticator(context, allowed, on_refused, refresh)


def client_key(frame: zmq.Frame) -> str:
    """The Z85 public key a message came with (its ZAP User-Id); '' when it has none.

    ``frame`` is any frame of a message received with ``copy=False``.
    """
    try:
        value = frame.get("User-Id")
    except zmq.ZMQError:
        return ""
    return value if isinstance(value, str) else ""
