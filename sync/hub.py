"""The hub: one home's single writer, serving agents anywhere over ZeroMQ.

Three threads, each with its own sockets (ZeroMQ sockets are not thread-safe):

- the **front** (the thread that calls :meth:`Hub.run`) owns the ROUTER that clients
  talk to and the PUB that announces heads. It checks each frame (:mod:`.wire`), asks
  the :class:`~lessonledger.sync.authority.Authority` who sent it, and queues the work;
  a full queue is answered at once with ``busy``, never dropped. It sends every reply.
- the **writer** owns the :class:`~lessonledger.commands.ledger.Ledger`. It decides each
  command as it arrives, up to :attr:`HubConfig.max_batch`, in one durable transaction
  (:meth:`Ledger.execute_gathered`); each client is answered only after that commit.
- the **query workers** are processes of their own (:mod:`.query_pool`), each answering
  queries from its own :class:`~lessonledger.commands.read_side.Reader`, which reads LMDB
  snapshots and never waits for the writer's commit; in their own processes they never
  wait for the writer's GIL either. The front hands each query, with the connection's
  access as the authority decided it, to an idle worker and forwards its answer.

The authority's grants are a copy, refreshed after each commit and every
:data:`GRANTS_EVERY`: the front turns away a key without one, and the handshakes go by
it. What the hub writes is decided by the key's grant as the writer's own transaction
sees it (the views have folded every grant, revocation and erasure any process committed
before it), and what a worker answers by the grant as it folds it for the query; so a
revocation another process commits counts from the next request after it.

The writer hands the front its replies over an inproc PUSH socket. A client that never
reads its replies fills its own pipe: the reply is dropped and logged, nobody waits.

SIGTERM (:meth:`Hub.stop`) drains: new work is answered ``busy``, what is queued is
committed and answered, the workers are stopped, then :meth:`Hub.run` returns. A worker
whose hub is gone (SIGKILL) exits on its own.
"""

from __future__ import annotations

import collections
import logging
import queue
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

import msgspec
import zmq
from lessonledger.commands.access import AccessCommand, GrantAccess
from lessonledger.commands.errors import AccessRefusedError, InvalidCommandError
from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import (
    AnyCommand,
    Erase,
    checked_command,
)
from lessonledger.commands.receipts import Receipt
from lessonledger.commands.refusals import refuse_credentials
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.ledger.errors import LedgerConfigError, LessonLedgerError
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.secrets import warm_up
from lessonledger.ledger.submission import Submission, parse_submission
from lessonledger.sync import wire
from lessonledger.sync.authenticator import Authenticator, client_key, start_authenticator
from lessonledger.sync.authority import (
    Access,
    Authority,
    authorize_command,
    authorize_event,
    bound_to_caller,
    in_force,
    no_grant,
    require_admin,
    require_own_principal,
)
from lessonledger.sync.protocol import SyncFrame, SyncReplyFrame
from lessonledger.sync.query_pool import PER_CLIENT, QueryPool, default_workers
from lessonledger.sync.service import SyncService
from lessonledger.sync.stats import HubStats

__all__ = ["DEFAULT_BIND", "Hub", "HubConfig", "is_loopback", "pub_endpoint"]

log = logging.getLogger("lessonledger.hub")

#: Where a hub listens unless told otherwise: loopback only.
DEFAULT_BIND = "tcp://127.0.0.1:7650"
#: Milliseconds a client is told to wait before retrying a busy hub.
RETRY_AFTER_MS = 20
#: Seconds between two refreshes of the grants the front and the handshakes go by (what
#: the hub writes and answers goes by the grant in force then, not by these).
GRANTS_EVERY = 0.5
#: A client is counted as connected while it sent something within this many seconds.
CLIENT_WINDOW = 60.0

#: The writer's replies to the front: one message a batch, ``[head, identity, reply, …]``
#: (head empty when it did not move): one send and one receive for the whole batch, not
#: two per request, on the writer's path and the front's.
_OUTBOX = "inproc://lessonledger-hub-outbox"
_head = struct.Struct(">Q")

