"""The hub: one home's single writer, serving agents anywhere over ZeroMQ.

Three kinds of process, each with its own sockets and its own GIL:

- the **front** (the process, and thread, that calls :meth:`Hub.run`) owns the ROUTER
  that clients talk to and the PUB that announces heads. It checks each frame
  (:mod:`.wire`), asks the :class:`~lessonledger.sync.authority.Authority` who sent it,
  decodes and screens each command as ``execute`` would, and hands the checked work to
  the writer, one message per burst it read; a full queue is answered at once with
  ``busy``, never dropped. It sends every reply.
- the **writer** (:mod:`.hub_writer`) owns the
  :class:`~lessonledger.commands.ledger.Ledger`. It decides each command as it arrives,
  up to :attr:`HubConfig.max_batch`, in one durable transaction
  (:meth:`Ledger.execute_gathered`), and reports the batch's replies to the front in
  one message after that commit: each client is answered only after it. In a process of
  its own, its GIL does only deciding, folding and committing; on a thread of the
  front's process it waited for the GIL the front held for a third of its time or more.
- the **query workers** (:mod:`.query_pool`) answer queries from their own
  :class:`~lessonledger.commands.read_side.Reader`, which reads LMDB snapshots and never
  waits for the writer's commit. The front hands each query, with the connection's
  access as the authority decided it, to an idle worker and forwards its answer.

The front talks to the writer over two ``ipc://`` sockets in the query pool's private
directory (mode 0700). The authority's grants are a copy of the writer's, sent with each
batch that changed them and every :data:`GRANTS_EVERY`: the front turns away a key
without one at once. Everything else goes by the key's grant as it stands: each
handshake asks the writer for the grants as the log holds them then; what the hub
writes is decided by the key's grant as the writer's own transaction sees it (the views
have folded every grant, revocation and erasure any process committed before it); a
status or subscribe request of a key is answered once the writer found its grant in
force; and what a worker answers goes by the grant as it folds it for the query. So a
revocation another process commits counts from the next request or connection after it.

A client that never reads its replies fills its own pipe: the reply is dropped and
logged, nobody waits.

SIGTERM (:meth:`Hub.stop`) drains: new work is answered ``busy``, the writer commits and
reports what it was sent and exits, the workers are stopped, then :meth:`Hub.run`
returns. A writer or worker whose front is gone (SIGKILL) exits on its own; a front
whose writer died answers what it had queued ``busy`` and stops with an error.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import zmq
from lessonledger.commands.access import AccessCommand, GrantAccess
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.commands.messages import AnyCommand, Erase
from lessonledger.commands.refusals import refuse_credentials
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.ledger.errors import LedgerConfigError, LessonLedgerError
from lessonledger.ledger.secrets import warm_up
from lessonledger.ledger.submission import parse_submission
from lessonledger.projections.access import Grant
from lessonledger.sync import wire
from lessonledger.sync.authenticator import Authenticator, client_key, start_authenticator
from lessonledger.sync.authority import (
    Access,
    Authority,
    bound_to_caller,
    no_grant,
    require_own_principal,
)
from lessonledger.sync.endpoints import check_bind, is_loopback, parse_tcp
from lessonledger.sync.hub_writer import GRANTS, GRANTS_EVERY, STOP, WORK, Report, Work
from lessonledger.sync.protocol import SyncFrame
from lessonledger.sync.query_pool import PER_CLIENT, QueryPool, default_workers
from lessonledger.sync.stats import HubStats

__all__ = ["DEFAULT_BIND", "GRANTS_EVERY", "Hub", "HubConfig", "is_loopback", "pub_endpoint"]

log = logging.getLogger("lessonledger.hub")

#: Where a hub listens unless told otherwise: loopback only.
DEFAULT_BIND = "tcp://127.0.0.1:7650"
#: Milliseconds a client is told to wait before retrying a busy hub.
RETRY_AFTER_MS = 20
#: A client is counted as connected while it sent something within this many seconds.
CLIENT_WINDOW = 60.0
#: Seconds the writer has to open the home and report ready.
START_WAIT = 120.0
#: Seconds a drained writer has to exit before it is killed.
STOP_WAIT = 30.0
#: Seconds a handshake of an unknown key waits for the writer's grants.
GRANTS_WAIT = 2.0
#: Milliseconds the front's poll waits at most: a handshake's question for the writer
#: waits for it.
POLL_MS = 20
#: Seconds between two looks at whether the writer is still there.
CHECK_EVERY = 0.2

_command = msgspec.msgpack.Decoder(AnyCommand | SkillCommand | AccessCommand)
_erase = msgspec.msgpack.Decoder(Erase)
_report = msgspec.msgpack.Decoder(Report)
_grants = msgspec.msgpack.Decoder(list[Grant])
_replies = msgspec.msgpack.Decoder(list[bytes])
_encoder = msgspec.msgpack.Encoder()
#: The frame kind of a query (taken before the commands of its burst).
_QUERY_KIND = next(kind for kind, body in wire.KINDS.items() if body is wire.QueryRequest)


def pub_endpoint(bind: str) -> str:
    """The PUB endpoint beside a ROUTER endpoint: the next port, or ``bind + '.pub'``."""
    parsed = parse_tcp(bind, wildcard=True)
    if parsed is not None:
        host, _ = bind.rsplit(":", 1)
        return f"{host}:{parsed.port + 1}"
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

    def __post_init__(self) -> None:
        """Refuse, before anything binds or writes, what the hub could not run with."""
        check_bind(self.bind)
        if self.pub:
            check_bind(self.pub, "--pub")
        else:
            parsed = parse_tcp(self.bind, wildcard=True)
            if parsed is not None and parsed.port == 65535:
                msg = (f"--bind {self.bind!r} leaves no next port to announce heads on; "
                       "give a lower port, or --pub ENDPOINT")
                raise LedgerConfigError(msg)
        for name, value, least in (("queue_bound", self.queue_bound, 1),
                                   ("max_batch", self.max_batch, 1),
                                   ("query_bound", self.query_bound, 1),
                                   ("query_workers", self.query_workers, 0)):
            if value < least:
                msg = f"{name} must be {least} or more, not {value}"
                raise LedgerConfigError(msg)


class _Refusal(Exception):
    """A request refused before it was queued."""

    def __init__(self, error: LessonLedgerError) -> None:
        super().__init__(str(error))
        self.error = error


def _reply(body: msgspec.Struct, request: int) -> bytes:
    return wire.encode_frame(body, request)


def _refused(error: LessonLedgerError) -> wire.Refused:
    return wire.refusal(error)


class _WriterLink:
    """The front's end of the writer: its process and the two sockets to it."""

    def __init__(self, config: HubConfig, context: zmq.Context[Any], directory: str) -> None:
        self.work: zmq.Socket[Any] = context.socket(zmq.PUSH)
        self.reports: zmq.Socket[Any] = context.socket(zmq.PULL)
        # Unbounded: the queue bound bounds what is sent, and a send that blocked would
        # stall the front.
        self.work.setsockopt(zmq.SNDHWM, 0)
        self.reports.setsockopt(zmq.RCVHWM, 0)
        for sock in (self.work, self.reports):
            sock.setsockopt(zmq.LINGER, 0)
        endpoints = {"work": f"ipc://{directory}/work", "reports": f"ipc://{directory}/reports"}
        self.work.bind(endpoints["work"])
        self.reports.bind(endpoints["reports"])
        args = {"home": config.home, "bind": config.bind, "sync": config.sync,
                "max_batch": config.max_batch,
                "commit_delay": config.commit_delay, "parent": os.getpid(),
                "log_level": log.getEffectiveLevel(), **endpoints}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lessonledger.sync.hub_writer", json.dumps(args)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.done = False
        self.stop_sent = False
        self._checked = time.monotonic()

    def send(self, *parts: bytes) -> bool:
        """Send one message to the writer; False if it is not there to take it.

        Never blocking: a PUSH with no peer (the writer died) would wait forever, and
        the front with it.
        """
        try:
            self.work.send_multipart(list(parts), zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        return True

    def stop(self) -> None:
        if not self.stop_sent and self.proc.poll() is None:
            self.stop_sent = True
            self.send(STOP)

    def gone(self) -> int:
        """The exit code of a writer that took no more work (waited for a moment)."""
        try:
            return self.proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # it is there but not taking work: it is no writer
            return self.proc.wait()

    def exited(self, *, now: bool = False) -> int | None:
        """The writer's exit code once it is gone (looked at every CHECK_EVERY)."""
        t = time.monotonic()
        if not now and t - self._checked < CHECK_EVERY:
            return None
        self._checked = t
        return self.proc.poll()

    def close(self) -> None:
        """Wait for the writer to exit (kill it if it does not), close the sockets."""
        self.stop()
        try:
            self.proc.wait(STOP_WAIT if self.done or self.stop_sent else 0.1)
        except subprocess.TimeoutExpired:
            log.warning("the hub's writer did not stop; killing it")
            self.proc.kill()
            self.proc.wait()
        self.work.close()
        self.reports.close()


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
        #: Requests handed to the writer and not yet answered: seq → (client, identity,
        #: request id). Its size is the queue's depth.
        self._inflight: dict[int, tuple[str, bytes, int]] = {}
        self._seq = 0
        #: Work read in this burst, handed to the writer in one message after it.
        self._outgoing: list[Work] = []
        #: Status and subscribe requests whose key's grant the writer is looking up.
        self._checks: dict[int, wire.StatusRequest | wire.SubscribeRequest] = {}
        #: Requests each client has waiting at the writer.
        self._waiting: collections.Counter[str] = collections.Counter()
        self._per_client = max(1, int(config.queue_bound * PER_CLIENT))
        self._pool: QueryPool | None = None
        self._writer: _WriterLink | None = None
        self._stopping = threading.Event()
        #: A handshake (the ZAP thread) wants the writer's grants; set once they came.
        self._want_grants = threading.Event()
        self._grants_came = threading.Event()
        self._clients: dict[bytes, float] = {}
        self._not_reading: set[bytes] = set()
        self._pub_endpoint = config.pub or pub_endpoint(config.bind)
        self._pruned = time.monotonic()
        #: Set while the front's loop runs (it passes a handshake's question on).
        self._serving = False
        self.head = 0

    # -- lifetime ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking work; :meth:`run` commits and answers what is queued, then returns."""
        self._stopping.set()

    def run(self) -> None:
        """Serve until :meth:`stop`; return once everything queued is committed and answered.

        Raises:
            LedgerConfigError: the endpoint cannot be bound (in use, malformed), or the
                writer could not open the home or died.
        """
        ctx = self._context
        router = ctx.socket(zmq.ROUTER)
        pub = ctx.socket(zmq.PUB)
        for sock in (router, pub):
            sock.setsockopt(zmq.LINGER, 1000)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # libzmq drops (and disconnects) anything far over our limit before we see it;
        # a frame somewhat over it still reaches decode_frame and gets a typed refusal.
        router.setsockopt(zmq.MAXMSGSIZE, 2 * wire.MAX_FRAME_BYTES)
        auth: Authenticator | None = None
        if self.config.server_secret:
            # ZAP is per context: the handler asks at every handshake, and the answer is
            # the writer's grants as they stand then (it folds what others wrote first),
            # so a key granted or revoked by another process a moment ago is let in or
            # kept out at once, not after the next refresh.
            auth = start_authenticator(ctx, self._allowed_now,
                                       on_refused=lambda _key: self.stats.refused("key"))
            for sock in (router, pub):
                sock.curve_secretkey = self.config.server_secret
                sock.curve_publickey = self.config.server_public
                sock.curve_server = True
        pool: QueryPool | None = None
        try:
            pool = QueryPool(self.config.home,
                             self.config.query_workers or default_workers(),
                             self.config.query_bound, ctx, self.stats)
            self._pool = pool
            self._writer = _WriterLink(self.config, ctx, pool.directory)
            pool.start()
            warm_up()  # the front screens every command for credentials: not on the first
            self._await_writer(pub)
            # Bound once the writer is ready: a client that connected earlier would have
            # timed out and resent meanwhile, and its first request be answered to a
            # socket it had closed.
            try:
                router.bind(self.config.bind)
                pub.bind(self._pub_endpoint)
            except zmq.ZMQError as e:
                msg = f"cannot listen on {self.config.bind} / {self._pub_endpoint}: {e}"
                raise LedgerConfigError(msg) from e
            log.info("hub serving %s on %s (heads on %s, principals: %s)",
                     self.config.home, self.config.bind, self._pub_endpoint,
                     self.authority.mode)
            if self._on_bound is not None:
                self._on_bound()
            self._serve(router, pub)
        finally:
            self._stopping.set()
            if self._writer is not None:
                self._writer.close()
            if pool is not None:
                pool.close()
            for sock in (router, pub):
                sock.close()
            if auth is not None:
                auth.stop()
            if self._own_context:
                self._context.term()
        log.info("hub stopped at head %d after %d batches", self.head, self.stats.batches)

    def _await_writer(self, pub: zmq.Socket[Any]) -> None:
        """Wait for the writer's ``ready`` (it opened the home, with the grants).

        Raises:
            LedgerConfigError: it exited first, or took longer than :data:`START_WAIT`.
        """
        writer = self._writer
        assert writer is not None, "started by run()"
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if writer.reports.poll(100, zmq.POLLIN):
                parts = _unpacked(writer.reports.recv_multipart())
                report = _report.decode(parts[0])
                if report.kind == "failed":
                    raise LedgerConfigError(report.error)
                if report.kind == "ready":
                    self._forward(None, pub, parts)
                    return
            code = writer.exited(now=True)
            if code is not None:
                msg = (f"the hub's writer exited with code {code} before it could open "
                       f"{self.config.home}; its error is in the hub's log")
                raise LedgerConfigError(msg)
        msg = f"the hub's writer did not open {self.config.home} in {START_WAIT:.0f} s"
        raise LedgerConfigError(msg)

    # -- the front -----------------------------------------------------------------------

    def _serve(self, router: zmq.Socket[Any], pub: zmq.Socket[Any]) -> None:
        writer, pool = self._writer, self._pool
        assert writer is not None, "made by run() before it serves"
        assert pool is not None, "made by run() before it serves"
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(writer.reports, zmq.POLLIN)
        poller.register(pool.socket, zmq.POLLIN)
        answer = lambda identity, data: self._send(router, identity, data)  # noqa: E731
        quiet = False
        self._serving = True
        while True:
            if self._stopping.is_set():
                # Stopping ends once the writer and the workers are done and a whole poll
                # brought nothing more: a request still in the socket is answered busy.
                writer.stop()
                if quiet and writer.done and not pool.pending:
                    return
            if self._want_grants.is_set():
                self._want_grants.clear()
                writer.send(GRANTS)
            events = dict(poller.poll(POLL_MS))
            quiet = not events
            if time.monotonic() - self._pruned > CLIENT_WINDOW:
                self._prune()
            if pool.socket in events:
                pool.take(answer)
            pool.check(answer)
            if writer.reports in events:
                self._reports(router, pub)
            if router in events:
                burst: list[list[zmq.Frame]] = []
                for _ in range(256):  # a burst, then give the replies a turn
                    try:
                        burst.append(router.recv_multipart(zmq.NOBLOCK, copy=False))
                    except zmq.Again:
                        break
                self._take_burst(router, burst)
                if self._outgoing:
                    sent = writer.send(WORK, _encoder.encode(self._outgoing))
                    self._outgoing = []
                    if not sent:
                        self._writer_died(router, pub, writer.gone())
            if not writer.done:
                code = writer.exited()
                if code is not None:
                    self._writer_died(router, pub, code)

    def _writer_died(self, router: zmq.Socket[Any], pub: zmq.Socket[Any], code: int) -> None:
        """Answer what the dead writer held ``busy`` (they retry), then stop with an error.

        Raises:
            LedgerConfigError: always.
        """
        self._reports(router, pub)  # what it reported before it went
        for _client, identity, request in self._inflight.values():
            self._busy(router, identity, request, "the hub's writer stopped; retry")
        self._inflight.clear()
        msg = f"the hub's writer exited with code {code}; its error is in the hub's log"
        raise LedgerConfigError(msg)

    def _reports(self, router: zmq.Socket[Any], pub: zmq.Socket[Any]) -> None:
        assert self._writer is not None, "made by run() before it serves"
        while True:
            try:
                parts = self._writer.reports.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._forward(router, pub, _unpacked(parts))

    def _forward(self, router: zmq.Socket[Any] | None, pub: zmq.Socket[Any],
                 parts: list[bytes]) -> None:
        """Take one writer report: counts, grants, head; send the replies it carries."""
        report = _report.decode(parts[0])
        if report.grants:
            self.authority.refresh(_grants.decode(report.grants))
        if report.kind == "asked":
            self._grants_came.set()
        elif report.kind == "done":
            assert self._writer is not None, "made by run() before it serves"
            self._writer.done = True
        if report.batch is not None:
            # Logged here, not by the writer: its process is the one the hub waits on.
            size, events, seconds = report.batch
            log.info("batch of %d requests, %d events, %.1f ms, head %d", size, events,
                     seconds * 1000, report.head if report.head >= 0 else self.head)
            self.stats.batch(*report.batch)
        for name in report.refused:
            self.stats.refused(name)
        answered: dict[int, tuple[str, bytes, int]] = {}
        for seq in report.taken:
            taken = self._inflight.pop(seq, None)
            if taken is not None:
                answered[seq] = taken
                client = taken[0]
                self._waiting[client] -= 1
                if self._waiting[client] <= 0:
                    del self._waiting[client]
        if router is not None and report.kind == "checked":
            for seq, i in zip(report.taken, range(1, len(parts), 2), strict=True):
                asked, entry = self._checks.pop(seq, None), answered.get(seq)
                if asked is None or entry is None:
                    continue
                if parts[i + 1]:
                    self._send(router, parts[i], parts[i + 1])  # the refusal
                else:
                    self._answer(router, parts[i], entry[2], asked)
        elif router is not None:
            for i in range(1, len(parts), 2):
                self._send(router, parts[i], parts[i + 1])
        if report.head >= 0:
            moved = report.head != self.head
            self.head = report.head
            if moved and report.kind == "batch":
                pub.send_multipart([b"head", self.head.to_bytes(8, "big")])

    def _allowed_now(self, key: bytes) -> bool:
        """Whether a CURVE client key has a grant as the log stands (the ZAP thread asks)."""
        self._refresh_grants()
        return self.authority.allowed(key)

    def _refresh_grants(self) -> None:
        """Take the grants in force now (a handshake: see :meth:`_allowed_now`).

        Called on the ZAP thread: the front asks the writer, which folds what others
        wrote first, and this waits for the answer (:data:`GRANTS_WAIT` at most).
        """
        if not self._serving or self._stopping.is_set():
            return  # nobody would pass the question on: the copy it is
        self._grants_came.clear()
        self._want_grants.set()
        self._grants_came.wait(GRANTS_WAIT)

    def _send(self, router: zmq.Socket[Any], identity: bytes, data: bytes) -> None:
        try:
            router.send_multipart([identity, data], zmq.NOBLOCK, copy=False)  # as the writer
        except zmq.Again:
            # Its pipe is full: it is not reading. Its reply is lost to it, not to others.
            if identity not in self._not_reading:
                self._not_reading.add(identity)
                log.warning("client %s is not reading its replies; dropping them",
                            identity.hex())
            self.stats.dropped_reply()
        except zmq.ZMQError:
            self.stats.dropped_reply()  # gone (EHOSTUNREACH): it will retry if it cares

    def _take_burst(self, router: zmq.Socket[Any], burst: list[list[zmq.Frame]]) -> None:
        """Take a burst of requests, its queries first.

        A query never waits for a commit, so it need not wait either for the front to
        decode and screen the commands that came in the same burst (about 0.1-0.2 ms
        each, 16 of them with 16 publishers): it is handed to a worker first. Only
        requests of different clients change places (a client waits for each reply).
        """
        later: list[tuple[bytes, str | None, wire.Frame]] = []
        for parts in burst:
            taken = self._frame_of(router, parts)
            if taken is None:
                continue
            if taken[2].kind == _QUERY_KIND:
                self._take(router, *taken)
            else:
                later.append(taken)
        for taken in later:
            self._take(router, *taken)

    def _frame_of(self, router: zmq.Socket[Any], parts: list[zmq.Frame]
                  ) -> tuple[bytes, str | None, wire.Frame] | None:
        """A message's sender, key and checked frame; None if it was refused."""
        if len(parts) != 2:
            log.warning("refused a message of %d parts (a frame is one part)", len(parts) - 1)
            if parts:
                err = wire.WireError("a request is one ZeroMQ frame", "garbage")
                self._send(router, parts[0].bytes, _reply(_refused(err), 0))
            self.stats.refused("garbage")
            return None
        identity, data = parts[0].bytes, parts[1]
        user_id = _user_id(data)
        now = time.monotonic()
        if identity not in self._clients:
            log.info("client %s connected (%s)", identity.hex(),
                     f"key {user_id}" if user_id else "no key")
        self._clients[identity] = now
        try:
            return identity, user_id, wire.decode_frame(data.buffer)
        except wire.WireError as e:
            log.warning("refused a frame from client %s: %s", identity.hex(), e.problem)
            self.stats.refused(e.problem)
            self._send(router, identity, _reply(_refused(e), 0))
            return None

    def _take(self, router: zmq.Socket[Any], identity: bytes, user_id: str | None,
              frame: wire.Frame) -> None:
        request = frame.id
        try:
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
        if isinstance(body, wire.StatusRequest | wire.SubscribeRequest):
            writer = self._writer
            if access.key and writer is not None and not writer.stop_sent:
                # By the key's grant as it stands (the writer looks it up), not by the
                # copy: answered in _answer_checked.
                self._seq += 1
                self._checks[self._seq] = body
                self._queue(router, Work(self._seq, identity, frame.id, "check", access, []))
            else:
                self._answer(router, identity, frame.id, body)
            return
        if self._stopping.is_set():
            self._busy(router, identity, frame.id, "the hub is shutting down")
            return
        if isinstance(body, wire.QueryRequest):
            assert self._pool is not None, "made by run() before it serves"
            if not self._pool.submit(identity, frame.id, access, bytes(frame.body)):
                self._busy(router, identity, frame.id, "the hub's query queue is full")
            return
        self._seq += 1
        self._queue(router, _work(self._seq, identity, frame.id, access, body))

    def _queue(self, router: zmq.Socket[Any], work: Work) -> None:
        """Hand ``work`` to the writer with this burst, or answer ``busy``."""
        identity, request = work.identity, work.request
        client = _client(work)
        mine = self._waiting[client]
        if mine >= self._per_client:
            self._checks.pop(work.seq, None)
            self._busy(router, identity, request,
                       f"this client has {mine} requests waiting at the hub already")
            return
        if len(self._inflight) >= self.config.queue_bound:
            self._checks.pop(work.seq, None)
            self._busy(router, identity, request, "the hub's queue is full")
            return
        self._waiting[client] = mine + 1
        self._inflight[work.seq] = (client, identity, request)
        self._outgoing.append(work)

    def _answer(self, router: zmq.Socket[Any], identity: bytes, request: int,
                body: wire.StatusRequest | wire.SubscribeRequest) -> None:
        """Answer a status or subscribe request (its key's grant was found in force)."""
        if isinstance(body, wire.StatusRequest):
            self._send(router, identity, _reply(self.status(), request))
        else:
            self._send(router, identity, _reply(wire.Subscribed(self._pub_endpoint, self.head),
                                                request))

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
                                   queue_depth=len(self._inflight))


