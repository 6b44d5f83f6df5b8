"""The registered views: what the runner folds, under which name.

Adding a view is one entry here (a name and how to make it); the runner folds, saves,
rebuilds and refolds it at an erasure, and ``lessonledger rebuild`` lists it.
"""

from __future__ import annotations

from collections.abc import Mapping

from lessonledger.projections.lessons import LessonView
from lessonledger.projections.rules import Rules
from lessonledger.projections.runner import Projection, Registered, Runner

__all__ = ["VIEW_NAME", "lesson_view", "registry", "view_names"]

#: The lesson view's name in the view store.
VIEW_NAME = "lessons"


def registry(rules: Rules | None = None) -> list[Registered]:
    """Every view the ledger keeps, in the order each record is applied to them."""
    return [
        Registered(VIEW_NAME, lambda: LessonView(rules), lambda data: LessonView.load(data, rules)),
    ]


def lesson_view(views: Runner | Mapping[str, Projection]) -> LessonView:
    """The lesson view among ``views`` (a runner, or what :meth:`Runner.fresh` returned)."""
    view = views[VIEW_NAME]
    assert isinstance(view, LessonView)
    return view


def view_names() -> list[str]:
    """The names of the registered views, in their order."""
    return [entry.name for entry in registry()]