_command = msgspec.msgpack.Decoder(AnyCommand | SkillCommand | AccessCommand)
_erase = msgspec.msgpack.Decoder(Erase)


def is_loopback(endpoint: str) -> bool:
    """Whether a ``tcp://`` endpoint binds loopback only (``ipc://`` and ``inproc://`` do)."""
    if not endpoint.startswith("tcp://"):
        return True
    host = endpoint[len("tcp://"):].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def pub_endpoint(bind: str) -> str:
    """The PUB endpoint beside a ROUTER endpoint: the next port, or ``bind + '.pub'``."""
    if bind.startswith("tcp://"):
        host, port = bind.rsplit(":", 1)
        return f"{host}:{int(port) + 1}"
    return bind + ".pub"


@dataclass(frozen=True)
class HubConfig:
    """How a hub runs.

    Attributes:
        home: the ledger home it is the writer of.
        bind: the ROUTER endpoint clients send to.
        pub: the PUB endpoint announcing heads (default: the next port).
        queue_bound: commands waiting at most; more are answered ``busy``. One client
            (a CURVE key, or a connection on a keyless hub) holds at most
            :data:`~lessonledger.sync.query_pool.PER_CLIENT` of it, so a key flooding from
            many connections keeps every other key's commands a short wait away.
        max_batch: commands committed together at most.
        query_bound: queries waiting at most.
        query_workers: processes answering queries (0: :func:`default_workers`).
        sync: fsync every commit (a hub answers only after a durable commit).
        commit_delay: seconds the writer waits at most for the clients of its last
            batch to send again before committing fewer (group commit's trade: a
            little latency for one fsync over more commands).
        server_secret: the server's CURVE secret key (Z85) with ``server_public``;
            empty for a keyless loopback hub.
        server_public: the server's CURVE public key (Z85).
    """

    home: str
    bind: str = DEFAULT_BIND
    pub: str = ""
    queue_bound: int = 4096
    max_batch: int = 512
    query_bound: int = 1024
    query_workers: int = 0
    sync: bool = True
    commit_delay: float = 0.005
    server_secret: bytes = b""
    server_public: bytes = b""


@dataclass
class _Work:
    """One queued request: who sent it, its id, what it asks, and the sender's access."""

    identity: bytes
    request: int
    kind: Literal["command", "batch", "erase", "submit", "sync"]
    access: Access
    items: list[Any] = field(default_factory=list)


class _Refusal(Exception):
    """A request refused before it was queued (front) or decided (writer)."""

    def __init__(self, error: LessonLedgerError) -> None:
        super().__init__(str(error))
        self.error = error


def _reply(body: msgspec.Struct, request: int) -> bytes:
    return wire.encode_frame(body, request)


def _receipted(receipt: Receipt) -> wire.Receipted:
    return wire.Receipted(receipt.positions, receipt.ids)


def _refused(error: LessonLedgerError) -> wire.Refused:
    return wire.refusal(error)


