"""Who a hub connection is, and what it may do: the seam between the hub and the grants.

The hub never takes a principal from what a client sends. It asks an
:class:`Authority` for the :class:`Access` of the connection (the CURVE key libzmq
authenticated, or nothing on a loopback hub without keys) and checks every request
against it with :func:`require_read`, :func:`require_write` and :func:`require_admin`.

:class:`LoopbackAuthority` is the keyless mode: every connection is the one principal
the operator configured when starting the hub, which is only safe where only the
operator's own processes can connect (the hub refuses a non-loopback bind without keys).
"""

from __future__ import annotations

from typing import Protocol

import msgspec
from lessonledger.commands.errors import CommandError, InvalidCommandError

__all__ = [
    "GLOBAL",
    "Access",
    "Authority",
    "LoopbackAuthority",
    "NotGrantedError",
    "may_read",
    "require_admin",
    "require_own_principal",
    "require_read",
    "require_write",
]

#: The scope of global lessons, readable with any grant.
GLOBAL = "global"


class NotGrantedError(CommandError):
    """The connection's grant does not cover the request; nothing was done.

    Attributes:
        principal: whose key asked.
        project: the project (or ``*`` for admin work) it needed a grant on.
        needed: ``read``, ``write`` or ``admin``.
    """

    def __init__(self, principal: str, project: str, needed: str) -> None:
        on = "" if needed == "admin" else f" on project {project}"
        msg = (f"principal {principal!r} has no {needed} grant{on}; ask the hub's operator "
               f"for one (`lessonledger access grant NAME --{needed}"
               f"{'' if needed == 'admin' else ' ' + project}`)")
        super().__init__(msg)
        self.principal = principal
        self.project = project
        self.needed = needed


class Access(msgspec.Struct, frozen=True):
    """What one connection may do.

    Attributes:
        principal: stamped on every event the hub writes for it, and on its recalls.
        read: the projects it may read; None for every project.
        write: the projects it may write; None for every project.
        admin: whether it may erase, grant and run ledger-wide commands.
        key: the client's Z85 CURVE public key, empty on a keyless hub.
    """

    principal: str
    read: frozenset[str] | None = None
    write: frozenset[str] | None = None
    admin: bool = False
    key: str = ""


class Authority(Protocol):
    """Answers who a connection is; None refuses it."""

    #: How principals are decided, for the hub's status (``loopback`` or ``curve``).
    mode: str

    def access(self, user_id: str | None) -> Access | None:
        """The access of the connection whose ZAP User-Id is ``user_id`` (None: no CURVE)."""
        ...


class LoopbackAuthority:
    """Every connection is the configured principal (a keyless hub on loopback).

    Args:
        principal: the principal the operator named when starting the hub.
        admin: whether connections may erase and run ledger-wide commands.
    """

    mode = "loopback"

    def __init__(self, principal: str, *, admin: bool = True) -> None:
        self._access = Access(principal=principal, admin=admin)

    def access(self, user_id: str | None) -> Access | None:
        """The configured access, whatever the connection (there are no keys to tell)."""
        return self._access


def may_read(access: Access, project: str) -> bool:
    """Whether ``access`` may read ``project`` (global lessons come with any grant)."""
    return (access.admin or access.read is None or project in (GLOBAL, "")
            or project in access.read)


def require_read(access: Access, project: str) -> None:
    """Refuse unless ``access`` may read ``project``.

    Raises:
        NotGrantedError: it may not.
    """
    if not may_read(access, project):
        raise NotGrantedError(access.principal, project, "read")


def require_write(access: Access, project: str) -> None:
    """Refuse unless ``access`` may write ``project`` (``global`` needs its own grant).

    Raises:
        NotGrantedError: it may not.
    """
    if not (access.admin or access.write is None or project in access.write):
        raise NotGrantedError(access.principal, project, "write")


def require_own_principal(access: Access, given: str) -> None:
    """Refuse a request naming a principal other than its connection's (a spoof).

    Raises:
        InvalidCommandError: ``given`` is set and is not the connection's principal.
    """
    if given and given != access.principal:
        msg = (f"the principal is the one bound to the connection's key "
               f"({access.principal!r}), not {given!r}; leave it out")
        raise InvalidCommandError(msg, "$.principal")


def require_admin(access: Access) -> None:
    """Refuse unless ``access`` is an admin's.

    Raises:
        NotGrantedError: it is not.
    """
    if not access.admin:
        raise NotGrantedError(access.principal, "*", "admin")
