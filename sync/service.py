"""The hub's side of sync, without sockets: one request's bytes in, its reply out.

:class:`SyncService` answers every request of :mod:`lessonledger.sync.protocol` from a
hub's :class:`~lessonledger.commands.ledger.Ledger`. It keeps no state between requests,
so any transport can mount it: call :meth:`SyncService.handle` with the frame, the
peer's name and, where the transport's authority decided it, the peer's grant.
``lessonledger serve`` mounts it on the hub's writer (:mod:`lessonledger.sync.hub`).

What it never does: send a body an erasure named (tombstones are checked on every
fetch, besides the bodies being gone), send a body the peer may not read, answer a
``have`` that is not a prefix of its log, or accept a pushed command for a principal or
session erased after the replica made it.

With ``authorize`` the peer is the Z85 public key the connection authenticated with
(CURVE), and its grant (``ReadSide.grant_for``) is looked up afresh on every request, so
a revocation counts at once, on established sessions too: no grant, no answer. Bodies
then travel only for projects the grant may read (and global ones); the replica is named
by its key's name, and a pushed command is the key's principal's, whatever it says, and
needs a write grant on its project.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast
from uuid import UUID

import msgspec
from lessonledger.commands.errors import CommandError
from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import AnyCommand, decode_pushed
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.envelope import ROLE_ACTORS, SALT_BYTES, Envelope, decode_envelope
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.ledger.events import (
    ERASED,
    ERASURE_ACKNOWLEDGED,
    SNAPSHOT_TAKEN,
    AnyEvent,
    ErasureAcknowledged,
)
from lessonledger.ledger.objects import (
    SEGMENT_SIZE,
    merkle_root,
    segment_id,
    segment_of,
)
from lessonledger.projections.access import Grant
from lessonledger.projections.objects import ObjectView
from lessonledger.projections.runner import Runner
from lessonledger.projections.views import object_view
from lessonledger.sync.authority import (
    Access,
    authorize_command,
    bound_to_caller,
    may_read_body,
    require_own_principal,
)
from lessonledger.sync.errors import ProtocolError
from lessonledger.sync.protocol import (
    MAX_FETCH_SEGMENTS,
    Ack,
    Acked,
    Chunk,
    Fetch,
    FetchMany,
    Hello,
    Ids,
    Push,
    Pushed,
    PushResult,
    Refs,
    Refused,
    Reply,
    Request,
    SegmentIds,
    decode_request,
    encode,
)
from lessonledger.sync.state import excused, stored_later_erasures
from lessonledger.sync.wire import MAX_BATCH_COMMANDS

__all__ = ["BODY_BUDGET", "Readable", "SyncService"]

#: Bodies per chunk stop being added past this many bytes; the replica asks for the rest.
BODY_BUDGET = 8 << 20
#: Bodies every replica gets whatever its grants: they hold no one's content.
_ALWAYS_SENT = frozenset({ERASED, SNAPSHOT_TAKEN, ERASURE_ACKNOWLEDGED})

#: Whether the peer (by name) may read an envelope's body.
Readable = Callable[[str, Envelope], bool]


def _everything(peer: str, envelope: Envelope) -> bool:
    return True


class SyncService:
    """Answers sync requests from a hub's ledger.

    Args:
        ledger: the hub's ledger (the only writer of its log).
        may_read: whether a peer may read a body; every body when omitted.
    """

    def __init__(self, ledger: Ledger, *, may_read: Readable | None = None,
                 authorize: bool = False) -> None:
        self.ledger = ledger
        self.may_read = may_read or _everything
        self.authorize = authorize

    def handle(self, frame: bytes, peer: str = "", grant: Grant | None = None,
               access: Access | None = None) -> list[bytes]:
        """The reply frames to one request frame.

        Exactly one, but for a :class:`FetchMany` answered: one chunk per segment.

        ``grant`` is the peer's grant as the transport's authority decided it (the
        hub's): bodies are filtered and pushes stamped by it, as with ``authorize``.
        ``access`` is a keyless hub's (its ``--principal``, ``--no-admin``): a push is
        then that principal's, as the hub's own commands are, and a command naming
        another, or needing admin the hub does not give, is refused.
        """
        try:
            request = decode_request(frame)
        except ProtocolError as e:
            return [encode(Refused("malformed", str(e)))]
        if grant is None and self.authorize:
            grant = self.ledger.grant_for(peer)
            if grant is None:
                return [encode(Refused("unknown key", (
                    "this key has no grant at the hub (revoked, or never granted); ask an "
                    "admin for `lessonledger access grant`")))]
        if grant is not None:
            request = _as_key(request, grant)
        try:
            if isinstance(request, Hello):
                bound = grant.principal if grant is not None else (
                    access.principal if access is not None else "")
                reply: Reply = self._hello(request, bound)
            elif isinstance(request, SegmentIds):
                reply = Ids(request.start, self._segment_ids(request.upto)[request.start:])
            elif isinstance(request, Fetch):
                reply = self._fetch(request, peer, grant, access)
            elif isinstance(request, FetchMany):
                chunks = self._fetch_many(request, peer, grant, access)
                if not isinstance(chunks, Refused):
                    return [encode(chunk) for chunk in chunks]
                reply = chunks
            elif isinstance(request, Push):
                reply = self._push(request, grant, access)
            else:
                reply = self._ack(request)
        except LessonLedgerError as e:
            reply = Refused("refused", str(e))
        return [encode(reply)]

    def _objects(self) -> ObjectView:
        self.ledger.catch_up()
        return object_view(self.ledger.runner)

    def _hello(self, hello: Hello, principal: str = "") -> Reply:
        view = self._objects()
        if hello.have > view.position or (
                hello.have and self.ledger.log.link_at(hello.have) != hello.link):
            return Refused("diverged", (
                f"replica {hello.replica!r} holds a log that is not a prefix of the hub's "
                f"(at position {hello.have}); clone it afresh"))
        ids = view.segment_ids()
        return Refs(head=view.position, link=view.link, root=merkle_root(ids),
                    segments=len(ids), erasures=[e.position for e in view.erasures],
                    refs=view.refs, erased=sorted(excused(self.ledger.log.home)[1]),
                    principal=principal)

    def _segment_ids(self, upto: int) -> list[bytes]:
        """The segment ids of the log up to position ``upto`` (0: all of it).

        A pull asks for those of the head its hello was answered with: whatever was
        committed since would change the open segment's id, and the ids would not hash
        to the root that answer named. The closed segments up to there are the view's;
        a segment ``upto`` cuts is hashed from the log.
        """
        view = self._objects()
        if not upto or upto >= view.position:
            return view.segment_ids()
        full = upto // SEGMENT_SIZE
        ids = view.closed_ids[:full]
        if upto % SEGMENT_SIZE:
            stored, _ = self.ledger.log.stored(full * SEGMENT_SIZE + 1, upto)
            ids.append(segment_id(stored))
        return ids

    def _fetch(self, fetch: Fetch, peer: str, grant: Grant | None,
               access: Access | None = None) -> Reply:
        view = self._objects()
        if fetch.stop > view.position or fetch.stop < fetch.start \
                or segment_of(fetch.start) != segment_of(fetch.stop):
            return Refused("range", (
                f"positions {fetch.start}-{fetch.stop} are not within one segment of the "
                f"hub's log (head {view.position})"))
        return self._chunk(fetch.start, fetch.stop, view, peer, grant, BODY_BUDGET,
                           excused(self.ledger.log.home), access)

    def _chunk(self, start: int, stop: int, view: ObjectView, peer: str,
               grant: Grant | None, budget: int,
               hub_excused: tuple[frozenset[int], frozenset[int]],
               access: Access | None = None) -> Chunk:
        """Positions ``start`` to ``stop`` of one segment, bodies up to ``budget``.

        A hub that is a checkout (or a partial replica's) lacks bodies no record of its
        log explains (``hub_excused``: withheld, erased later): they are passed on as what
        they are, so its replicas verify.
        """
        stored, kept = self.ledger.log.stored(start, stop)
        hub_withheld, hub_erased = hub_excused
        # The peer as the body checks see it: its grant's key decides whose grants it
        # gets; a keyless hub's peer without admin gets no grant's body.
        reader = (Access(principal=grant.principal, grant=grant, key=grant.public_key)
                  if grant is not None else
                  access if access is not None and not access.admin else None)
        everything = self.may_read is _everything and reader is None
        if everything and None not in kept:
            every = cast(list[bytes], kept)
            if sum(map(len, every)) <= budget and not view.tombstoned_within(start, stop):
                # The usual segment: every body there and sent, none needs a look.
                return Chunk(start, stored, every)
        bodies: list[bytes] = []
        withheld: list[int] = []
        erased: list[int] = []
        tombstoned = view.is_tombstoned
        for position, (envelope_bytes, body) in enumerate(zip(stored, kept, strict=True),
                                                          start):
            sent = b""
            if body is None and position in hub_erased:
                erased.append(position)
            elif body is None and position in hub_withheld:
                withheld.append(position)
            if body is not None and not tombstoned(position):
                if everything:
                    sent = body
                else:
                    envelope = decode_envelope(envelope_bytes)
                    if envelope.type in _ALWAYS_SENT or (
                            self.may_read(peer, envelope)
                            and (reader is None or may_read_body(
                                reader, envelope.scope, envelope.type, body[SALT_BYTES:],
                                self._lesson_scope, self.ledger.delta_scope))):
                        sent = body
                    else:
                        withheld.append(position)
            if bodies and len(sent) > budget:
                break  # the replica asks for the rest
            budget -= len(sent)
            bodies.append(sent)
        envelopes = stored[:len(bodies)]
        return Chunk(start, envelopes, bodies, withheld, erased)

    def _fetch_many(self, fetch: FetchMany, peer: str, grant: Grant | None,
                    access: Access | None = None) -> list[Chunk] | Refused:
        """One chunk per segment of the range, each as a :class:`Fetch` of it is answered.

        Past :data:`BODY_BUDGET` for them all, each further chunk holds one record (its
        body, if any): the replica asks for the rest, as of a chunk cut short.
        """
        view = self._objects()
        first, last = segment_of(fetch.start), segment_of(fetch.stop)
        if fetch.stop > view.position or fetch.stop < fetch.start \
                or last - first >= MAX_FETCH_SEGMENTS:
            return Refused("range", (
                f"positions {fetch.start}-{fetch.stop} are not within "
                f"{MAX_FETCH_SEGMENTS} segments of the hub's log (head {view.position})"))
        chunks: list[Chunk] = []
        budget = BODY_BUDGET
        start = fetch.start
        # Read once for the whole range, as the log was caught up once above.
        hub_excused = excused(self.ledger.log.home)
        while start <= fetch.stop:
            stop = min((segment_of(start) + 1) * SEGMENT_SIZE, fetch.stop)
            reply = self._chunk(start, stop, view, peer, grant, max(budget, 0), hub_excused,
                                access)
            budget -= sum(map(len, reply.bodies))
            chunks.append(reply)
            start = stop + 1
        return chunks

    def _lesson_scope(self, lesson_id: UUID) -> str | None:
        row = self.ledger.view.lessons.get(lesson_id)
        return None if row is None else row.scope

    def _push(self, push: Push, grant: Grant | None, keyless: Access | None = None
              ) -> Reply:
        view = self._objects()
        if len(push.based_on) != len(push.commands):
            return Refused("malformed", "a push needs one based-on position per command")
        if len(push.commands) > MAX_BATCH_COMMANDS:
            return Refused("too large", (
                f"a push of {len(push.commands)} commands is over the hub's limit of "
                f"{MAX_BATCH_COMMANDS} per push (one push holds the hub's single writer); "
                f"nothing was written: push at most {MAX_BATCH_COMMANDS} at a time "
                "(`lessonledger push` does)"))
        if grant is not None:
            # The grant the hub let this key in with may predate what another process just
            # wrote (a revoke, a principal's erasure), folded above: decide by the current.
            current = {g.public_key: g for g in self.ledger.grants()}.get(grant.public_key)
            if current is None:
                return Refused("unknown key", (
                    f"the grant of key {grant.key_name!r} was revoked or erased; nothing "
                    "was written: ask an operator for a grant (`lessonledger access grant`)"))
            grant = current
        # A hub restored from a checkout: erasures after its snapshot, at their
        # positions in the log the snapshot was taken from.
        later_erasures = stored_later_erasures(self.ledger.log.home)
        results: list[PushResult | None] = []
        #: The commands to decide, each with its place in ``results``.
        todo: list[tuple[int, AnyCommand]] = []
        for based_on, line in zip(push.based_on, push.commands, strict=True):
            erased = {(row.what, row.subject) for row in view.erasures
                      if row.position > based_on} | {
                (what, subject) for what, subject, at in later_erasures if at > based_on}
            try:
                command = decode_pushed(line)
            except (msgspec.DecodeError, msgspec.ValidationError, CommandError) as e:
                results.append(PushResult("", refused=f"not a command: {e}"))
                continue
            if grant is not None and based_on < grant.principal_since:
                # Made while the key was another principal's (or had no grant): written
                # now, it would be the current principal's, and erasing the one whose
                # content it is would leave it.
                results.append(PushResult(command.key, refused=(
                    f"this command was made (at position {based_on} of the replica) "
                    f"before key {grant.key_name!r} was {grant.principal!r}'s (from "
                    f"position {grant.principal_since}); it is not written as theirs")))
                continue
            if grant is not None:
                # The key's principal, never one the replica names: checked against the
                # erasures below, and the one the hub writes.
                command = bound_to_caller(command, grant.principal)
            elif keyless is not None:
                # A keyless hub's connections are all its principal: a command naming
                # another is refused, as one sent to the hub directly is.
                try:
                    require_own_principal(keyless, command.principal)
                except CommandError as e:
                    results.append(PushResult(command.key, refused=str(e)))
                    continue
                command = bound_to_caller(command, keyless.principal)
            # Whose the command is: its principal, and its actor when a person (an
            # erasure of a principal takes what it wrote as actor too).
            named = [("principal", command.principal), ("session", command.session)]
            if command.actor not in ROLE_ACTORS:
                named.append(("principal", command.actor))
            gone = [f"{what} {subject!r}" for what, subject in named
                    if subject and (what, subject) in erased]
            if gone:
                results.append(PushResult(command.key, refused=(
                    f"{gone[0]} was erased after this command was made (at position "
                    f"{based_on} of the replica); it is not accepted back")))
                continue
            results.append(None)
            todo.append((len(results) - 1, command))
        if todo:
            decided = self._decide(todo, grant, keyless)
            for (slot, command), result in zip(todo, decided, strict=True):
                results[slot] = (PushResult(command.key, positions=result.positions)
                                 if isinstance(result, Receipt)
                                 else PushResult(command.key, refused=str(result)))
        return Pushed([result for result in results if result is not None])

    def _decide(self, todo: list[tuple[int, AnyCommand]], grant: Grant | None,
                keyless: Access | None = None) -> list[Receipt | LessonLedgerError]:
        """The pushed commands decided in order, in one group commit (one fsync).

        Each as :meth:`Ledger.execute` would decide it then, a refused one leaving
        nothing of its own; with a grant, each needs what the hub's own rule asks
        (:func:`authorize_command`), checked inside the transaction.
        """
        access = keyless if grant is None else Access(principal=grant.principal, grant=grant,
                                                      key=grant.public_key)

        def admit(index: int, command: Any) -> Any:
            if access is not None:
                authorize_command(access, command, self._lesson_scope)
            return command

        return self.ledger.execute_each([command for _, command in todo], admit=admit)

    def _ack(self, ack: Ack) -> Reply:
        def decide(runner: Runner) -> Sequence[AnyEvent]:
            rows = [r for r in object_view(runner).erasures if r.position == ack.erasure]
            if not rows:
                msg = f"no erasure at position {ack.erasure} of the hub's log"
                raise ProtocolError(msg)
            if ack.replica in rows[0].acked_by:
                return []
            return [ErasureAcknowledged(erasure=ack.erasure, replica=ack.replica)]

        positions = self.ledger.record(decide)
        return Acked(ack.erasure, positions[0] if positions else 0)


def _as_key(request: Request, grant: Grant) -> Request:
    """The request with the replica named by its key's name, not by what it says.

    An acknowledgement names the replica within its key: one key may clone several
    (a laptop and its backup), and each must acknowledge an erasure for itself, or the
    first would answer for a copy that still holds what was erased. A key can only ever
    acknowledge under its own name.
    """
    if isinstance(request, Ack):
        own = request.replica.strip()
        named = grant.key_name if own in ("", grant.key_name) else (
            f"{grant.key_name} ({own})")
        return msgspec.structs.replace(request, replica=named[:200])
    if isinstance(request, Hello | Push):
        return msgspec.structs.replace(request, replica=grant.key_name)
    return request
