"""The registered views: what the runner folds, under which name.

Adding a view is one entry here (a name and how to make it); the runner folds, saves,
rebuilds and refolds it at an erasure, and ``lessonledger rebuild`` lists it.
"""

from __future__ import annotations

from collections.abc import Mapping

from lessonledger.projections.audit_index import AuditIndex
from lessonledger.projections.deltas import DeltaView
from lessonledger.projections.facts import FactView
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.outcome_stats import OutcomeStats
from lessonledger.projections.rules import Rules
from lessonledger.projections.runner import Projection, Registered, Runner

__all__ = [
    "AUDIT_NAME",
    "DELTAS",
    "FACTS",
    "STATS_NAME",
    "VIEW_NAME",
    "audit_index",
    "delta_view",
    "fact_view",
    "lesson_view",
    "outcome_stats",
    "registry",
    "view_names",
]

#: The lesson view's name in the view store.
VIEW_NAME = "lessons"
#: The per-project outcome statistics' name.
STATS_NAME = "outcomes"
#: The audit index's name.
AUDIT_NAME = "audit"
#: The delta view's (skill bases and their deltas) and the fact table's.
DELTAS, FACTS = "deltas", "facts"


def registry(rules: Rules | None = None) -> list[Registered]:
    """Every view the ledger keeps, in the order each record is applied to them."""
    return [
        Registered(VIEW_NAME, lambda: LessonView(rules), lambda data: LessonView.load(data, rules)),
        Registered(STATS_NAME, OutcomeStats, OutcomeStats.load),
        Registered(AUDIT_NAME, AuditIndex, AuditIndex.load),
        Registered(DELTAS, DeltaView, DeltaView.load),
        Registered(FACTS, FactView, FactView.load),
    ]


def lesson_view(views: Runner | Mapping[str, Projection]) -> LessonView:
    """The lesson view among ``views`` (a runner, or what :meth:`Runner.fresh` returned)."""
    view = views[VIEW_NAME]
    assert isinstance(view, LessonView)
    return view


def audit_index(views: Runner | Mapping[str, Projection]) -> AuditIndex:
    """The audit index among ``views``."""
    view = views[AUDIT_NAME]
    assert isinstance(view, AuditIndex)
    return view


def outcome_stats(views: Runner | Mapping[str, Projection]) -> OutcomeStats:
    """The outcome statistics among ``views``."""
    view = views[STATS_NAME]
    assert isinstance(view, OutcomeStats)
    return view


def delta_view(views: Runner | Mapping[str, Projection]) -> DeltaView:
    """The delta view among ``views``."""
    view = views[DELTAS]
    assert isinstance(view, DeltaView)
    return view


def fact_view(views: Runner | Mapping[str, Projection]) -> FactView:
    """The fact table among ``views``."""
    view = views[FACTS]
    assert isinstance(view, FactView)
    return view


def view_names() -> list[str]:
    """The names of the registered views, in their order."""
    return [entry.name for entry in registry()]
