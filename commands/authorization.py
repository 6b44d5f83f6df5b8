"""What a client's grant allows: pure checks, no I/O, asked on every request.

A hub looks the client's grant up by the key the connection authenticated with
(:meth:`~lessonledger.commands.read_side.ReadSide.grant_for`) on every request, not
once per connection: a revocation does not cut an established CURVE session, so the
check is what makes it take effect.

- Reading a project's lessons needs a read grant on it. Global lessons (the project
  ``global``, or ``""`` for "no project") are readable with any grant.
- Writing to a project (``global`` included) needs a write grant on it; a write grant
  does not imply a read grant, nor does ``admin`` imply either.
- Erasing and granting need ``admin``.
- No grant (``None``) allows nothing.
"""

from __future__ import annotations

from lessonledger.commands.errors import AccessRefusedError
from lessonledger.projections.access import Grant

__all__ = [
    "GLOBAL_SCOPES",
    "may_admin",
    "may_read",
    "may_write",
    "require_admin",
    "require_read",
    "require_write",
]

#: The projects whose lessons any grant reads: the global scope, and no project at all.
GLOBAL_SCOPES = frozenset({"", "global"})


def may_read(grant: Grant | None, project: str) -> bool:
    """Whether ``grant`` may read ``project``'s lessons (global ones: any grant)."""
    if grant is None:
        return False
    return project in GLOBAL_SCOPES or project in grant.read


def may_write(grant: Grant | None, project: str) -> bool:
    """Whether ``grant`` may write to ``project`` (``global`` needs its own grant)."""
    if grant is None:
        return False
    return (project or "global") in grant.write


def may_admin(grant: Grant | None) -> bool:
    """Whether ``grant`` may erase and grant."""
    return grant is not None and grant.admin


def require_read(grant: Grant | None, project: str) -> None:
    """Refuse unless ``grant`` may read ``project``.

    Raises:
        AccessRefusedError: naming the principal, the project and the grant needed.
    """
    if not may_read(grant, project):
        raise AccessRefusedError(_principal(grant), project, "read", "read its lessons")


def require_write(grant: Grant | None, project: str) -> None:
    """Refuse unless ``grant`` may write to ``project``.

    Raises:
        AccessRefusedError: naming the principal, the project and the grant needed.
    """
    if not may_write(grant, project):
        raise AccessRefusedError(_principal(grant), project or "global", "write",
                                 "write to it")


def require_admin(grant: Grant | None, what: str = "erase or grant") -> None:
    """Refuse unless ``grant`` has ``admin`` (``what``: the action, for the message).

    Raises:
        AccessRefusedError: naming the principal and ``admin``.
    """
    if not may_admin(grant):
        raise AccessRefusedError(_principal(grant), "", "admin", what)


def _principal(grant: Grant | None) -> str:
    return grant.principal if grant is not None else ""
