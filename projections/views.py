"""The registered views: what the runner folds, under which name.

Adding a view is one entry here (a name and how to make it); the runner folds, saves,
rebuilds and refolds it at an erasure, and ``lessonledger rebuild`` lists it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.projections.access import AccessView
from lessonledger.projections.audit_index import AuditIndex
from lessonledger.projections.deltas import DeltaView
from lessonledger.projections.facts import FactView
from lessonledger.projections.lessons import LessonView
from lessonledger.projections.objects import ObjectView
from lessonledger.projections.outcome_stats import OutcomeStats
from lessonledger.projections.rules import Rules
from lessonledger.projections.runner import Projection, Registered, Runner
from lessonledger.projections.store import ViewStore

__all__ = [
    "ACCESS",
    "AUDIT_NAME",
    "DELTAS",
    "FACTS",
    "OBJECTS",
    "STATS_NAME",
    "VIEW_NAME",
    "access_view",
    "audit_index",
    "delta_view",
    "fact_view",
    "lesson_view",
    "object_view",
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
#: The object view's (segments, snapshots, refs, tombstones: what sync moves).
OBJECTS = "objects"
#: The access view's (client keys and their grants).
ACCESS = "access"


def registry(rules: Rules | None = None) -> list[Registered]:
    """Every view the ledger keeps, in the order each record is applied to them."""
    return [
        Registered(VIEW_NAME, lambda: LessonView(rules), lambda data: LessonView.load(data, rules),
                   lambda rows, store: LessonView.load_rows(rows, rules, _log(store)),
                   lambda store: LessonView.started(rules, _log(store)),
                   lambda pin, store: LessonView.pinned(pin, rules, _log(store))),
        Registered(STATS_NAME, OutcomeStats, OutcomeStats.load,
                   lambda rows, _store: OutcomeStats.load_rows(rows),
                   pinned=lambda pin, _store: OutcomeStats.pinned(pin)),
        Registered(AUDIT_NAME, AuditIndex, AuditIndex.load,
                   lambda rows, _store: AuditIndex.load_rows(rows),
                   pinned=lambda pin, _store: AuditIndex.pinned(pin)),
        Registered(DELTAS, DeltaView, DeltaView.load),
        Registered(FACTS, FactView, FactView.load),
        Registered(OBJECTS, ObjectView, ObjectView.load),
        Registered(ACCESS, AccessView, AccessView.load),
    ]


def _log(store: ViewStore) -> EventLog:
    """The log of the home ``store`` saves views in: where a view reads outcomes from."""
    return EventLog(store.home, LOG_NAME)


V = TypeVar("V")


def _typed(views: Runner | Mapping[str, Projection], name: str, kind: type[V]) -> V:
    """The view named ``name`` among ``views``: a runner, or :meth:`Runner.fresh`'s."""
    view = views[name]
    assert isinstance(view, kind), f"{name} is a {type(view).__name__}"
    return view


def lesson_view(views: Runner | Mapping[str, Projection]) -> LessonView:
    """The lesson view among ``views``."""
    return _typed(views, VIEW_NAME, LessonView)


def audit_index(views: Runner | Mapping[str, Projection]) -> AuditIndex:
    """The audit index among ``views``."""
    return _typed(views, AUDIT_NAME, AuditIndex)


def outcome_stats(views: Runner | Mapping[str, Projection]) -> OutcomeStats:
    """The outcome statistics among ``views``."""
    return _typed(views, STATS_NAME, OutcomeStats)


def delta_view(views: Runner | Mapping[str, Projection]) -> DeltaView:
    """The delta view among ``views``."""
    return _typed(views, DELTAS, DeltaView)


def fact_view(views: Runner | Mapping[str, Projection]) -> FactView:
    """The fact table among ``views``."""
    return _typed(views, FACTS, FactView)


def access_view(views: Runner | Mapping[str, Projection]) -> AccessView:
    """The access view among ``views``."""
    return _typed(views, ACCESS, AccessView)


def view_names() -> list[str]:
    """The names of the registered views, in their order."""
    return [entry.name for entry in registry()]


def object_view(views: Runner | Mapping[str, Projection]) -> ObjectView:
    """The object view among ``views``."""
    return _typed(views, OBJECTS, ObjectView)