class Hub:
    """One home's writer and readers behind a ROUTER socket (see the module doc).

    Args:
        config: where and how it runs.
        authority: who each connection is; decides every principal.
        context: the ZeroMQ context (a new one when omitted).
        on_bound: called once the sockets are bound (tests wait for it).
    """

    def __init__(self, config: HubConfig, authority: Authority, *,
                 context: zmq.Context[Any] | None = None,
                 on_bound: Callable[[], None] | None = None) -> None:
        if not config.server_secret and not is_loopback(config.bind):
            msg = (f"refusing to bind {config.bind} without CURVE keys: anyone on the network "
                   "could write as the hub's principal; bind 127.0.0.1 or give --key")
            raise LedgerConfigError(msg)
        self.config = config
        self.authority = authority
        self.stats = HubStats(queue_bound=config.queue_bound, mode=authority.mode)
        # A context of its own unless given one: run() terminates it, which waits for
        # the last replies to leave (an exit right after close could drop them).
        self._own_context = context is None
        self._context = context or zmq.Context()
        self._on_bound = on_bound
        self._work: queue.Queue[_Work] = queue.Queue(config.queue_bound)
        #: Requests each client has waiting in ``_work`` (front adds, writer takes off).
        self._waiting: collections.Counter[str] = collections.Counter()
        self._waiting_lock = threading.Lock()
        self._per_client = max(1, int(config.queue_bound * PER_CLIENT))
        self._pool: QueryPool | None = None
        self._stopping = threading.Event()
        #: Set once the front queues nothing more: the threads may then finish.
        self._front_done = threading.Event()
        self._ready = threading.Barrier(2)
        self._clients: dict[bytes, float] = {}
        self._not_reading: set[bytes] = set()
        self._pub_endpoint = config.pub or pub_endpoint(config.bind)
        self._last_clients = 1
        self._pruned = time.monotonic()
        self.head = 0
        #: Sync's requests (clone, pull, push, erasure acks), answered by the writer.
        self._sync: SyncService | None = None
        #: The writer's ledger while it is open, for the ZAP handler's refreshes; the
        #: lock keeps refreshes in order, so older grants never replace newer ones.
        self._grants_ledger: Ledger | None = None
        self._grants_lock = threading.Lock()

    # -- lifetime ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking work; :meth:`run` commits and answers what is queued, then returns."""
        self._stopping.set()

    def run(self) -> None:
        """Serve until :meth:`stop`; return once everything queued is committed and answered.

        Raises:
            LedgerConfigError: the endpoint cannot be bound (in use, malformed).
        """
        ctx = self._context
        outbox = ctx.socket(zmq.PULL)
        outbox.bind(_OUTBOX + f"-{id(self)}")
        router = ctx.socket(zmq.ROUTER)
        pub = ctx.socket(zmq.PUB)
        for sock in (router, pub, outbox):
            sock.setsockopt(zmq.LINGER, 1000)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # libzmq drops (and disconnects) anything far over our limit before we see it;
        # a frame somewhat over it still reaches decode_frame and gets a typed refusal.
        router.setsockopt(zmq.MAXMSGSIZE, 2 * wire.MAX_FRAME_BYTES)
        auth: Authenticator | None = None
        if self.config.server_secret:
            # ZAP is per context: the handler asks the authority at every handshake, so
            # a key without a grant never gets a message through.
            # A key granted by another process since the last refresh gets in at once.
            auth = start_authenticator(ctx, self.authority.allowed,
                                       on_refused=lambda _key: self.stats.refused("key"),
                                       refresh=self._refresh_grants)
            for sock in (router, pub):
                sock.curve_secretkey = self.config.server_secret
                sock.curve_publickey = self.config.server_public
                sock.curve_server = True
        try:
            router.bind(self.config.bind)
            pub.bind(self._pub_endpoint)
        except zmq.ZMQError as e:
            for sock in (router, pub, outbox):
                sock.close(0)
            if auth is not None:
                auth.stop()
            msg = f"cannot listen on {self.config.bind} / {self._pub_endpoint}: {e}"
            raise LedgerConfigError(msg) from e
        failure: list[BaseException] = []
        try:
            pool = QueryPool(self.config.home,
                             self.config.query_workers or default_workers(),
                             self.config.query_bound, ctx, self.stats)
        except BaseException:
            for sock in (router, pub, outbox):
                sock.close(0)
            if auth is not None:
                auth.stop()
            raise
        self._pool = pool
        writer = threading.Thread(target=self._guard(self._write, failure), name="hub-writer")
        writer.start()
        try:
            pool.start()
            warm_up()  # the front screens every command for credentials: not on the first
            self._ready.wait(timeout=120)
            log.info("hub serving %s on %s (heads on %s, principals: %s)",
                     self.config.home, self.config.bind, self._pub_endpoint,
                     self.authority.mode)
            if self._on_bound is not None:
                self._on_bound()
            self._serve(router, pub, outbox, failure)
        finally:
            self._stopping.set()
            self._front_done.set()
            writer.join()
            pool.close()
            self._forward(router, pub, outbox, block=False)
            for sock in (router, pub, outbox):
                sock.close()
            if auth is not None:
                auth.stop()
            if self._own_context:
                self._context.term()
        if failure:
            raise failure[0]
        log.info("hub stopped at head %d after %d batches", self.head, self.stats.batches)

    def _guard(self, target: Callable[[], None], failure: list[BaseException]
               ) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as e:
                failure.append(e)
                self._stopping.set()
                self._ready.abort()
                raise
        return run

    # -- the front -----------------------------------------------------------------------

    def _serve(self, router: zmq.Socket[Any], pub: zmq.Socket[Any],
               outbox: zmq.Socket[Any], failure: list[BaseException]) -> None:
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(outbox, zmq.POLLIN)
        pool = self._pool
        assert pool is not None, "made by run() before it serves"
        poller.register(pool.socket, zmq.POLLIN)
        answer = lambda identity, data: self._send(router, identity, data)  # noqa: E731
        quiet = False
        while not failure:
            # Stopping ends once the writer and the workers are done and a whole poll
            # brought nothing more: a request still in the socket is answered busy.
            if quiet and self._stopping.is_set() and not self._work.unfinished_tasks \
                    and not pool.pending:
                self._front_done.set()
                return
            events = dict(poller.poll(100))
            quiet = not events
            if time.monotonic() - self._pruned > CLIENT_WINDOW:
                self._prune()
            if pool.socket in events:
                pool.take(answer)
            pool.check(answer)
            if outbox in events:
                self._forward(router, pub, outbox, block=False)
            if router in events:
                for _ in range(256):  # a burst, then give the replies a turn
                    try:
                        parts = router.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._take(router, parts)

    def _forward(self, router: zmq.Socket[Any], pub: zmq.Socket[Any],
                 outbox: zmq.Socket[Any], *, block: bool) -> None:
        while True:
            try:
                parts = outbox.recv_multipart(0 if block else zmq.NOBLOCK)
            except zmq.Again:
                return
            for i in range(1, len(parts), 2):
                self._send(router, parts[i], parts[i + 1])
            if parts[0]:
                pub.send_multipart([b"head", parts[0]])

    def _send(self, router: zmq.Socket[Any], identity: bytes, data: bytes) -> None:
        try:
            router.send_multipart([identity, data], zmq.NOBLOCK)
        except zmq.Again:
            # Its pipe is full: it is not reading. Its reply is lost to it, not to others.
            if identity not in self._not_reading:
                self._not_reading.add(identity)
                log.warning("client %s is not reading its replies; dropping them",
                            identity.hex())
            self.stats.dropped_reply()
        except zmq.ZMQError:
            self.stats.dropped_reply()  # gone (EHOSTUNREACH): it will retry if it cares

    def _take(self, router: zmq.Socket[Any], parts: list[zmq.Frame]) -> None:
        if len(parts) != 2:
            log.warning("refused a message of %d parts (a frame is one part)", len(parts) - 1)
            if parts:
                err = wire.WireError("a request is one ZeroMQ frame", "garbage")
                self._send(router, parts[0].bytes, _reply(_refused(err), 0))
            self.stats.refused("garbage")
            return
        identity, data = parts[0].bytes, parts[1]
        user_id = _user_id(data)
        now = time.monotonic()
        if identity not in self._clients:
            log.info("client %s connected (%s)", identity.hex(),
                     f"key {user_id}" if user_id else "no key")
        self._clients[identity] = now
        request = 0
        try:
            frame = wire.decode_frame(data.buffer)
            request = frame.id
            access = self.authority.access(user_id)
            if access is None:
                # Its key was let in at the handshake, and its grant is gone since (a
                # revocation does not cut a CURVE session): refused from now on.
                log.warning("refused client %s: key %s has no grant now", identity.hex(),
                            user_id)
                raise _Refusal(no_grant())
            self._dispatch(router, identity, frame, access)
        except wire.WireError as e:
            log.warning("refused a frame from client %s: %s", identity.hex(), e.problem)
            self.stats.refused(e.problem)
            self._send(router, identity, _reply(_refused(e), request))
        except _Refusal as r:
            log.info("refused a request from client %s: %s", identity.hex(),
                     type(r.error).__name__)
            self.stats.refused(type(r.error).__name__)
            self._send(router, identity, _reply(_refused(r.error), request))

    def _dispatch(self, router: zmq.Socket[Any], identity: bytes, frame: wire.Frame,
                  access: Access) -> None:
        body: msgspec.Struct = wire.decode_body(frame)
        self.stats.request(f"query:{body.query}" if isinstance(body, wire.QueryRequest)
                           else frame.kind)
        if isinstance(body, wire.StatusRequest):
            self._send(router, identity, _reply(self.status(), frame.id))
            return
        if isinstance(body, wire.SubscribeRequest):
            self._send(router, identity, _reply(wire.Subscribed(self._pub_endpoint, self.head),
                                                frame.id))
            return
        if self._stopping.is_set():
            self._busy(router, identity, frame.id, "the hub is shutting down")
            return
        if isinstance(body, wire.QueryRequest):
            assert self._pool is not None, "made by run() before it serves"
            if not self._pool.submit(identity, frame.id, access, bytes(frame.body)):
                self._busy(router, identity, frame.id, "the hub's query queue is full")
            return
        work = _work(identity, frame.id, access, body)
        client = _client(work)
        with self._waiting_lock:
            mine = self._waiting[client]
            if mine < self._per_client:
                self._waiting[client] = mine + 1
        if mine >= self._per_client:
            self._busy(router, identity, frame.id,
                       f"this client has {mine} requests waiting at the hub already")
            return
        try:
            self._work.put_nowait(work)
        except queue.Full:
            self._taken([work])
            self._busy(router, identity, frame.id, "the hub's queue is full")

    def _busy(self, router: zmq.Socket[Any], identity: bytes, request: int, why: str) -> None:
        self.stats.busy()
        self._send(router, identity, _reply(wire.Busy(RETRY_AFTER_MS, why), request))

    def _prune(self) -> None:
        """Forget connections quiet for :data:`CLIENT_WINDOW` (a reconnect is a new one)."""
        self._pruned = time.monotonic()
        cutoff = self._pruned - CLIENT_WINDOW
        self._clients = {k: t for k, t in self._clients.items() if t >= cutoff}
        self._not_reading &= self._clients.keys()

    def status(self) -> wire.Queried:
        """The hub's head, clients, queue depth and batch sizes, as of now."""
        self._prune()
        return self.stats.snapshot(head=self.head, clients=len(self._clients),
                                   queue_depth=self._work.qsize())

    # -- the writer ----------------------------------------------------------------------

    def _write(self) -> None:
        outbox = self._context.socket(zmq.PUSH)
        outbox.connect(_OUTBOX + f"-{id(self)}")
        try:
            ledger = Ledger(self.config.home, sync=self.config.sync)
        except BaseException:
            outbox.close(0)
            raise
        try:
            ledger.catch_up()
            self.head = ledger.head()
            self._grants_ledger = ledger
            self._refresh_grants(ledger)
            self._sync = SyncService(ledger)
            refreshed = time.monotonic()
            self._ready.wait(timeout=120)
            while True:
                try:
                    first: _Work | None = self._work.get(timeout=0.05)
                except queue.Empty:
                    if self._front_done.is_set():
                        return
                    first = None
                if time.monotonic() - refreshed > GRANTS_EVERY:
                    # Another process (`lessonledger access grant|revoke`, `erase` on the
                    # home) may have changed the grants: the front's copy takes them, so it
                    # turns a revoked key away itself and the handshakes know new keys.
                    # Every write is decided by the grant inside its transaction anyway.
                    ledger.catch_up()
                    self._refresh_grants(ledger)
                    refreshed = time.monotonic()
                if first is None:
                    continue
                group = self._commit(ledger, first, outbox)
                self._taken(group)
                for _ in group:
                    self._work.task_done()
        finally:
            with self._grants_lock:
                self._grants_ledger = None
            ledger.close()
            outbox.close()

    def _taken(self, group: list[_Work]) -> None:
        """Count ``group`` off its clients' waiting requests."""
        with self._waiting_lock:
            for work in group:
                client = _client(work)
                self._waiting[client] -= 1
                if self._waiting[client] <= 0:
                    del self._waiting[client]

    def _refresh_grants(self, ledger: Ledger | None = None) -> None:
        """Take the grants in force now (the writer's ledger folds what others wrote)."""
        with self._grants_lock:
            if ledger is None:
                ledger = self._grants_ledger
            if ledger is not None:
                self.authority.refresh(ledger.grants())

    def _commit(self, ledger: Ledger, first: _Work, outbox: zmq.Socket[Any]) -> list[_Work]:
        """One group commit, from ``first`` on; every request it took, answered.

        Commands and submissions are decided as they arrive, in one transaction
        (:meth:`Ledger.execute_gathered`): the writer works on the first while the others
        are still on their way. Each is authorized there, right before it is decided, by
        its key's grant as the transaction sees it (``admit``): a revocation or an
        erasure another process committed before the transaction counts, with no
        refreshing of grants (the views folded it with everything else).

        It takes what has arrived, up to the batch bound, and while fewer requests are
        here than clients were in the last batch it waits up to
        :attr:`HubConfig.commit_delay` for them (they were just answered and are about to
        send again): one fsync then covers them all.
        """
        started = time.perf_counter()
        before = self.head
        replies: list[tuple[bytes, bytes]] = []
        group = [first]
        senders = {first.identity}
        #: The commands and submissions decided in the transaction, in order.
        single: list[_Work] = []
        #: Batches, erasures, sync: after it, in transactions of their own.
        others: list[_Work] = []
        until = time.monotonic() + self.config.commit_delay

        def take(work: _Work) -> Any:
            if work.kind not in ("command", "submit"):
                others.append(work)
                return None
            single.append(work)
            return work.items[0]

        def admit(index: int, item: Any) -> Any:
            # Inside the transaction: the grants as every writer before it left them.
            return _admitted(ledger, single[index].access, item)

        def more() -> Any:
            while len(group) < self.config.max_batch:
                try:
                    work = self._work.get_nowait()
                except queue.Empty:
                    left = until - time.monotonic()
                    if len(group) >= self._last_clients or left <= 0:
                        return None
                    try:
                        work = self._work.get(timeout=left)
                    except queue.Empty:
                        return None
                group.append(work)
                senders.add(work.identity)
                item = take(work)
                if item is not None:
                    return item
            return None

        item = take(first)
        if item is None:
            item = more()
        if item is not None:
            try:
                _, results = ledger.execute_gathered(item, more, admit=admit)
            except LessonLedgerError as e:
                # The store failed under the commit (disk full): nothing of the group was
                # written, and every client of it is told so, rather than left waiting.
                log.error("the group commit failed: %s", e)
                results = [e] * len(single)
            for work, result in zip(single, results, strict=True):
                if isinstance(result, Receipt):
                    body: msgspec.Struct = _receipted(result)
                else:
                    body = _refused(result)
                    self.stats.refused(type(result).__name__)
                    log.info("refused %s from client %s: %s", work.kind, work.identity.hex(),
                             type(result).__name__)
                replies.append((work.identity, _reply(body, work.request)))
        self._last_clients = len(senders)
        # Batches (all or none), erasures and sync's requests (a push decides each of its
        # commands; an ack records one event) run in transactions of their own.
        for work in others:
            if work.kind == "sync":
                # Sent at once: a sync reply waits for no commit of the group (a push or an
                # ack committed its own), and a replica keeps several fetches in flight,
                # which would otherwise all wait for the last one's chunk: it could not work
                # on one chunk while the next is read.
                for data in self._sync_replies(ledger, work):
                    outbox.send_multipart([b"", work.identity, data])
                continue
            replies.append((work.identity, self._alone(ledger, work)))
        self.head = ledger.head()
        if any(work.kind in ("command", "batch", "sync") for work in group):
            # Before anyone is answered: the front turns a key revoked here away from
            # its receipt on (the writer would refuse it anyway).
            self._refresh_grants(ledger)
        seconds = time.perf_counter() - started
        self.stats.batch(len(group), self.head - before, seconds)
        log.info("batch of %d requests, %d events, %.1f ms, head %d", len(group),
                 self.head - before, seconds * 1000, self.head)
        moved = _head.pack(self.head) if self.head != before else b""
        outbox.send_multipart([moved, *(part for reply in replies for part in reply)])
        return group

    def _alone(self, ledger: Ledger, work: _Work) -> bytes:
        try:
            if work.kind == "erase":
                require_admin(work.access)
                command = work.items[0]
                require_own_principal(work.access, command.principal)
                fields = msgspec.structs.asdict(command)
                fields["principal"] = work.access.principal
                with ledger.guarded(lambda: _still_admin(ledger, work.access)):
                    erasure = ledger.erase(**fields)
                return _reply(wire.Answer(msgspec.Raw(msgspec.msgpack.encode(erasure))),
                              work.request)

            # Inside the transaction, every command before any is decided.
            receipts = ledger.execute_all(
                work.items, admit=lambda _, command: _admitted(ledger, work.access, command))
            return _reply(wire.Receipts([_receipted(r) for r in receipts]), work.request)
        except LessonLedgerError as e:
            error: LessonLedgerError = e
        self.stats.refused(type(error).__name__)
        log.info("refused %s from client %s: %s", work.kind, work.identity.hex(),
                 type(error).__name__)
        return _reply(_refused(error), work.request)

    def _sync_replies(self, ledger: Ledger, work: _Work) -> list[bytes]:
        """The frames answering a sync request (several for a multi-segment fetch).

        Decided by the key's grant as it stands now: reads (hello, ids, fetch) go by
        the grant after folding what every process committed before; each write a push
        or an acknowledgement makes goes by the grant inside its own transaction, and a
        grant changed in between refuses that write (a replica pushes again: its
        commands carry their keys).
        """
        assert self._sync is not None, "set by the writer before any work is taken"
        try:
            access = work.access
            if access.key:
                ledger.catch_up()
                access = in_force(access, ledger.grant_as_folded(access.key))
            # The hub's authority decided who the peer is: its grant filters the bodies
            # a partial replica gets and is the principal of what it pushes.
            peer = access.key or work.identity.hex()
            with ledger.guarded(lambda: _unchanged(ledger, access)):
                frames = self._sync.handle(work.items[0], peer, access.grant,
                                           None if access.key else access)
            return [_reply(SyncReplyFrame(frame), work.request) for frame in frames]
        except LessonLedgerError as e:
            self.stats.refused(type(e).__name__)
            log.info("refused sync from client %s: %s", work.identity.hex(), type(e).__name__)
            return [_reply(_refused(e), work.request)]


