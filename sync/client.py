"""A hub's client with the local API: change one argument to move an agent to a hub.

    from lessonledger.sync import open_ledger

    with open_ledger("tcp://hub.example:7650", key="me.key_secret",
                     server_key="hub.key") as ledger:
        ledger.observe_outcome(key="task-41", project=digest, passed=True, operations=[...])
        for lesson in ledger.lessons(digest, session="s-2"):
            print(lesson.text)

:class:`RemoteLedger` has the local :class:`~lessonledger.commands.ledger.Ledger`'s
command and query methods with the same arguments and return types, and raises the
same error classes (a refusal travels as data and is rebuilt here, :mod:`.wire`).

Retries are safe: every command carries its idempotency key, so a command resent after
a timeout, a reconnect or a hub restart returns the receipt of the first. A request is
resent on a fresh socket when no reply comes within ``timeout``, and after the hub's
``busy`` once it said how long to wait, until ``deadline`` seconds have passed; then
:class:`HubUnavailableError`. A query is resent as well: what it records (a recall's
``LessonRecalled``) may then be recorded twice, which moves a usage clock, nothing else.

``ledger.skills`` is :class:`RemoteSkills`: the local ``skills`` commands and queries
(not its live ``view`` and ``facts``), the deltas and facts of the projects the key may
read.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

import msgspec
import zmq
from lessonledger.commands.access import AccessCommand
from lessonledger.commands.audit import Why
from lessonledger.commands.erasure import Erasure
from lessonledger.commands.messages import (
    AnyCommand,
    Erase,
    command_from,
)
from lessonledger.commands.recall import Check
from lessonledger.commands.receipts import Receipt
from lessonledger.commands.skill_errors import UNRESOLVABLE, DeltaRefusedError
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.commands.skills import ListedFact, SkillVerbs, resolution_record
from lessonledger.commands.verbs import CommandVerbs
from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.errors import LedgerClosedError, LedgerConfigError, LessonLedgerError
from lessonledger.ledger.log import Record
from lessonledger.projections.deltas import BaseRow, DeltaRow
from lessonledger.projections.facts import FactRow
from lessonledger.projections.lesson_rows import LessonRow
from lessonledger.projections.outcome_stats import ProjectStats
from lessonledger.projections.recall import Recall
from lessonledger.projections.resolution import DEFAULT_BUDGET, EffectiveSkill
from lessonledger.sync import wire
from lessonledger.sync.endpoints import check_hub_address
from lessonledger.sync.keys import load_public, load_secret

__all__ = ["HubUnavailableError", "RemoteLedger", "RemoteSkills", "is_remote"]

T = TypeVar("T")

#: Seconds to wait for one reply before resending on a fresh socket.
DEFAULT_TIMEOUT = 10.0
#: Seconds to keep retrying one request before giving up.
DEFAULT_DEADLINE = 120.0
#: Times a session's first resolution is resolved and recorded before its refusal is
#: passed on: each refusal means a delta it named was decided in between.
_RECORD_TRIES = 3


class HubUnavailableError(LessonLedgerError):
    """No reply from the hub within the deadline; a command may or may not have landed.

    Send it again with the same key once the hub is back: it is written at most once.
    """

    def __init__(self, endpoint: str, seconds: float) -> None:
        super().__init__(f"no reply from the hub at {endpoint} within {seconds:.0f} s; "
                         "check that `lessonledger serve` runs there, then retry with the "
                         "same key (a retried command is written once)")
        self.endpoint = endpoint


def is_remote(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a hub (``tcp://``, ``ipc://``) rather than a home path."""
    return isinstance(target, str) and target.startswith(("tcp://", "ipc://"))


def _load_keys(key: str | os.PathLike[str] | None, server_key: str | os.PathLike[str] | None
               ) -> tuple[bytes, bytes, bytes] | None:
    """This client's key pair and the hub's public key, or None for a keyless hub.

    Raises:
        LedgerConfigError: one of the two is given without the other.
        KeyFileError: a key file is missing or malformed.
    """
    if key is None and server_key is None:
        return None
    if key is None or server_key is None:
        msg = ("CURVE needs both key= (your NAME.key_secret file) and server_key= (the "
               "hub's public key file)")
        raise LedgerConfigError(msg)
    public, secret = load_secret(key)
    return public, secret, load_public(server_key)


