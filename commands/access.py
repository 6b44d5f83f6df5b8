"""Access commands: grant a client key a principal and projects, or revoke it.

    ledger.execute(GrantAccess(key="grant-ada-1", key_name="ada-laptop",
                               public_key=z85, principal="ada", read=[p], write=[p]))
    ledger.execute(RevokeAccess(key="revoke-ada-1", key_name="ada-laptop"))

Both are events in the log (``AccessGranted``, ``AccessRevoked``), so an auditor sees
who could do what, and from when. A grant's ``principal`` is the grantee: the principal
bound to the key, and the envelope's (whose data the grant is), so erasing the grantee
takes the grant; who granted it is the command's ``actor``. A new grant for a key
replaces its previous one whole.

Decided like every command (:func:`decide_access`): pure, against the access view, a
refusal typed and nothing written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar

import msgspec
from lessonledger.commands.errors import (
    InvalidCommandError,
    KeyNameTakenError,
    UnknownKeyError,
)
from lessonledger.commands.handlers import Decided, command_digest
from lessonledger.commands.messages import _Command
from lessonledger.ledger.events import (
    AccessGranted,
    AccessRevoked,
    AnyEvent,
    KeyName,
    Principal,
    PublicKey,
    Scope,
)
from lessonledger.projections.access import AccessView, key_stream
from lessonledger.projections.runner import Projection, Runner
from lessonledger.projections.views import access_view
from msgspec import Meta, field
from zmq.utils import z85

__all__ = [
    "ACCESS_COMMANDS",
    "AccessCommand",
    "GrantAccess",
    "RevokeAccess",
    "check_public_key",
    "decide_access",
]

Projects = Annotated[list[Scope], Meta(max_length=1000)]
#: Curve25519's field prime: a public key is a field element, so it is below this.
_P = (1 << 255) - 19


class GrantAccess(_Command, frozen=True, kw_only=True, tag="grant_access"):
    """Let a client key connect as ``principal``, reading and writing these projects.

    ``principal`` is the grantee, not the caller (the caller is ``actor``).
    ``public_key`` is left out of the credential screen, where a bare Z85 key reads as
    a secret one: it is checked to be a CURVE public key instead
    (:func:`check_public_key`).
    """

    #: Fields checked as a public key, not screened as text.
    public_keys: ClassVar[frozenset[str]] = frozenset({"public_key"})
    keyed_by_principal: ClassVar[bool] = False

    key_name: KeyName
    public_key: PublicKey
    principal: Principal
    read: Projects = field(default_factory=list)
    write: Projects = field(default_factory=list)
    admin: bool = False
    actor: Annotated[str, Meta(min_length=1, max_length=200)] = "operator"


class RevokeAccess(_Command, frozen=True, kw_only=True, tag="revoke_access"):
    """Refuse the key granted under ``key_name`` from its next connection on."""

    keyed_by_principal: ClassVar[bool] = False

    key_name: KeyName
    actor: Annotated[str, Meta(min_length=1, max_length=200)] = "operator"


AccessCommand = GrantAccess | RevokeAccess
ACCESS_COMMANDS: tuple[type, ...] = AccessCommand.__args__


def check_public_key(text: str, field: str = "$.public_key") -> bytes:
    """The 32 bytes of a Z85 CURVE public key; refused when ``text`` cannot be one.

    A secret key has the same shape; but a public key is a curve25519 field element,
    below 2**255 - 19, so about half of all secret keys pasted here are told apart and
    refused. ``lessonledger access grant`` reads only a public key file, never a secret.

    Raises:
        InvalidCommandError: not 40 Z85 characters, or not a public key.
    """
    try:
        raw = z85.decode(text) if len(text) == 40 else b""
    except (ValueError, KeyError, IndexError, UnicodeEncodeError):
        raw = b""
    if len(raw) != 32:
        msg = (f"{field} is not a CURVE public key: give the 40 Z85 characters of the "
               "key's `public-key` line (its NAME.key file)")
        raise InvalidCommandError(msg, field)
    if int.from_bytes(raw, "little") >= _P:
        msg = (f"{field} is no CURVE public key (its value is past the curve's field): "
               "is it a secret key? Give the public key (the NAME.key file, never "
               "NAME.key_secret)")
        raise InvalidCommandError(msg, field)
    return raw


def decide_access(command: AccessCommand,
                  views: Runner | Mapping[str, Projection]) -> list[Decided]:
    """Check an access command against the access view and return its one event."""
    view = access_view(views)
    handler: Callable[[Any, AccessView], tuple[AnyEvent, str]] = _HANDLERS[type(command)]
    event, public_key = handler(command, view)
    stamped = msgspec.structs.replace(event, command_digest=command_digest(command))
    return [Decided(stamped, stream=key_stream(public_key),
                    version=view.next_version(public_key))]


def _grant(cmd: GrantAccess, view: AccessView) -> tuple[AnyEvent, str]:
    check_public_key(cmd.public_key)
    named = view.named(cmd.key_name)
    if named is not None and named.public_key != cmd.public_key:
        raise KeyNameTakenError(cmd.key_name, named.public_key)
    return AccessGranted(key_name=cmd.key_name, public_key=cmd.public_key,
                         principal=cmd.principal, read=sorted(set(cmd.read)),
                         write=sorted(set(cmd.write)), admin=cmd.admin), cmd.public_key


def _revoke(cmd: RevokeAccess, view: AccessView) -> tuple[AnyEvent, str]:
    grant = view.named(cmd.key_name)
    if grant is None:
        raise UnknownKeyError(cmd.key_name, view.revoked_at(cmd.key_name))
    return AccessRevoked(key_name=cmd.key_name, public_key=grant.public_key), grant.public_key


_HANDLERS: dict[type, Callable[[Any, AccessView], tuple[AnyEvent, str]]] = {
    GrantAccess: _grant, RevokeAccess: _revoke,
}