def _current(ledger: Ledger, access: Access) -> Access:
    """The connection's access by its key's grant as the writer's transaction sees it.

    Called inside the write transaction only (an admit, a guard): there the views have
    folded every grant, revocation and erasure committed before it, by any process.

    Raises:
        AccessRefusedError: the key has no grant now.
    """
    return in_force(access, ledger.grant_as_folded(access.key)) if access.key else access


def _admitted(ledger: Ledger, access: Access, item: Any) -> Any:
    """``item`` as the writer decides it: authorized by its key's grant in the transaction.

    Called inside the write transaction only (an admit).

    Raises:
        CommandError: the key has no grant now, or its grant does not cover ``item``.
    """
    current = _current(ledger, access)
    if current.principal != access.principal and not isinstance(item, Submission):
        # The key was granted to another principal since the front bound the command.
        item = bound_to_caller(item, current.principal)
    return _authorized(ledger, current, item)


def _still_admin(ledger: Ledger, access: Access) -> None:
    """Refuse an erasure whose key is no longer an admin's, or no longer its principal's.

    Raises:
        AccessRefusedError: it is not.
    """
    current = _current(ledger, access)
    require_admin(current)
    if current.principal != access.principal:
        raise AccessRefusedError(current.principal, "", "admin", (
            f"erase as {access.principal!r}: the key was granted to another principal "
            "while the erasure waited; send it again"))


