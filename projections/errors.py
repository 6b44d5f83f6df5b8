"""Errors raised by the views: one root under the ledger's, facts as attributes.

Each says what is wrong and what to do; none is a bare ``ValueError``, so a caller can
tell a view's refusal from a bug.
"""

from __future__ import annotations

from lessonledger.ledger.errors import LessonLedgerError

__all__ = ["ProjectionError", "UnknownViewError", "VectorShapeError", "ViewClosedError"]


class ProjectionError(LessonLedgerError, ValueError):
    """Root of the views' errors (a ``ValueError`` too, for callers that caught one)."""


class UnknownViewError(ProjectionError):
    """No view is registered under this name.

    Attributes:
        name: the name asked for.
        known: the names that are registered.
    """

    def __init__(self, name: str, known: list[str]) -> None:
        self.name, self.known = name, known
        super().__init__(f"no view is called {name!r}; the views are: {', '.join(known)}")


class VectorShapeError(ProjectionError):
    """Vectors that do not fit: another dimension, NaN or infinity, or a miscount.

    Attributes:
        detail: what is wrong with them.
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"{detail}; pass finite vectors of the embedder's dimension")


class ViewClosedError(ProjectionError):
    """A view read on demand was asked for rows after its snapshot was let go.

    Attributes:
        name: the view's registered name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"the saved rows of view {name!r} were let go (its ledger was "
                         "closed); open the home again to read it")
