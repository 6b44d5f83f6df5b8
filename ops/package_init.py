"""lessonledger: an event-sourced memory ledger for AI agents.

This file is installed as the package's top, ``lessonledger/__init__.py`` (see
``pyproject.toml``: the wheel's folders are the repository's, under the prefix
``lessonledger``). It holds what a client needs before any home is open: the project
digest every client must compute alike, and :func:`open_ledger`, the one call an agent
makes whether its memory is a local home or a hub. The API proper is
``lessonledger.commands``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lessonledger.ops.project import normalised_remote, project_id

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from lessonledger.commands.ledger import Ledger
    from lessonledger.sync.client import RemoteLedger

__all__ = ["normalised_remote", "open_ledger", "project_id"]


def open_ledger(target: str | os.PathLike[str], **options: Any
                ) -> AbstractContextManager[Ledger] | RemoteLedger:
    """A home's ledger (a path) or a hub's (``tcp://host:7650``), for a ``with`` block.

    An agent moves from local to remote memory by changing ``target`` alone: both give
    the same methods and return types. For a hub, ``key=`` and ``server_key=`` (key
    files) turn on CURVE; for a path, the options are the local ``Ledger``'s.

    The sync layer (ZeroMQ) is imported only here, so ``import lessonledger`` stays light.
    """
    from lessonledger.sync import open_ledger as _open

    return _open(target, **options)
