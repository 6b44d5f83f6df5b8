"""Why a command was refused. Each says what is wrong and what to do; nothing was written."""

from __future__ import annotations

from uuid import UUID

from lessonledger.ledger.errors import (
    CredentialEventError,
    InvalidEventError,
    LessonLedgerError,
)

__all__ = [
    "AccessRefusedError",
    "BatchRefusedError",
    "CommandError",
    "CredentialError",
    "EvidenceError",
    "InactiveLessonError",
    "InvalidCommandError",
    "KeyNameTakenError",
    "KeyReusedError",
    "LessonNotFoundError",
    "RetiredEvidenceError",
    "StaleVersionError",
    "UnknownKeyError",
    "UnknownLessonError",
]


class CommandError(LessonLedgerError):
    """A command was refused; nothing was written."""


class InvalidCommandError(CommandError, InvalidEventError):
    """A command is malformed; ``field`` is the JSON path of the problem."""


class CredentialError(CommandError, CredentialEventError):
    """Text looks like a credential; lessons, outcomes and envelopes must never carry secrets.

    Attributes:
        pattern: the kind of credential (a detect-secrets secret type, such as
            ``Secret Keyword`` or ``AWS Access Key``).
        field: the JSON path of the field (``$.operations[0].error``, ``$.principal``).
    """


class EvidenceError(CommandError):
    """A cited outcome does not exist or does not support the lesson."""

    def __init__(self, outcome_id: UUID, problem: str) -> None:
        msg = f"evidence {outcome_id} {problem}; cite an outcome that exercised the lesson"
        super().__init__(msg)
        self.outcome_id = outcome_id


class RetiredEvidenceError(CommandError):
    """All the cited evidence is inside a lesson a person retired: it is not re-learned."""

    def __init__(self, retired: UUID) -> None:
        msg = (
            f"all the evidence is already behind lesson {retired}, which was retired; "
            "a retired lesson is not re-learned from the same outcomes"
        )
        super().__init__(msg)
        self.retired = retired


class UnknownLessonError(CommandError, KeyError):
    """No lesson has this id."""

    def __init__(self, lesson_id: UUID) -> None:
        msg = f"no lesson {lesson_id}; list lessons with `lessonledger lessons list`"
        super().__init__(msg)
        self.lesson_id = lesson_id

    def __str__(self) -> str:
        return str(self.args[0])


class LessonNotFoundError(CommandError):
    """No lesson, or more than one, has an id starting with the text given.

    Attributes:
        text: the id or prefix asked for.
        erased: the one lesson of that id or prefix an erasure took, if there is one (a
            killed ``erase --lesson`` run again resolves it through this).
    """

    def __init__(self, text: str, reason: str, erased: UUID | None = None) -> None:
        super().__init__(reason)
        self.text = text
        self.erased = erased


class InactiveLessonError(CommandError):
    """The lesson was superseded, retired or expired: only a live lesson is changed."""

    def __init__(self, lesson_id: UUID, status: str, successor: UUID | None) -> None:
        then = f"; change its successor {successor}" if successor else ""
        msg = f"lesson {lesson_id} is {status} and stays as history{then}"
        super().__init__(msg)
        self.lesson_id = lesson_id
        self.status = status
        self.successor = successor


class StaleVersionError(CommandError):
    """The lesson changed since the caller read it."""

    def __init__(self, lesson_id: UUID, expected: int, current: int) -> None:
        msg = (
            f"lesson {lesson_id} is at version {current}, not {expected}; "
            "show it again and redo the change"
        )
        super().__init__(msg)
        self.lesson_id = lesson_id
        self.expected = expected
        self.current = current


class KeyReusedError(CommandError):
    """An idempotency key already named a different command of the same kind."""

    def __init__(self, key: str, before: str) -> None:
        msg = f"key {key!r} was already used for {before}; send a new key for a new command"
        super().__init__(msg)
        self.key = key


class BatchRefusedError(CommandError):
    """A command of a batch was refused, so none of the batch was written.

    Attributes:
        index: the refused command's place in the batch, from 0.
        cause: why it was refused.
    """

    def __init__(self, index: int, cause: CommandError) -> None:
        super().__init__(f"command {index + 1} of the batch: {cause}; nothing was written")
        self.index = index
        self.cause = cause


class AccessRefusedError(CommandError):
    """A client's grant does not allow what it asked for; nothing was done.

    Attributes:
        principal: the principal the client's key is bound to ('' for no grant at all).
        project: the project asked about ('' when the refusal is not about one).
        needed: the grant that would allow it: ``read``, ``write`` or ``admin``.
    """

    def __init__(self, principal: str, project: str, needed: str, what: str = "") -> None:
        who = f"principal {principal!r}" if principal else "a key with no grant"
        doing = f" to {what}" if what else ""
        on = f" on project {project}" if project else ""
        flag = "--admin" if needed == "admin" else f"--{needed} {project or 'PROJECT'}"
        msg = (f"{who} has no {needed} grant{on}{doing}; an admin grants it with "
               f"`lessonledger access grant KEY_NAME --principal {principal or 'P'} {flag}`")
        super().__init__(msg)
        self.principal = principal
        self.project = project
        self.needed = needed


class UnknownKeyError(CommandError, KeyError):
    """No current grant has this key name (never granted, or revoked already).

    Attributes:
        key_name: the name asked for.
    """

    def __init__(self, key_name: str, revoked_at: int | None = None) -> None:
        then = f" (revoked at position {revoked_at})" if revoked_at else ""
        msg = (f"no key named {key_name!r} has a grant{then}; list the keys with "
               "`lessonledger access list`")
        super().__init__(msg)
        self.key_name = key_name
        self.revoked_at = revoked_at

    def __str__(self) -> str:
        return str(self.args[0])


class KeyNameTakenError(InvalidCommandError):
    """The key name is granted to another public key: one name, one key.

    Attributes:
        key_name: the name asked for.
    """

    def __init__(self, key_name: str, public_key: str) -> None:
        msg = (f"key name {key_name!r} already names another public key ({public_key}); "
               "revoke it first, or grant this key under a new name")
        super().__init__(msg, "$.key_name")
        self.key_name = key_name
