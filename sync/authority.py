"""Who a hub connection is, and what it may do: the seam between the hub and the grants.

The hub never takes a principal from what a client sends. It asks an
:class:`Authority` for the :class:`Access` of the connection and checks every request
against it with :func:`require_read`, :func:`require_write` and :func:`require_admin`,
which apply :mod:`lessonledger.commands.authorization` to the connection's grant.

- :class:`GrantAuthority` (a hub with CURVE keys): the connection is the key libzmq
  authenticated (its ZAP User-Id), and its principal and rights are that key's current
  ``AccessGranted`` grant. The hub refreshes these grants after every commit, every
  half second and at each handshake (asking its writer); what it writes and answers is decided
  by the key's grant as it stands at that moment (:func:`in_force`, given the grant
  the writer's transaction or the query worker's fold found), so a grant, a
  revocation or an erasure any process committed counts from the next request, even
  on a session already established.
- :class:`LoopbackAuthority` (a keyless hub): every connection is the one principal the
  operator configured when starting the hub, which is only safe where only the
  operator's own processes can connect (the hub refuses a non-loopback bind without
  keys). It reads and writes every project; ``admin`` is the operator's choice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol
from uuid import UUID

import msgspec
from lessonledger.commands import authorization
from lessonledger.commands.access import GrantAccess
from lessonledger.commands.errors import (
    AccessRefusedError,
    CredentialError,
    InvalidCommandError,
)
from lessonledger.commands.messages import (
    DeclareEnvironmentChange,
    EditLesson,
    Label,
    ObserveOutcome,
    ProposeLesson,
    RetireLesson,
    checked_text,
)
from lessonledger.commands.skill_messages import RecordResolution
from lessonledger.ledger.envelope import ROLE_ACTORS
from lessonledger.ledger.events import (
    NAMES_A_DELTA,
    NAMES_A_KEY,
    NAMES_A_LESSON,
    decode_event,
    tag_of,
)
from lessonledger.ledger.secrets import credential_in
from lessonledger.projections.access import Grant

__all__ = [
    "Access",
    "Authority",
    "GrantAuthority",
    "LoopbackAuthority",
    "authorize_command",
    "authorize_event",
    "body_scope",
    "bound_to_caller",
    "in_force",
    "may_read",
    "may_read_body",
    "named_lessons",
    "no_grant",
    "require_admin",
    "require_own_principal",
    "require_read",
    "require_write",
]


class Access(msgspec.Struct, frozen=True):
    """What one connection may do.

    Attributes:
        principal: stamped on every event the hub writes for it, and on its recalls.
        grant: the connection key's grant; None on a keyless hub.
        admin: on a keyless hub, whether connections may erase, grant and reconcile.
        key: the client's Z85 CURVE public key, empty on a keyless hub.
    """

    principal: str
    grant: Grant | None = None
    admin: bool = False
    key: str = ""


class Authority(Protocol):
    """Answers who a connection is; None refuses it."""

    #: How principals are decided, for the hub's status (``loopback`` or ``curve``).
    mode: str

    def access(self, user_id: str | None) -> Access | None:
        """The access of the connection whose ZAP User-Id is ``user_id`` (None: no CURVE)."""
        ...

    def allowed(self, key: bytes) -> bool:
        """Whether a CURVE client key (Z85) may connect now (the ZAP handler asks)."""
        ...

    def refresh(self, grants: Iterable[Grant]) -> None:
        """Take the grants now in force (the hub's writer calls it as they change)."""
        ...


class LoopbackAuthority:
    """Every connection is the configured principal (a keyless hub on loopback).

    Args:
        principal: the principal the operator named when starting the hub.
        admin: whether connections may erase and run ledger-wide commands.
    """

    mode = "loopback"

    def __init__(self, principal: str, *, admin: bool = True) -> None:
        # It goes into every envelope the hub writes: held to a command's principal.
        checked_text(principal, "--principal", Label)
        kind = credential_in(principal)
        if kind is not None:
            raise CredentialError(kind, "--principal")
        self._access = Access(principal=principal, admin=admin)

    def access(self, user_id: str | None) -> Access | None:
        """The configured access, whatever the connection (there are no keys to tell)."""
        return self._access

    def allowed(self, key: bytes) -> bool:
        """A keyless hub authenticates nobody: no CURVE client is let in."""
        return False

    def refresh(self, grants: Iterable[Grant]) -> None:
        """Grants do not matter to a keyless hub."""


class GrantAuthority:
    """Connections are their CURVE keys, with the rights of the keys' grants."""

    mode = "curve"

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self._lock = threading.Lock()

    def refresh(self, grants: Iterable[Grant]) -> None:
        """Take the grants now in force; a key without one is refused from now on."""
        fresh = {grant.public_key: grant for grant in grants}
        with self._lock:
            self._grants = fresh

    def allowed(self, key: bytes) -> bool:
        """Whether the key has a grant now."""
        return key.decode("ascii", "replace") in self._grants

    def access(self, user_id: str | None) -> Access | None:
        """The access of the key's grant, or None when the key has none (now)."""
        grant = self._grants.get(user_id or "")
        if grant is None:
            return None
        return Access(principal=grant.principal, grant=grant, key=grant.public_key)


def no_grant() -> AccessRefusedError:
    """The refusal of a key that has no grant now (revoked, its principal erased)."""
    return AccessRefusedError("", "", "read", "use this hub")


def in_force(access: Access, grant: Grant | None) -> Access:
    """``access`` as its key's grant stands now: ``grant``, just looked up for its key.

    A keyless hub's access is the operator's and is returned as it is. A key granted
    anew keeps the connection with the new grant's principal and rights.

    Raises:
        AccessRefusedError: the key has no grant now (``grant`` is None).
    """
    if access.grant is None:
        return access
    if grant is None:
        raise no_grant()
    if grant is access.grant or grant == access.grant:
        return access
    return Access(principal=grant.principal, grant=grant, key=grant.public_key)


#: A scope no grant reads: a body about a lesson no longer known is withheld.
_UNREADABLE = "\x00unknown lesson"


def body_scope(scope: str, kind: str, body: bytes,
               lesson_scope: Callable[[UUID], str | None],
               delta_scope: Callable[[UUID], str | None] | None = None) -> str:
    """The project whose read grant a body needs.

    Most events carry their project in their envelope. Some about one lesson or one
    skill delta do not (a retirement with a person's note, a promotion, a delta's
    rejection with its reason): their envelope scope is empty, which would read as
    ledger-wide; they need the lesson's or the delta's own scope, and one no longer
    known (erased), or a delta without ``delta_scope`` to look it up, is read by no one.

    Args:
        scope: the envelope's scope.
        kind: the envelope's event tag.
        body: the body bytes.
        lesson_scope: the current scope of a lesson, None when unknown.
        delta_scope: the scope of a skill delta, None when unknown.
    """
    if scope:
        return scope
    lookup: Callable[[UUID], str | None] | None
    if kind in NAMES_A_LESSON:
        subject, lookup = getattr(decode_event(body), "lesson_id", None), lesson_scope
    elif kind in NAMES_A_DELTA:
        subject, lookup = getattr(decode_event(body), "delta_id", None), delta_scope
    else:
        return scope
    found = lookup(subject) if isinstance(subject, UUID) and lookup is not None else None
    return _UNREADABLE if found is None else found


def may_read(access: Access, project: str) -> bool:
    """Whether ``access`` may read ``project`` (global lessons come with any grant)."""
    return authorization.may_read(access.grant, project) if access.grant is not None else True


def require_read(access: Access, project: str) -> None:
    """Refuse unless ``access`` may read ``project``.

    Raises:
        AccessRefusedError: it may not.
    """
    if access.grant is not None:
        authorization.require_read(access.grant, project)


def require_write(access: Access, project: str) -> None:
    """Refuse unless ``access`` may write ``project`` (``global`` needs its own grant).

    Raises:
        AccessRefusedError: it may not.
    """
    if access.grant is not None:
        authorization.require_write(access.grant, project)


def require_own_principal(access: Access, given: str) -> None:
    """Refuse a request naming a principal other than its connection's (a spoof).

    Raises:
        InvalidCommandError: ``given`` is set and is not the connection's principal.
    """
    if given and given != access.principal:
        msg = (f"the principal is the one bound to the connection's key "
               f"({access.principal!r}), not {given!r}; leave it out")
        raise InvalidCommandError(msg, "$.principal")


def bound_to_caller(command: Any, principal: str) -> Any:
    """``command`` as the caller bound to ``principal`` sends it.

    A command's ``principal`` is whose it is, so the caller's own. A grant is the one
    exception: there ``principal`` is the grantee, which the admin names; the caller is
    the grant's ``actor``, so the record says which admin granted it. An ``actor`` that
    is not a role (``agent``, ``policy``, ``ledger``) names a person, whose data the
    record then is (an erasure of that principal takes it, an export of them shows it):
    a caller can name only itself, so any other is replaced by its principal.
    """
    if isinstance(command, GrantAccess):
        return msgspec.structs.replace(command, actor=principal)
    actor = getattr(command, "actor", None)
    if isinstance(actor, str) and actor not in ROLE_ACTORS:
        return msgspec.structs.replace(command, principal=principal, actor=principal)
    return msgspec.structs.replace(command, principal=principal)


def require_admin(access: Access, what: str = "erase, grant or reconcile") -> None:
    """Refuse unless ``access`` is an admin's.

    Raises:
        AccessRefusedError: it is not.
    """
    if access.grant is not None:
        authorization.require_admin(access.grant, what)
    elif not access.admin:
        raise AccessRefusedError(access.principal, "", "admin", what)


def authorize_command(access: Access, command: Any,
                      lesson_scope: Callable[[UUID], str | None]) -> None:
    """Refuse a command ``access``'s grant does not cover (the hub's and a push's rule).

    An outcome or a proposal needs a write grant on its project, an environment change
    one on its scope, an edit or a retirement one on the lesson's own scope (an unknown
    lesson is refused by the command itself), the record of a session's skill resolution
    one on its scope (it records a read, as a recall does); everything else (reconcile,
    the other skill commands and the access commands) acts ledger-wide and needs admin.

    Raises:
        AccessRefusedError: the grant does not cover it.
    """
    match command:
        case ObserveOutcome() | ProposeLesson():
            require_write(access, command.project)
        case DeclareEnvironmentChange() | RecordResolution():
            require_write(access, command.scope)
        case EditLesson() | RetireLesson():
            scope = lesson_scope(command.lesson_id)
            if scope is not None:
                require_write(access, scope)
        case _:
            require_admin(access)


def authorize_event(access: Access, event: Any,
                    lesson_scope: Callable[[UUID], str | None]) -> None:
    """Refuse a raw event ``access``'s grant does not cover.

    An event only a command needing admin decides (a delta's approval or rejection, a
    skill's registration, a fact, a reconcile: ``needs_admin`` in the catalogue) needs
    admin, as that command does. Any other needs a write grant on the project its body
    names (``global`` when it names none), and on the own scope of every known lesson it
    names, by whatever field (``lesson_id``, ``lesson_ids``, a merge's ``merged``, a
    supersession's ``by``, a proposal's ``supersedes``), and on the project a demotion
    moves a lesson to: naming one's own project does not make another project's lesson
    one's own.

    Raises:
        AccessRefusedError: the grant does not cover it.
    """
    if type(event).needs_admin:
        require_admin(access, f"submit a {tag_of(type(event))} event (its command needs "
                              "admin)")
        return
    scope = str(getattr(event, "scope", "") or getattr(event, "project", ""))
    require_write(access, scope or "global")
    to_scope = getattr(event, "to_scope", "")
    if to_scope:  # a demotion moves the lesson into that project
        require_write(access, to_scope)
    for lesson_id in named_lessons(event):
        found = lesson_scope(lesson_id)
        if found is not None and found != scope:
            require_write(access, found)


def named_lessons(event: Any) -> list[UUID]:
    """Every lesson id an event's body names, in any field that holds one."""
    named: list[Any] = [getattr(event, "lesson_id", None), getattr(event, "by", None),
                        getattr(event, "supersedes", None),
                        *getattr(event, "lesson_ids", ()), *getattr(event, "merged", ())]
    return [i for i in named if isinstance(i, UUID)]


def may_read_body(access: Access, scope: str, kind: str, body: bytes,
                  lesson_scope: Callable[[UUID], str | None],
                  delta_scope: Callable[[UUID], str | None] | None = None) -> bool:
    """Whether ``access`` may be sent a body (``kind``: its tag, ``scope``: its envelope's).

    A grant's or a revocation's body (``names_a_key``) names a key, its principal and
    rights: only an admin, and the key's own holder, are sent it. Any other body goes
    where its project (:func:`body_scope`) may be read.
    """
    if kind in NAMES_A_KEY:
        if (access.admin and access.grant is None) or (
                access.grant is not None and access.grant.admin):
            return True
        return bool(access.key) and getattr(decode_event(body), "public_key", "") == access.key
    return may_read(access, body_scope(scope, kind, body, lesson_scope, delta_scope))
