"""Views folded from the log: each rebuildable from position 0."""

from lessonledger.projections.lessons import LessonRow, LessonView
from lessonledger.projections.rules import Rules

__all__ = ["LessonRow", "LessonView", "Rules"]
