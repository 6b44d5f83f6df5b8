"""What a server needs of a ledger: its queries and ``execute``, wherever the ledger runs.

A local :class:`~lessonledger.commands.ledger.Ledger` has these methods; so does a
client of a hub, and :class:`~lessonledger.ops.metrics.MeteredLedger` in front of
either. The MCP server and the metrics serve any of them.
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from lessonledger.commands.audit import Why
from lessonledger.commands.messages import AnyCommand
from lessonledger.commands.recall import Check
from lessonledger.commands.receipts import Receipt
from lessonledger.projections.lessons import LessonRow
from lessonledger.projections.recall import Recall

__all__ = ["LedgerApi"]


class LedgerApi(Protocol):
    """What the tools call: a ledger's queries and ``execute``, wherever it runs."""

    def recall(self, project: str, query: str, *, session: str = "", actor: str = "agent",
               principal: str = "") -> Recall:
        """The prompt section for a query (recorded as shown to the session)."""

    def check(self, project: str, operation: str, target: str, *, session: str = "",
              actor: str = "agent", principal: str = "") -> Check:
        """What is on file for an operation on a target."""

    def lessons(self, project: str, *, session: str = "", actor: str = "agent",
                principal: str = "") -> list[LessonRow]:
        """The active lessons of a project and the global ones."""

    def find_lesson(self, text: str) -> UUID:
        """A lesson's id from its full form or a unique prefix."""

    def why(self, lesson_id: UUID, *, project: str | None = None,
            query: str | None = None) -> Why:
        """A lesson's story, and its recall verdict for a project and query."""

    def execute(self, command: AnyCommand) -> Receipt:
        """Run one command in one write transaction."""
