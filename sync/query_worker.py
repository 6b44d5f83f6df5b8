"""A hub's query worker: a process of its own answering queries from its own Reader.

The hub's front (:mod:`lessonledger.sync.query_pool`) starts these with
``python -m lessonledger.sync.query_worker ENDPOINT HOME PARENT_PID NAME``. A query
answered here never waits for the GIL of the writer's process, so a recall's latency
does not grow with the writer's batch. Each worker holds the home open as any process
does and reads LMDB snapshots, so it never waits for the writer's commit either.

What the front sends is trusted (the connection's :class:`~lessonledger.sync.authority.Access`
as the hub's authority decided it): the endpoint is an ``ipc://`` socket in a directory
only the hub's user may enter.

A worker outlives nothing: it exits when told ``stop``, when its parent is gone (the
kernel's parent-death signal on Linux, and a look at its parent pid between requests
everywhere; it then removes the hub's ipc directory, which a killed hub left), and on
SIGTERM; it ignores SIGINT, so ^C at a terminal reaches the hub,
which drains the workers itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import struct
import sys
import time
from types import FrameType
from typing import Any

import msgspec
import zmq
from lessonledger.commands.read_side import Reader
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.sync import wire
from lessonledger.sync.authority import Access
from lessonledger.sync.orphans import die_with_parent
from lessonledger.sync.queries import answer_bytes

__all__ = ["DIR_PREFIX", "READY", "STOP", "main", "serve"]

log = logging.getLogger("lessonledger.hub")

#: Sent once the worker's Reader is open; the front then gives it queries.
READY = b"ready"
#: Sent by the front: commit queued recall records, let go of the home, exit.
STOP = b"stop"
#: How the hub's private ipc directory's name begins (``tempfile.mkdtemp``'s prefix).
DIR_PREFIX = "lessonledger-hub-"
#: Milliseconds between two looks at the parent while no query comes.
PARENT_EVERY_MS = 200
#: Milliseconds between two folds of what the writer committed while queries come: a
#: query then folds only the last few events, not every one since the query before
#: (under 16 publishers, 10-30 events and a third of a recall's time).
FOLD_EVERY_MS = 3
#: Seconds after a query during which the worker keeps folding between queries; an
#: idle hub's workers wake only to look at their parent.
BUSY_FOR = 1.0
#: Seconds an exiting worker waits to see whether its hub is gone (see _parent_gone).
PARENT_GONE_WAIT = 1.0
_seconds = struct.Struct(">d")
_access = msgspec.msgpack.Decoder(Access)
_query = msgspec.msgpack.Decoder(wire.QueryRequest)
_request = struct.Struct(">Q")



def _terminate(signum: int, frame: FrameType | None) -> None:
    # Once: the death signal comes again as each thread of a killed hub exits, and a
    # second SystemExit would cut short the Reader's commit and the cleanup below it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(0)


def serve(endpoint: str, home: str, parent: int, name: str,
          context: zmq.Context[Any] | None = None) -> None:
    """Answer the front's queries until told ``stop`` or the parent is gone."""
    ctx = context or zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)
    sock.setsockopt(zmq.ROUTING_ID, name.encode())
    sock.connect(endpoint)
    stopped = False
    try:
        with Reader(home, read_only=False) as reader:
            sock.send(READY)
            asked = float("-inf")  # when the last query came
            looked = time.monotonic()  # when the parent was last looked at
            while True:
                busy = time.monotonic() - asked < BUSY_FOR
                if not sock.poll(FOLD_EVERY_MS if busy else PARENT_EVERY_MS, zmq.POLLIN):
                    if busy:
                        _follow(reader)
                    if time.monotonic() - looked >= PARENT_EVERY_MS / 1000:
                        looked = time.monotonic()
                        if os.getppid() != parent:
                            log.warning("query worker %s: the hub (pid %d) is gone; "
                                        "exiting", name, parent)
                            return
                    continue
                asked = time.monotonic()
                parts = sock.recv_multipart()
                if parts[0] == STOP:
                    stopped = True  # the hub cleans up after its workers
                    return
                identity, request, access, query = parts
                started = time.perf_counter()
                decoded = _query.decode(query)
                reply = answer_bytes(reader, _access.decode(access), decoded,
                                     _request.unpack(request)[0])
                sock.send_multipart([identity, reply,
                                     _seconds.pack(time.perf_counter() - started),
                                     decoded.query.encode()])
    finally:
        sock.close()
        if context is None:
            ctx.term()
        if not stopped and _parent_gone(parent):
            _remove_endpoint_dir(endpoint)


def _follow(reader: Reader) -> None:
    """Fold what the writer committed since, between queries (see :data:`FOLD_EVERY_MS`).

    A failure is left to the next query, which folds first and answers it as a refusal.
    """
    with contextlib.suppress(LessonLedgerError):
        reader.fold_to_head()


def _parent_gone(parent: int) -> bool:
    """True once the hub is gone: this process was handed to another parent.

    The death signal comes as the hub's thread that started this worker exits, which
    can be before the rest of a killed hub is gone: a moment is allowed for that.
    """
    deadline = time.monotonic() + PARENT_GONE_WAIT
    while os.getppid() == parent:
        if time.monotonic() >= deadline:
            return False  # a SIGTERM of its own: the hub lives and keeps its directory
        time.sleep(0.02)
    return True


def _remove_endpoint_dir(endpoint: str) -> None:
    """Remove the hub's private ipc directory: a hub killed outright could not.

    Only a directory the query pool made (its name says so) is removed; every worker of
    the hub may try, and the first one does it.
    """
    path = endpoint.removeprefix("ipc://")
    folder = os.path.dirname(path)
    if endpoint.startswith("ipc://") and os.path.basename(folder).startswith(DIR_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """The worker process: ``ENDPOINT HOME PARENT_PID NAME`` on the command line."""
    endpoint, home, parent, name = (argv if argv is not None else sys.argv[1:])
    die_with_parent(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminate)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        if os.getppid() == int(parent):  # else the hub died before the signal was asked for
            serve(endpoint, home, int(parent), name)
    finally:
        if os.getppid() != int(parent):
            # The hub is gone (killed): nobody else removes its private directory.
            shutil.rmtree(os.path.dirname(endpoint.removeprefix("ipc://")),
                          ignore_errors=True)


if __name__ == "__main__":
    main()
