"""The access view: which client keys may connect to the hub, as whom, allowed what.

Folds ``AccessGranted`` and ``AccessRevoked``. Each public key has a stream of its own
(:func:`key_stream`), so a new grant for a key replaces its previous one whole, and the
stream's versions order them.

An access event whose body was erased (erasing the principal the key was granted to
takes it) ends the key's grant where it stands, like a revocation: an erasure never
brings back a grant that a later, now erased, event had replaced or revoked.
"""

from __future__ import annotations

from hashlib import sha256
from typing import ClassVar
from uuid import UUID

import msgspec
from lessonledger.ledger.events import (
    ACCESS_GRANTED,
    NAMES_A_KEY,
    AccessGranted,
    AnyEvent,
    decode_event,
)
from lessonledger.ledger.log import Record
from lessonledger.projections.state_view import StateCodec, StateView

__all__ = ["AccessView", "Grant", "key_stream"]

_NAMESPACE = b"lessonledger access key stream\x00"


def key_stream(public_key: str) -> UUID:
    """The stream of a public key's grants and revocations: a hash of the key."""
    return UUID(bytes=sha256(_NAMESPACE + public_key.encode()).digest()[:16], version=4)


class Grant(msgspec.Struct, frozen=True, kw_only=True):
    """A key's current grant.

    Attributes:
        key_name: the name it was granted under (its file's, ``NAME.key``).
        public_key: the client's CURVE public key, Z85 (40 characters).
        principal: whose key it is: the principal on every event the hub writes for it.
        read: the projects whose lessons it may read (global lessons: any grant).
        write: the projects it may write to.
        admin: may erase and grant.
        granted_at: the position of the ``AccessGranted`` in force.
        principal_since: the position from which the key has been this principal's
            without a break (its first grant to them since it was another's, revoked
            or erased); 0 in a view saved before this was kept.
    """

    key_name: str
    public_key: str
    principal: str
    read: frozenset[str]
    write: frozenset[str]
    admin: bool
    granted_at: int
    principal_since: int = 0


class _Row(msgspec.Struct, kw_only=True):
    key_name: str
    public_key: str
    principal: str
    read: list[str]
    write: list[str]
    admin: bool
    granted_at: int
    principal_since: int = 0


class _State(msgspec.Struct, kw_only=True):
    position: int = 0
    #: The current grant of each key, by its stream.
    grants: dict[str, _Row] = {}
    #: Each key stream's next version (erased events count: their envelopes stay).
    versions: dict[str, int] = {}
    #: When each revoked key name was last revoked (for a refusal that says so).
    revoked: dict[str, int] = {}


class AccessView(StateView[_State]):
    """The view; a grant is looked up by public key or by key name."""

    _codec = StateCodec(_State, deterministic=True)

    def __init__(self) -> None:
        self._s = _State()
        self._by_key: dict[str, Grant] = {}
        #: Counts the folds that may have changed a grant: a hub sends its grants on
        #: only when this moved, rather than encode them all after every batch.
        self.changes = 0

    def _loaded(self) -> None:
        self._index()

    def grant_for(self, public_key: str) -> Grant | None:
        """The key's current grant, or None when it has none (never, revoked, erased)."""
        return self._by_key.get(public_key)

    def named(self, key_name: str) -> Grant | None:
        """The current grant under ``key_name``, or None."""
        return next((g for g in self._by_key.values() if g.key_name == key_name), None)

    def revoked_at(self, key_name: str) -> int | None:
        """Where ``key_name`` was last revoked, or None."""
        return self._s.revoked.get(key_name)

    def grants(self) -> list[Grant]:
        """Every current grant, by key name."""
        return sorted(self._by_key.values(), key=lambda g: (g.key_name, g.public_key))

    def allowed_keys(self) -> frozenset[str]:
        """The public keys (Z85) that may connect now."""
        return frozenset(self._by_key)

    def next_version(self, public_key: str) -> int:
        """The version the key's stream takes next (what a grant or revoke is written at)."""
        return self._s.versions.get(str(key_stream(public_key)), 0)

    #: The types it folds (the runner hands it no other record) and whose bodies it reads.
    folds: ClassVar[frozenset[str] | None] = NAMES_A_KEY
    reads: ClassVar[frozenset[str]] = NAMES_A_KEY
    decodes: ClassVar[frozenset[str]] = NAMES_A_KEY

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        envelope = record.envelope
        self._s.position = envelope.position
        if envelope.type not in NAMES_A_KEY:
            return
        self.changes += 1
        stream = str(envelope.stream_id)
        self._s.versions[stream] = max(self._s.versions.get(stream, 0), envelope.version + 1)
        old = self._s.grants.pop(stream, None)
        if old is not None:
            self._by_key.pop(old.public_key, None)
        if record.payload is None:
            return  # erased: the grant ends here (see the module docstring)
        if event is None:
            event = decode_event(record.payload)  # refused as it always was
        if envelope.type == ACCESS_GRANTED and isinstance(event, AccessGranted):
            row = _Row(key_name=event.key_name, public_key=event.public_key,
                       principal=event.principal, read=sorted(set(event.read)),
                       write=sorted(set(event.write)), admin=event.admin,
                       granted_at=envelope.position,
                       principal_since=old.principal_since if old is not None
                       and old.principal == event.principal else envelope.position)
            self._s.grants[stream] = row
            self._s.revoked.pop(event.key_name, None)
            self._by_key[row.public_key] = _grant(row)
        elif old is not None:
            self._s.revoked[old.key_name] = envelope.position

    def _index(self) -> None:
        self.changes += 1
        self._by_key = {row.public_key: _grant(row) for row in self._s.grants.values()}


def _grant(row: _Row) -> Grant:
    return Grant(key_name=row.key_name, public_key=row.public_key, principal=row.principal,
                 read=frozenset(row.read), write=frozenset(row.write), admin=row.admin,
                 granted_at=row.granted_at, principal_since=row.principal_since)