def _unchanged(ledger: Ledger, access: Access) -> None:
    """Refuse a write of a sync request whose key's grant changed since it was checked.

    Raises:
        AccessRefusedError: the grant is gone, or is another one now.
    """
    current = _current(ledger, access)
    if current is not access:
        raise AccessRefusedError(current.principal, "", "write", (
            "push with the grant this request was checked by: it changed meanwhile; "
            "push again"))


def _client(work: _Work) -> str:
    """Whose share of the queue ``work`` takes: its key's, or its connection's."""
    return work.access.key or work.identity.hex()


def _user_id(frame: zmq.Frame) -> str | None:
    """The ZAP User-Id of a CURVE connection (the client's Z85 key), None without CURVE."""
    return client_key(frame) or None


def _work(identity: bytes, request: int, access: Access, body: msgspec.Struct) -> _Work:
    """Queue-able work from a request body; a body that cannot be decoded is refused.

    A command is checked here, on the front thread, as ``execute`` would check it (its
    schema, the credential screen, its principal), so the writer does only what needs
    the log: the grant on the lesson's project, and deciding.
    """
    try:
        if isinstance(body, wire.CommandRequest):
            return _Work(identity, request, "command", access,
                         [_checked(_decode_command(body.command), access)])
        if isinstance(body, wire.BatchRequest):
            if not body.commands:
                raise _Refusal(InvalidCommandError("a batch needs at least one command"))
            if len(body.commands) > wire.MAX_BATCH_COMMANDS:
                # Before decoding any: the front refuses it at once, the writer never sees it.
                raise _Refusal(wire.BatchTooLargeError(len(body.commands)))
            return _Work(identity, request, "batch", access,
                         [_checked(_decode_command(c), access) for c in body.commands])
        if isinstance(body, wire.EraseRequest):
            return _Work(identity, request, "erase", access, [_erase.decode(body.erase)])
        if isinstance(body, wire.SubmitRequest):
            return _Work(identity, request, "submit", access,
                         [parse_submission(body.submission)])
        if isinstance(body, SyncFrame):
            return _Work(identity, request, "sync", access, [body.frame])
    except msgspec.ValidationError as e:
        raise _Refusal(InvalidCommandError(f"invalid command: {e}; fix the field and retry")
                       ) from e
    except msgspec.DecodeError as e:
        raise _Refusal(InvalidCommandError(f"not a command: {e}")) from e
    except LessonLedgerError as e:
        raise _Refusal(e) from e
    msg = f"a {type(body).__name__} frame is a reply, not a request"
    raise wire.WireError(msg, "kind")


