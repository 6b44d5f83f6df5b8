"""lessonledger.sync: the hub and its client; snapshots and sync between machines.

:func:`open_ledger` opens a home's ledger from a path, or a hub's from an endpoint, with
the same methods either way, so an agent moves to a hub by changing one argument.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any

from lessonledger.commands.ledger import Ledger
from lessonledger.commands.ledger import open_ledger as open_local
from lessonledger.sync.client import HubUnavailableError, RemoteLedger, is_remote

__all__ = ["HubUnavailableError", "RemoteLedger", "open_ledger"]


def open_ledger(target: str | os.PathLike[str], **options: Any
                ) -> AbstractContextManager[Ledger] | RemoteLedger:
    """A hub's ledger (``tcp://host:7650``) or a home's (a path), for a ``with`` block.

    For a hub, ``key=`` (this client's secret key file) and ``server_key=`` (the hub's
    public key file) turn on CURVE; ``timeout=`` and ``deadline=`` bound retries. For a
    path, the options are :class:`~lessonledger.commands.ledger.Ledger`'s.
    """
    if is_remote(target):
        return RemoteLedger(os.fspath(target), **options)
    return open_local(target, **options)
