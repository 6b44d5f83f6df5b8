"""The registered views: what the runner folds, under which name.

Adding a view is one entry here (a name and how to make it); the runner folds, saves,
rebuilds and refolds it at an erasure, and ``lessonledger rebuild`` lists it.
"""

from __future__ import annotations

from collections.abc import Mapping

from lessonledger.projections.lessons import LessonView
from lessonledger.projections.outcome_stats import OutcomeStats
from lessonledger.projections.rules import Rules
from lessonledger.projections.runner import Projection, Registered, Runner

__all__ = ["STATS_NAME", "VIEW_NAME", "lesson_view", "outcome_stats", "registry",
           "view_names"]

#: The lesson view's name in the view store.
VIEW_NAME = "lessons"
#: The per-project outcome statistics' name.
STATS_NAME = "outcomes"


def registry(rules: Rules | None = None) -> list[Registered]:
    """Every view the ledger keeps, in the order each record is applied to them."""
    return [
        Registered(VIEW_NAME, lambda: LessonView(rules), lambda data: LessonView.load(data, rules)),
        Registered(STATS_NAME, OutcomeStats, OutcomeStats.load),
    ]


def lesson_view(views: Runner | Mapping[str, Projection]) -> LessonView:
    """The lesson view among ``views`` (a runner, or what :meth:`Runner.fresh` returned)."""
    view = views[VIEW_NAME]
    assert isinstance(view, LessonView)
    return view


def outcome_stats(views: Runner | Mapping[str, Projection]) -> OutcomeStats:
    """The outcome statistics among ``views``."""
    view = views[STATS_NAME]
    assert isinstance(view, OutcomeStats)
    return view


def view_names() -> list[str]:
    """The names of the registered views, in their order."""
    return [entry.name for entry in registry()]