def _checked(command: AnyCommand | SkillCommand | AccessCommand, access: Access
             ) -> AnyCommand | SkillCommand | AccessCommand:
    """The command as the ledger would check it, with the connection's principal."""
    command = checked_command(command)
    refuse_credentials(command)
    if not isinstance(command, GrantAccess):  # a grant's principal is its grantee
        require_own_principal(access, command.principal)
    bound: AnyCommand | SkillCommand | AccessCommand = bound_to_caller(command,
                                                                       access.principal)
    return bound


def _decode_command(raw: msgspec.Raw) -> AnyCommand | SkillCommand | AccessCommand:
    command: AnyCommand | SkillCommand | AccessCommand = _command.decode(raw)
    return command


def _lesson_scope(ledger: Ledger, lesson_id: UUID) -> str | None:
    row = ledger.view.lessons.get(lesson_id)
    return None if row is None else row.scope


def _authorized(ledger: Ledger, access: Access, item: Any) -> Any:
    """The item with the connection's principal, if ``access``'s grant covers it.

    Raises:
        CommandError: the grant does not cover it, or it names another principal.
    """
    if isinstance(item, Submission):
        # parse_submission already refused what only the ledger writes (LEDGER_ONLY).
        authorize_event(access, item.event, lambda i: _lesson_scope(ledger, i))
        require_own_principal(access, item.principal)
        # Its id is the sender's own, as a command's key is: every envelope shows ids,
        # so a raw id taken as given could squat the one another principal's next
        # command derives, or be answered with another's receipt.
        return msgspec.structs.replace(
            item, principal=access.principal,
            event_id=derived_id(item.event_id, f"submitted by {access.principal}"))
    # Checked on the front thread (_checked) and bound to the caller there.
    authorize_command(access, item, lambda i: _lesson_scope(ledger, i))
    return item
