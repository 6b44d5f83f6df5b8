"""ZeroMQ endpoints as a person types them: checked before anything connects, binds or writes.

ZeroMQ refuses a malformed ``tcp://`` endpoint only when a socket uses it, with a bare
``ZMQError`` (a traceback on the command line), and takes some it should not: port 0 on
a hub would announce its heads on port 1. So every endpoint a verb is given is parsed
here first, and refused with a :class:`~lessonledger.ledger.errors.LedgerConfigError`
that says what to give instead.

Loopback is decided on the parsed address (:mod:`ipaddress`), never on how the text
starts: ``127.0.0.2`` and ``[::1]`` are loopback, ``127.0.0.1.evil.com`` is a name
that resolves wherever its owner wants.
"""

from __future__ import annotations

import ipaddress
import re
from typing import NamedTuple

from lessonledger.ledger.errors import LedgerConfigError

__all__ = ["TcpEndpoint", "check_bind", "check_hub_address", "is_loopback", "parse_tcp"]

#: A host name: dot-separated labels of letters, digits, inner hyphens and underscores
#: (container and interface names have them, though DNS names do not).
_NAME = re.compile(r"(?!-)[\w-]{1,63}(?<!-)(?:\.(?!-)[\w-]{1,63}(?<!-))*\.?", re.ASCII)
_TCP = re.compile(r"tcp://(\[[^\[\]]*\]|[^:/\[\]]*):([^:]*)")


class TcpEndpoint(NamedTuple):
    """A parsed ``tcp://HOST:PORT``: the host as given (brackets off) and the port."""

    host: str
    port: int


def _host_ok(host: str, *, wildcard: bool) -> bool:
    if wildcard and host == "*":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return bool(_NAME.fullmatch(host)) and not host.replace(".", "").isdigit()
    return True


def parse_tcp(endpoint: str, *, wildcard: bool = False) -> TcpEndpoint | None:
    """``endpoint`` as host and port (1 to 65535), or None when it is no such endpoint.

    ``wildcard`` lets the host be ``*`` (every interface: a bind, never a connect).
    """
    match = _TCP.fullmatch(endpoint)
    if match is None:
        return None
    bracketed, port = match.group(1), match.group(2)
    host = bracketed[1:-1] if bracketed.startswith("[") else bracketed
    if bracketed.startswith("[") and ":" not in host:
        return None  # brackets hold an IPv6 address, nothing else
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return None
    return TcpEndpoint(host, int(port)) if _host_ok(host, wildcard=wildcard) else None


def _path_ok(endpoint: str, scheme: str) -> bool:
    rest = endpoint.removeprefix(scheme)
    return endpoint.startswith(scheme) and bool(rest.strip()) and rest.isprintable()


def check_hub_address(hub: str) -> None:
    """Refuse a hub address ZeroMQ cannot connect to, before anything is written.

    Raises:
        LedgerConfigError: ``hub`` is not ``tcp://HOST:PORT`` (port 1 to 65535) or
            ``ipc://PATH``.
    """
    if parse_tcp(hub) is not None or _path_ok(hub, "ipc://"):
        return
    msg = (f"{hub!r} is no hub address; give tcp://HOST:PORT (a port from 1 to 65535) "
           "or ipc://PATH")
    raise LedgerConfigError(msg)


def check_bind(endpoint: str, option: str = "--bind") -> None:
    """Refuse an endpoint a hub cannot bind, before it opens its home.

    Raises:
        LedgerConfigError: ``endpoint`` is not ``tcp://HOST:PORT`` (``*`` for every
            interface; port 1 to 65535), ``ipc://PATH`` or ``inproc://NAME``.
    """
    if (parse_tcp(endpoint, wildcard=True) is not None or _path_ok(endpoint, "ipc://")
            or _path_ok(endpoint, "inproc://")):
        return
    msg = (f"{option} {endpoint!r} is no endpoint to listen on; give tcp://HOST:PORT "
           "(a port from 1 to 65535, e.g. tcp://127.0.0.1:7650), ipc://PATH or "
           "inproc://NAME")
    raise LedgerConfigError(msg)


def is_loopback(endpoint: str) -> bool:
    """Whether a bind endpoint is reachable from this machine only.

    ``ipc://`` and ``inproc://`` are. A ``tcp://`` one is when its host is a loopback
    address or ``localhost`` itself; any other name (``localhost.example``) or a
    malformed endpoint is not.
    """
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    parsed = parse_tcp(endpoint, wildcard=True)
    if parsed is None:
        return False
    if parsed.host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(parsed.host).is_loopback
    except ValueError:
        return False
