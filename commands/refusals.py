"""Text that must never enter the ledger: anything shaped like a credential.

Every string a command carries is checked, its envelope's (``actor``, ``principal``,
``session``) included: the envelope outlives any erasure. So are a query's, since recall
and check record the query, principal and session they were asked with. What is
detected, and by what, is :mod:`lessonledger.ledger.secrets`.

A lesson can never grant autonomy either, but that needs no check here: lessons are
only text, and nothing in lessonledger reads a lesson to decide what needs confirmation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lessonledger.commands.errors import CredentialError
from lessonledger.commands.messages import AnyCommand, Erase
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.ledger.events import AnyEvent
from lessonledger.ledger.secrets import credential_field, credential_in, joined_operation

if TYPE_CHECKING:
    from lessonledger.commands.access import AccessCommand

__all__ = ["refuse_credentials", "refuse_query", "refuse_recorded"]

#: Fields never stored, so never checked: the idempotency key is kept only as a hash.
#: An erasure's subject names what to erase; refusing it would make content stored
#: before these checks impossible to erase (and no new event can name such a subject).
_UNSTORED = {"key"}
_UNSTORED_ERASE = {"key", "subject"}


def refuse_credentials(command: AnyCommand | Erase | SkillCommand | AccessCommand) -> None:
    """Raise :class:`CredentialError` naming the field and pattern of a secret in ``command``.

    A field a command declares in ``public_keys`` holds a CURVE public key by its
    meaning: the screen would take it for a secret key (the two look alike), so the
    command's decider checks it as a key instead.
    """
    unstored = _UNSTORED_ERASE if isinstance(command, Erase) else _UNSTORED
    found = (credential_field(command, unstored | getattr(command, "unstored", frozenset())
                              | getattr(command, "public_keys", frozenset()))
             or joined_operation(getattr(command, "operations", ())))
    if found is not None:
        raise CredentialError(found[1], found[0])


def refuse_recorded(events: Sequence[AnyEvent]) -> None:
    """Raise :class:`CredentialError` if one of the ledger's own records holds a secret.

    A snapshot's name and origin, and an erasure acknowledgement's replica name, are
    chosen by whoever takes the snapshot or runs the replica. These records carry no
    principal or session, so no erasure could ever take a secret put there, and they
    travel to every replica whatever its grant.
    """
    for i, event in enumerate(events):
        found = credential_field(event, path=f"$[{i}]" if len(events) > 1 else "$")
        if found is not None:
            raise CredentialError(found[1], found[0])


def refuse_query(**fields: str) -> None:
    """Raise :class:`CredentialError` if a query's field (``$.<name>``) looks like a secret."""
    for name, text in fields.items():
        pattern = credential_in(text)
        if pattern is not None:
            raise CredentialError(pattern, f"$.{name}")
