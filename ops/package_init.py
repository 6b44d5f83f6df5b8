"""lessonledger: an event-sourced memory ledger for AI agents.

This file is installed as the package's top, ``lessonledger/__init__.py`` (see
``pyproject.toml``: the wheel's folders are the repository's, under the prefix
``lessonledger``). It holds what a client needs before any home is open: the project
digest every client must compute alike. The API proper is ``lessonledger.commands``.
"""

from lessonledger.ops.project import normalised_remote, project_id

__all__ = ["normalised_remote", "project_id"]
