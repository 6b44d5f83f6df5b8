"""The hub's query workers, seen from its front: start them, hand out queries, stop them.

Queries are answered in worker processes (:mod:`lessonledger.sync.query_worker`), not
on a thread of the writer's process: there a recall waited for the GIL behind the
writer's batch fold, and its p99 grew with the batch. The front owns a ROUTER on an
``ipc://`` endpoint in a private directory (mode 0700, so only the hub's user can
connect to it); each worker connects a DEALER with its name as routing id.

Each query goes to the worker holding the fewest, each holding :data:`CREDIT` at most
(one answered while the next is on its way: a worker never sits idle for a hand-out),
so a slow query (a long ``log`` page) holds up only the few behind it on its worker.
While every worker is full, queries wait in
a queue per client, taken in turn, one client after another: a client flooding queries
delays each other client by one query at most, not by its whole backlog. The queues are
bounded, in all and per client (:data:`PER_CLIENT` of the whole). A client is a CURVE
key, not a connection: a key that opens many connections still holds one queue and one
turn (on a keyless hub, where every connection is the same principal, a connection).

A worker that dies is started again, and the clients of the queries it held are answered
``busy`` (they retry), never left to their timeout.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import msgspec
import zmq
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.sync import wire
from lessonledger.sync.authority import Access
from lessonledger.sync.query_worker import DIR_PREFIX, READY, STOP
from lessonledger.sync.stats import HubStats

__all__ = ["QueryPool", "default_workers"]

log = logging.getLogger("lessonledger.hub")

#: Queries one worker holds at most (sent to it, not yet answered).
CREDIT = 4
#: Seconds a worker has to exit once told ``stop`` before it is killed.
STOP_WAIT = 15.0
#: Seconds between two looks for dead workers.
CHECK_EVERY = 1.0
#: Milliseconds a busy client is told to wait when its query's worker died.
RETRY_AFTER_MS = 20

#: The share of the query bound one client's waiting queries may take.
PER_CLIENT = 1 / 16

_seconds = struct.Struct(">d")
_request = struct.Struct(">Q")
_encoder = msgspec.msgpack.Encoder()

#: Sends one reply to a client: its routing identity, the frame.
Send = Callable[[bytes, bytes], None]


def default_workers(cpus: int | None = None) -> int:
    """Query workers for this machine: half its CPUs (one at least, eight at most).

    The writer's process keeps a core for its batches; each worker folds every event
    the writer commits into its own view, so more workers than cores buy nothing.
    """
    count = os.cpu_count() if cpus is None else cpus
    return max(1, min(8, (count or 2) // 2))


class _Worker:
    def __init__(self, name: bytes, proc: subprocess.Popen[bytes]) -> None:
        self.name = name
        self.proc = proc
        self.ready = False
        #: The queries it holds, oldest first: each client's identity and request id.
        self.holding: deque[tuple[bytes, int]] = deque()


class QueryPool:
    """The hub's query workers (see the module doc). Used from the front thread only.

    Args:
        home: the home the workers read.
        workers: how many processes.
        bound: queries waiting at most; more are refused (``submit`` returns False).
        context: the hub's ZeroMQ context.
        stats: where each answered query is counted.
    """

    def __init__(self, home: str, workers: int, bound: int, context: zmq.Context[Any],
                 stats: HubStats) -> None:
        if workers < 1:
            msg = f"a hub needs at least one query worker, not {workers}"
            raise LedgerConfigError(msg)
        self.home = home
        self.count = workers
        self.bound = bound
        self.stats = stats
        self._dir = tempfile.mkdtemp(prefix=DIR_PREFIX)  # 0700: ours alone
        self.endpoint = f"ipc://{self._dir}/queries"
        self.socket: zmq.Socket[Any] = context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 1000)
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        try:
            self.socket.bind(self.endpoint)
        except zmq.ZMQError as e:
            self.socket.close(0)
            shutil.rmtree(self._dir, ignore_errors=True)
            msg = f"cannot listen for query workers on {self.endpoint}: {e}"
            raise LedgerConfigError(msg) from e
        self._workers: dict[bytes, _Worker] = {}
        #: Waiting queries by client (key, or connection on a keyless hub), in the order
        #: the clients take turns.
        self._waiting: OrderedDict[bytes, deque[list[bytes]]] = OrderedDict()
        self._queued = 0
        self._per_client = max(1, int(bound * PER_CLIENT))
        self._started = 0
        self._checked = time.monotonic()

    # -- lifetime ------------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker; each takes queries once it reports ready.

        The hub serves meanwhile: commands and status need no worker, and a query waits
        in its queue until the first worker has opened the home.
        """
        for _ in range(self.count):
            self._spawn()

    def _spawn(self) -> None:
        self._started += 1
        name = f"w{self._started}".encode()
        proc = subprocess.Popen(
            [sys.executable, "-m", "lessonledger.sync.query_worker", self.endpoint,
             self.home, str(os.getpid()), name.decode()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self._workers[name] = _Worker(name, proc)

    def close(self) -> None:
        """Tell every worker to stop, wait for them (kill a stuck one), clean up."""
        for worker in self._workers.values():
            if worker.proc.poll() is None:
                try:
                    self.socket.send_multipart([worker.name, STOP], zmq.NOBLOCK)
                except zmq.ZMQError:
                    worker.proc.terminate()  # not connected (yet): SIGTERM closes it too
        deadline = time.monotonic() + STOP_WAIT
        for worker in self._workers.values():
            try:
                worker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("query worker %s did not stop; killing it", worker.name.decode())
                worker.proc.kill()
                worker.proc.wait()
        self.socket.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def directory(self) -> str:
        """The pool's private directory (mode 0700), for the hub's other ipc endpoints.

        A worker whose hub was killed removes it, with whatever else is in it.
        """
        return self._dir

    # -- work ----------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Queries taken and not yet answered (waiting or held by a worker)."""
        return self._queued + sum(len(w.holding) for w in self._workers.values())

    def submit(self, identity: bytes, request: int, access: Access, query: bytes) -> bool:
        """Queue one query (``query`` is its request body, msgpack); False when full."""
        client = access.key.encode() or identity
        mine = self._waiting.get(client)
        if self._queued >= self.bound or (mine is not None and len(mine) >= self._per_client):
            return False
        if mine is None:
            mine = self._waiting[client] = deque()
        mine.append([identity, _request.pack(request), _encoder.encode(access), query])
        self._queued += 1
        self._hand_out()
        return True

    def _next(self) -> tuple[bytes, list[bytes]]:
        """The client whose turn it is and its first waiting query; it goes to the back."""
        client, mine = next(iter(self._waiting.items()))
        parts = mine.popleft()
        if mine:
            self._waiting.move_to_end(client)
        else:
            del self._waiting[client]
        self._queued -= 1
        return client, parts

    def _hand_out(self) -> None:
        while self._waiting:
            ready = [w for w in self._workers.values() if w.ready and len(w.holding) < CREDIT]
            if not ready:
                return
            worker = min(ready, key=lambda w: len(w.holding))
            client, parts = self._next()
            try:
                self.socket.send_multipart([worker.name, *parts], zmq.NOBLOCK)
            except zmq.ZMQError:
                # It is gone (check() starts another): the query waits for the next.
                worker.ready = False
                self._waiting.setdefault(client, deque()).appendleft(parts)
                self._waiting.move_to_end(client, last=False)
                self._queued += 1
                continue
            worker.holding.append((parts[0], _request.unpack(parts[1])[0]))

    def take(self, send: Send) -> None:
        """Forward every answer the workers have sent; give idle workers what waits."""
        while True:
            try:
                parts = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            worker = self._workers.get(parts[0])
            if worker is None:
                continue
            if parts[1] == READY:
                worker.ready = True
            elif len(parts) == 5:
                _, identity, reply, seconds, name = parts
                self.stats.query(name.decode(), _seconds.unpack(seconds)[0])
                send(identity, reply)
                if worker.holding:
                    worker.holding.popleft()  # answers come back in the order sent
        self._hand_out()

    def check(self, send: Send) -> None:
        """Start a worker for each one that died; answer its query ``busy``.

        Raises:
            LedgerConfigError: a worker exited before it ever opened the home (it would
                again: the hub cannot answer queries).
        """
        now = time.monotonic()
        if now - self._checked < CHECK_EVERY:
            return
        self._checked = now
        for worker in list(self._workers.values()):
            code = worker.proc.poll()
            if code is None:
                continue
            if not worker.ready:
                msg = (f"a query worker exited with code {code} before it could open "
                       f"{self.home}; its error is in the hub's log")
                raise LedgerConfigError(msg)
            log.warning("query worker %s exited with code %d; starting another",
                        worker.name.decode(), code)
            del self._workers[worker.name]
            for identity, request in worker.holding:
                self.stats.busy()
                send(identity, wire.encode_frame(wire.Busy(
                    RETRY_AFTER_MS, "the hub's query worker stopped; retry"), request))
            self._spawn()