def _unpacked(parts: list[bytes]) -> list[bytes]:
    """A writer's report as ``[report, identity, reply, ...]``.

    Its replies come packed in one part, or, when large, each in a part of its own
    (:meth:`~lessonledger.sync.hub_writer.Writer._report`): a packed report has two parts
    exactly, since an unpacked one with any reply has an identity and a reply besides.
    """
    return [parts[0], *_replies.decode(parts[1])] if len(parts) == 2 else parts


def _client(work: Work) -> str:
    """Whose share of the queue ``work`` takes: its key's, or its connection's."""
    return work.access.key or work.identity.hex()


def _user_id(frame: zmq.Frame) -> str | None:
    """The ZAP User-Id of a CURVE connection (the client's Z85 key), None without CURVE."""
    return client_key(frame) or None


def _work(seq: int, identity: bytes, request: int, access: Access, body: msgspec.Struct
          ) -> Work:
    """Queue-able work from a request body; a body that cannot be decoded is refused.

    A command is checked here, on the front thread, as ``execute`` would check it (its
    schema, the credential screen, its principal), so the writer does only what needs
    the log: the grant on the lesson's project, and deciding.
    """
    try:
        if isinstance(body, wire.CommandRequest):
            return Work(seq, identity, request, "command", access,
                        [_raw(_checked(_decode_command(body.command), access))])
        if isinstance(body, wire.BatchRequest):
            if not body.commands:
                raise _Refusal(InvalidCommandError("a batch needs at least one command"))
            if len(body.commands) > wire.MAX_BATCH_COMMANDS:
                # Before decoding any: the front refuses it at once, the writer never sees it.
                raise _Refusal(wire.BatchTooLargeError(len(body.commands)))
            return Work(seq, identity, request, "batch", access,
                        [_raw(_checked(_decode_command(c), access)) for c in body.commands])
        if isinstance(body, wire.EraseRequest):
            return Work(seq, identity, request, "erase", access,
                        [_raw(_erase.decode(body.erase))])
        if isinstance(body, wire.SubmitRequest):
            return Work(seq, identity, request, "submit", access,
                        [_raw(parse_submission(body.submission))])
        if isinstance(body, SyncFrame):
            return Work(seq, identity, request, "sync", access, [_raw(body.frame)])
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
    """The command as the ledger would check it, with the connection's principal.

    No ``checked_command`` here: it was decoded from msgpack into its Struct by a
    typed decoder, which checked every bound and refused a string that is not UTF-8
    (a lone surrogate cannot be encoded), as ``checked_command``'s round trip would.
    """
    refuse_credentials(command)
    if not isinstance(command, GrantAccess):  # a grant's principal is its grantee
        require_own_principal(access, command.principal)
    bound: AnyCommand | SkillCommand | AccessCommand = bound_to_caller(command,
                                                                       access.principal)
    return bound


def _raw(item: Any) -> msgspec.Raw:
    """``item`` msgpack-encoded, as the writer decodes it."""
    return msgspec.Raw(_encoder.encode(item))


def _decode_command(raw: msgspec.Raw) -> AnyCommand | SkillCommand | AccessCommand:
    command: AnyCommand | SkillCommand | AccessCommand = _command.decode(raw)
    return command
