"""The keyword verbs an agent calls, shared by the local ledger and a hub's client.

``ledger.observe_outcome(key=..., project=..., ...)`` builds the command from its fields
(a typed refusal names a bad one) and runs it through ``execute``: locally in the home's
write transaction, remotely through the hub. One definition, so the two cannot drift.
"""

from __future__ import annotations

from typing import Any

from lessonledger.commands.messages import (
    AnyCommand,
    DeclareEnvironmentChange,
    EditLesson,
    ObserveOutcome,
    ProposeLesson,
    Reconcile,
    RetireLesson,
    command_from,
)
from lessonledger.commands.receipts import Receipt
from lessonledger.commands.skill_messages import SkillCommand

__all__ = ["CommandVerbs"]


class CommandVerbs:
    """Each command as a keyword method over :meth:`execute`, which a subclass defines."""

    def execute(self, command: AnyCommand | SkillCommand) -> Receipt:
        """Run one command; see the subclass."""
        raise NotImplementedError

    def observe_outcome(self, **fields: Any) -> Receipt:
        """Record a finished task; see :class:`ObserveOutcome` for the fields."""
        return self.execute(command_from(fields, ObserveOutcome))

    def propose_lesson(self, **fields: Any) -> Receipt:
        """Propose a lesson; see :class:`ProposeLesson`."""
        return self.execute(command_from(fields, ProposeLesson))

    def edit_lesson(self, **fields: Any) -> Receipt:
        """Replace a lesson's text; see :class:`EditLesson`."""
        return self.execute(command_from(fields, EditLesson))

    def retire_lesson(self, **fields: Any) -> Receipt:
        """Retire a lesson for good; see :class:`RetireLesson`."""
        return self.execute(command_from(fields, RetireLesson))

    def declare_environment_change(self, **fields: Any) -> Receipt:
        """Declare a changed environment component; see :class:`DeclareEnvironmentChange`."""
        return self.execute(command_from(fields, DeclareEnvironmentChange))

    def reconcile(self, **fields: Any) -> Receipt:
        """Run the time-driven pass as of ``now``; see :class:`Reconcile`."""
        return self.execute(command_from(fields, Reconcile))
