"""Which skill permissions allow learned deltas: an allowlist, not a denylist.

Seed 002 restricts deltas to skills whose permissions are *empty or connector-only*:
being wrong on a skill that can touch the machine is unrecoverable. A permission is
read folded (:func:`lessonledger.ledger.text.folded`: format characters dropped, NFKC),
stripped and case-folded, and is **connector-backed** only if it is one of:

- ``network:TARGET``: TARGET ``*`` or a host name (letters, digits, ``.``, ``-``, ``_``,
  with ``*`` wildcards), no further ``:``;
- ``mcp:connect``, or ``mcp:connect:SERVER`` (SERVER letters, digits, ``.``, ``-``,
  ``_``).

Every other permission (``shell``, ``filesystem:read``, ``fs:write``, ``exec``,
``process:spawn``, a bare ``network``, ``mcp:*``, a name nobody knows yet) grants a
*local capability*: no delta is proposed, approved or rendered on such a skill.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lessonledger.ledger.text import folded

__all__ = ["connector_only", "local_capabilities", "normalised_permission",
           "permission_set"]

_CONNECTOR = re.compile(
    r"network:(?:\*|[a-z0-9_*-]+(?:\.[a-z0-9_*-]+)*)|mcp:connect(?::[a-z0-9_-][a-z0-9._-]*)?")


def normalised_permission(permission: str) -> str:
    """A permission as it is compared: folded, stripped, case-folded."""
    return folded(permission).strip().casefold()


def permission_set(permissions: Iterable[str]) -> frozenset[str]:
    """The normalised permissions (what a re-registration is compared on)."""
    return frozenset(normalised_permission(p) for p in permissions)


def local_capabilities(permissions: Iterable[str]) -> list[str]:
    """The permissions, as given, that are not connector-backed (so grant local capability)."""
    return [p for p in permissions
            if not _CONNECTOR.fullmatch(normalised_permission(p))]


def connector_only(permissions: Iterable[str]) -> bool:
    """Whether a skill with these permissions may take deltas (empty or connector-only)."""
    return not local_capabilities(permissions)
