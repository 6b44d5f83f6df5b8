"""Commands: the only way in. Agents use :func:`open_ledger`; tools send JSON commands."""

from lessonledger.commands.errors import (
    CommandError,
    CredentialError,
    EvidenceError,
    InactiveLessonError,
    RetiredEvidenceError,
    StaleVersionError,
    UnknownLessonError,
)
from lessonledger.commands.ledger import Ledger, open_ledger
from lessonledger.commands.messages import (
    AnyCommand,
    DeclareEnvironmentChange,
    EditLesson,
    ObserveOutcome,
    Operation,
    ProposeLesson,
    Reconcile,
    RetireLesson,
)
from lessonledger.commands.receipts import Receipt

__all__ = [
    "AnyCommand",
    "CommandError",
    "CredentialError",
    "DeclareEnvironmentChange",
    "EditLesson",
    "EvidenceError",
    "InactiveLessonError",
    "Ledger",
    "ObserveOutcome",
    "Operation",
    "ProposeLesson",
    "Receipt",
    "Reconcile",
    "RetireLesson",
    "RetiredEvidenceError",
    "StaleVersionError",
    "UnknownLessonError",
    "open_ledger",
]
