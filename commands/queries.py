"""The queries an agent asks, as strict msgspec Structs: what a tool or a hub receives.

The Python API takes these as keyword arguments (:class:`~.read_side.ReadSide`); a
process that receives queries as JSON (the MCP server, a hub) decodes them into these
types, so each has one schema, generated from the type, and one set of bounds. A query
without a ``project`` is asked for the caller's own project: the one its server was
started in.
"""

from __future__ import annotations

from typing import Annotated

from lessonledger.commands.messages import Label
from lessonledger.ledger.events import Key, Scope, Text
from msgspec import Meta, Struct

__all__ = ["AnyQuery", "CheckQuery", "LessonsQuery", "RecallQuery", "WhyQuery"]

_PROJECT = ("the project digest (16 to 64 lowercase hex characters, or 'global'); the "
            "server's own project when omitted")


class _Query(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Fields every query has: who asks, for which project."""

    project: Annotated[Scope | None, Meta(description=_PROJECT)] = None
    session: Annotated[Label, Meta(description=(
        "the agent session asking: what is shown is in play for its next outcome"))] = ""
    principal: Annotated[Label, Meta(description=(
        "whose work it is: the record of what was shown carries it"))] = ""
    actor: Label = "agent"


class RecallQuery(_Query, frozen=True, kw_only=True):
    """The lessons section to put in the prompt before planning a task."""

    query: Annotated[Text, Meta(description="what the agent is about to do")]


class CheckQuery(_Query, frozen=True, kw_only=True):
    """What is on file for one operation on one target: one line to read before acting."""

    operation: Annotated[Key, Meta(description=(
        "the operation key, as outcomes record it (pytest:tests/)"))]
    target: Annotated[Key, Meta(description="the target, relative to the project (tests)")]


class LessonsQuery(_Query, frozen=True, kw_only=True):
    """Every active lesson of the project and the global ones, strongest first."""


class WhyQuery(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The events that made a lesson what it is, and why it was or was not recalled."""

    lesson: Annotated[str, Meta(min_length=1, max_length=36, description=(
        "the lesson's id, or a unique prefix of it"))]
    project: Annotated[Scope | None, Meta(description=_PROJECT)] = None
    query: Annotated[Text | None, Meta(description=(
        "judge whether recall shows it for this query in the project"))] = None


AnyQuery = RecallQuery | CheckQuery | LessonsQuery | WhyQuery