class RemoteLedger(CommandVerbs):
    """A hub seen through the local ledger's API (see the module doc).

    Args:
        endpoint: the hub's ROUTER endpoint, ``tcp://host:7650``.
        key: this client's CURVE secret key file (``NAME.key_secret``).
        server_key: the hub's public key file; both or neither.
        timeout: seconds to wait for one reply before resending.
        deadline: seconds to keep retrying one request.
        context: the ZeroMQ context (the process's shared one when omitted).
    """

    def __init__(self, endpoint: str, *, key: str | os.PathLike[str] | None = None,
                 server_key: str | os.PathLike[str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, deadline: float = DEFAULT_DEADLINE,
                 context: zmq.Context[Any] | None = None) -> None:
        check_hub_address(endpoint)  # ZeroMQ would raise a bare ZMQError at connect
        self.endpoint = endpoint
        self.home = endpoint
        self._keys = _load_keys(key, server_key)
        self._timeout = timeout
        self._deadline = deadline
        self._context = context or zmq.Context.instance()
        self._ids = itertools.count(random.getrandbits(40) + 1)
        self._socket: zmq.Socket[Any] | None = None
        self._closed = False
        #: Skill bases, their deltas and tier-0 facts, on the hub.
        self.skills = RemoteSkills(self)

    # -- the transport -------------------------------------------------------------------

    def _secure(self, sock: zmq.Socket[Any]) -> None:
        if self._keys is not None:
            public, secret, server = self._keys
            sock.curve_publickey = public
            sock.curve_secretkey = secret
            sock.curve_serverkey = server

    def _connect(self) -> zmq.Socket[Any]:
        if self._closed:
            # As a local ledger: a closed one says so rather than quietly reconnecting.
            raise LedgerClosedError(self.endpoint)
        if self._socket is None:
            sock = self._context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, wire.MAX_REPLY_BYTES)
            self._secure(sock)
            sock.connect(self.endpoint)
            self._socket = sock
        return self._socket

    def _drop_socket(self) -> None:
        if self._socket is not None:
            self._socket.close(0)
            self._socket = None

    def call(self, body: msgspec.Struct) -> msgspec.Struct:
        """Send one request and return the hub's reply body; refusals are raised.

        Raises:
            LessonLedgerError: the hub refused it (the same class as in-process).
            WireError: ``oversize``: the request is over the frame limit (nothing sent).
            HubUnavailableError: no reply within the deadline.
        """
        request = next(self._ids)
        data = wire.encode_frame(body, request)
        if len(data) > wire.MAX_FRAME_BYTES:
            # Refused here: far over the limit, libzmq at the hub drops it unseen and cuts
            # the connection, and every retry until the deadline would go the same way.
            wire.decode_frame(data)  # raises the hub's own refusal, ``oversize``
        started = time.monotonic()
        while True:
            sock = self._connect()
            sock.send(data)
            waited = self._wait(sock, request, started)
            if waited is None:
                # No reply in time: a fresh socket, the same request (it is idempotent).
                self._drop_socket()
                if time.monotonic() - started > self._deadline:
                    raise HubUnavailableError(self.endpoint, self._deadline)
                continue
            if isinstance(waited, wire.Busy):
                time.sleep(waited.retry_after_ms / 1000 * random.uniform(1, 2))
                if time.monotonic() - started > self._deadline:
                    raise HubUnavailableError(self.endpoint, self._deadline)
                continue
            if isinstance(waited, wire.Refused):
                raise wire.refusal_error(waited)
            return waited

    def _wait(self, sock: zmq.Socket[Any], request: int, started: float
              ) -> msgspec.Struct | None:
        """The reply to ``request``, skipping stale replies; None after the timeout."""
        until = min(time.monotonic() + self._timeout, started + self._deadline)
        while (left := until - time.monotonic()) > 0:
            if not sock.poll(int(left * 1000) + 1, zmq.POLLIN):
                return None
            frame = wire.decode_frame(sock.recv(), limit=wire.MAX_REPLY_BYTES)
            if frame.id not in (request, 0):
                continue  # the answer to an earlier try, after its resend
            reply: msgspec.Struct = wire.decode_body(frame)
            if frame.id == 0 and not isinstance(reply, wire.Refused):
                continue
            return reply
        return None

    def _answer(self, name: str, kind: type[T], **args: Any) -> T:
        query = name
        reply = self.call(wire.QueryRequest(query, args))  # type: ignore[arg-type]
        if not isinstance(reply, wire.Answer):
            msg = f"the hub answered a {query} query with {type(reply).__name__}"
            raise wire.WireError(msg, "kind")
        try:
            return msgspec.msgpack.decode(reply.value, type=kind)
        except msgspec.ValidationError as e:
            msg = f"the hub's answer to {query} does not fit ({e})"
            raise wire.WireError(msg, "garbage") from e

    # -- commands ------------------------------------------------------------------------

    def execute(self, command: AnyCommand | SkillCommand | AccessCommand) -> Receipt:
        """Run one command on the hub; the receipt comes once its commit is durable.

        Raises:
            CommandError: refused (nothing of it was written).
        """
        reply = self.call(wire.CommandRequest(msgspec.Raw(msgspec.msgpack.encode(command))))
        return _receipt(reply)

    def execute_all(self, commands: Sequence[AnyCommand | SkillCommand | AccessCommand]
                    ) -> list[Receipt]:
        """Run commands in turn in one transaction on the hub: every one, or none.

        At most :data:`~lessonledger.sync.wire.MAX_BATCH_COMMANDS` commands: a batch
        holds the hub's one writer, so more go in several calls (each all-or-nothing;
        a call retried after a failure is safe, the commands carry their keys).

        Raises:
            BatchRefusedError: one was refused (which, and why); nothing was written.
            BatchTooLargeError: more commands than a batch may hold; nothing was run.
        """
        reply = self.call(wire.BatchRequest(
            [msgspec.Raw(msgspec.msgpack.encode(c)) for c in commands]))
        if not isinstance(reply, wire.Receipts):
            msg = f"the hub answered a batch with {type(reply).__name__}"
            raise wire.WireError(msg, "kind")
        return [Receipt(r.positions, r.ids) for r in reply.receipts]

    def submit(self, submission: bytes) -> Receipt:
        """Append one event given as ``parse_submission`` JSON (idempotent by its id)."""
        return _receipt(self.call(wire.SubmitRequest(submission)))

    def erase(self, **fields: Any) -> Erasure:
        """Erase content for good on the hub (needs an admin grant); see :class:`Erase`."""
        command = command_from(fields, Erase)
        return self._decode_answer(self.call(wire.EraseRequest(
            msgspec.Raw(msgspec.msgpack.encode(command)))), Erasure)

    @staticmethod
    def _decode_answer(reply: msgspec.Struct, kind: type[T]) -> T:
        if not isinstance(reply, wire.Answer):
            msg = f"expected an answer, got {type(reply).__name__}"
            raise wire.WireError(msg, "kind")
        return msgspec.msgpack.decode(reply.value, type=kind)

    # -- queries -------------------------------------------------------------------------

    def lessons(self, project: str, *, session: str = "", record: bool = True,
                actor: str = "agent", principal: str = "") -> list[LessonRow]:
        """The active lessons of a project and the global ones (see ``ReadSide.lessons``)."""
        return self._answer("lessons", list[LessonRow], project=project, session=session,
                            record=record, actor=actor, principal=principal)

    def recall(self, project: str, query: str, *, session: str = "", record: bool = True,
               actor: str = "agent", principal: str = "", as_of: int | None = None) -> Recall:
        """The lessons to put in an agent's prompt (see ``ReadSide.recall``)."""
        return self._answer("recall", Recall, project=project, query=query, session=session,
                            record=record, actor=actor, principal=principal, as_of=as_of)

    def check(self, project: str, operation: str, target: str, *, session: str = "",
              record: bool = True, actor: str = "agent", principal: str = "",
              as_of: int | None = None) -> Check:
        """What is on file for an operation on a target (see ``ReadSide.check``)."""
        return self._answer("check", Check, project=project, operation=operation,
                            target=target, session=session, record=record, actor=actor,
                            principal=principal, as_of=as_of)

    def why(self, lesson_id: UUID, *, project: str | None = None, query: str | None = None,
            as_of: int | None = None) -> Why:
        """The events behind a lesson, and its recall verdict (see ``ReadSide.why``)."""
        return self._answer("why", Why, lesson_id=str(lesson_id), project=project,
                            query=query, as_of=as_of)

    def lesson(self, lesson_id: UUID) -> LessonRow:
        """One lesson, whatever its status."""
        return self._answer("lesson", LessonRow, lesson_id=str(lesson_id))

    def history(self, lesson_id: UUID) -> list[LessonRow]:
        """The supersede chain through a lesson, oldest first."""
        return self._answer("history", list[LessonRow], lesson_id=str(lesson_id))

    def catalogue(self, project: str | None = None, *, everything: bool = False
                  ) -> list[LessonRow]:
        """Lessons to browse (records nothing), of the projects this key may read."""
        return self._answer("catalogue", list[LessonRow], project=project,
                            everything=everything)

    def find_lesson(self, text: str) -> UUID:
        """A lesson's id from its full form or a unique prefix."""
        return self._answer("find_lesson", UUID, text=text)

    def outcome_stats(self, project: str) -> ProjectStats:
        """A project's outcomes: how many, how many passed, what failed on which target."""
        return self._answer("outcome_stats", ProjectStats, project=project)

    def head(self) -> int:
        """The last position in the hub's log."""
        return self._answer("head", int)

    def position_at(self, when_ns: int) -> int:
        """The last position recorded at or before a time (0 when none)."""
        return self._answer("position_at", int, when_ns=when_ns)

    @property
    def records(self) -> bool:
        """True: the hub records what its queries show (it holds the home writable)."""
        return True

    def read_log(self, start: int = 1, limit: int = 1000) -> list[Record]:
        """Records from ``start`` on; a body this key may not read comes as None.

        At most ``limit``, and fewer when they are large: the hub answers what fits one
        reply frame (``queries.LOG_PAGE_BYTES``); ask again from after the last one.
        """
        rows = self._answer("log", list[tuple[Envelope, bytes | None]], start=start,
                            limit=limit)
        return [Record(envelope, payload) for envelope, payload in rows]

    def status(self) -> wire.Queried:
        """The hub's head, clients, queue depth and batch sizes."""
        reply = self.call(wire.StatusRequest())
        if not isinstance(reply, wire.Queried):
            msg = f"expected a status, got {type(reply).__name__}"
            raise wire.WireError(msg, "kind")
        return reply

    def subscribe(self, start: int | None = None, *, idle: float | None = None
                  ) -> Iterator[Record]:
        """Yield each new event as the hub commits it, from ``start`` (default: the head).

        The hub's PUB socket announces new heads; the events themselves are read with
        ``log`` queries, so an announcement lost on the way costs only a delay (the head
        is also asked every second). With ``idle``, stop after that many seconds with
        nothing new.
        """
        reply = self.call(wire.SubscribeRequest())
        assert isinstance(reply, wire.Subscribed)
        position = (reply.head if start is None else start - 1)
        sub = self._context.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        self._secure(sub)
        sub.setsockopt(zmq.SUBSCRIBE, b"head")
        sub.connect(_beside(self.endpoint, reply.endpoint))
        try:
            quiet_since = time.monotonic()
            while True:
                records = self.read_log(position + 1, 1000)
                for record in records:
                    yield record
                    position = record.envelope.position
                if records:
                    quiet_since = time.monotonic()
                    continue
                if idle is not None and time.monotonic() - quiet_since > idle:
                    return
                if sub.poll(1000 if idle is None else int(min(idle, 1) * 1000) + 1):
                    while sub.poll(0):
                        sub.recv_multipart()
        finally:
            sub.close(0)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Let go of the socket; nothing is pending (every call waited for its reply).

        Closing again does nothing; a call after it raises
        :class:`~lessonledger.ledger.errors.LedgerClosedError`, as a local ledger's does.
        """
        self._closed = True
        self._drop_socket()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RemoteSkills(SkillVerbs):
    """A hub's ``skills``: the local :class:`~lessonledger.commands.skills.Skills` API.

    Commands go through the hub's writer (they are ledger-wide: an admin grant; a
    session's resolution record needs a write grant on its scope); queries are
    answered by its read side, with the deltas and facts of the projects the key may
    read.
    """

    def __init__(self, ledger: RemoteLedger) -> None:
        self._ledger = ledger

    def execute(self, command: SkillCommand) -> Receipt:
        """Run one skill command on the hub."""
        return self._ledger.execute(command)

    def _ask(self, name: str, kind: type[T], **args: Any) -> T:
        return self._ledger._answer(f"skill_{name}", kind, **args)

    def deltas(self, skill: str | None = None, root: str | None = None,
               status: str | None = None) -> list[DeltaRow]:
        """Deltas (of a skill, in a status) in rendering order."""
        return self._ask("deltas", list[DeltaRow], skill=skill, root=root, status=status)

    def base(self, skill: str, root: str = "user") -> BaseRow | None:
        """A registered skill base, or None."""
        return self._ask("base", BaseRow | None, skill=skill, root=root)  # type: ignore[arg-type]

    def find_delta(self, text: str) -> UUID:
        """A delta id from its full form or a unique prefix of it."""
        return self._ask("find_delta", UUID, text=text)

    def learned(self, namespace: str, default: T, scope: str = "global") -> dict[str, str] | T:
        """The values of a fact namespace (global ones, overridden by the scope's)."""
        found = self._ask("learned", dict[str, str] | None,  # type: ignore[arg-type]
                          namespace=namespace, scope=scope)
        return found if found else default

    def inert(self) -> list[FactRow]:
        """Facts no declared consumer reads."""
        return [listed.fact for listed in self.fact_list(inert=True)]

    def fact_list(self, namespace: str | None = None, *, inert: bool = False
                  ) -> list[ListedFact]:
        """The learned facts (of a namespace; only inert ones), each with its readers."""
        return self._ask("facts", list[ListedFact], namespace=namespace, inert=inert)

    def resolve(self, skill: str, base_text: str, *, root: str = "user",
                scope: str = "global", learning: bool = True, session: str = "",
                budget: int = DEFAULT_BUDGET, available: Iterable[str] | None = None,
                actor: str = "agent", principal: str = "",
                trial: Iterable[UUID] = ()) -> EffectiveSkill:
        """The effective skill for a session, resolved once (see ``Skills.resolve``).

        The hub resolves it; a session's first resolution is then recorded by a command
        (idempotent by what it saw), and asked again, so a first recorded meanwhile by
        another client is the one replayed.
        """
        args: dict[str, Any] = {
            "skill": skill, "base_text": base_text, "root": root, "scope": scope,
            "learning": learning, "session": session, "budget": budget,
            "available": None if available is None else list(available), "actor": actor,
            "principal": principal, "trial": [str(i) for i in trial]}
        for tried in range(1, _RECORD_TRIES + 1):
            result, recorded = self._ask("resolve", tuple[EffectiveSkill, bool], **args)
            if not session or not learning or recorded:
                return result
            try:
                self.execute(resolution_record(result, session, actor, principal))
            except DeltaRefusedError as e:
                # A delta it names was decided after the hub resolved: resolve again.
                if e.rule != UNRESOLVABLE or tried == _RECORD_TRIES:
                    raise
                continue
            break
        result, _ = self._ask("resolve", tuple[EffectiveSkill, bool], **args)
        return result

    def diff(self, skill: str, base_text: str, delta_id: UUID, *, root: str = "user",
             scope: str = "global") -> tuple[EffectiveSkill, EffectiveSkill]:
        """The effective skill without and with one delta made active (nothing written)."""
        return self._ask("diff", tuple[EffectiveSkill, EffectiveSkill], skill=skill,
                         base_text=base_text, delta_id=str(delta_id), root=root, scope=scope)


def _receipt(reply: msgspec.Struct) -> Receipt:
    if not isinstance(reply, wire.Receipted):
        msg = f"expected a receipt, got {type(reply).__name__}"
        raise wire.WireError(msg, "kind")
    return Receipt(reply.positions, reply.ids)


def _beside(endpoint: str, announced: str) -> str:
    """The PUB endpoint to connect to: the hub's host as this client knows it, its port."""
    if endpoint.startswith("tcp://") and announced.startswith("tcp://"):
        return f"{endpoint.rsplit(':', 1)[0]}:{announced.rsplit(':', 1)[1]}"
    return announced

