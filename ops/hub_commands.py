"""``lessonledger serve`` and ``status``: run a hub on a home, and ask one how it is doing.

A hub is the home's one writer; agents anywhere send it commands and queries (see
:mod:`lessonledger.sync.hub`). With ``--key`` it runs CURVE: a client's key must have a
grant, which names its principal and what it may read and write. Without keys it binds
loopback only, and every connection writes as the principal given with ``--principal``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from typing import Any

from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ops.config import seconds
from lessonledger.ops.render import count_option, echo, nonblank, print_json
from lessonledger.sync.authority import Authority, GrantAuthority, LoopbackAuthority
from lessonledger.sync.client import RemoteLedger
from lessonledger.sync.endpoints import check_bind, check_hub_address, is_loopback
from lessonledger.sync.hub import DEFAULT_BIND, Hub, HubConfig
from lessonledger.sync.keys import load_secret

__all__ = ["add_remote", "register", "remote"]


def _cmd_serve(args: argparse.Namespace) -> int:
    # Every option is checked before the home is made or a port bound: a typo costs
    # one line, not a hub half started or an empty home left behind.
    authority: Authority
    public = secret = b""
    if args.key is not None:
        public, secret = load_secret(args.key)
        authority = GrantAuthority()
    else:
        authority = LoopbackAuthority(args.principal, admin=not args.no_admin)
    check_bind(args.bind)
    if args.key is None and not is_loopback(args.bind):
        msg = (f"refusing to bind {args.bind} without CURVE keys: anyone who can reach it "
               "could write as the hub's principal; bind tcp://127.0.0.1:PORT, or give "
               "--key HUB.key_secret (see `lessonledger keys new`)")
        raise LedgerConfigError(msg)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("bm25s",):  # libraries that log every index build at INFO and below
        logging.getLogger(noisy).setLevel(logging.WARNING)
    hub = Hub(HubConfig(home=str(args.home), bind=args.bind, pub=args.pub or "",
                        queue_bound=args.queue, max_batch=args.max_batch,
                        query_workers=args.query_workers,
                        server_secret=secret, server_public=public), authority)
    # Drain on SIGTERM and on ^C: stop taking work, commit and answer what is queued.
    signal.signal(signal.SIGTERM, lambda *_: hub.stop())
    signal.signal(signal.SIGINT, lambda *_: hub.stop())
    if args.metrics is None:
        hub.run()
        return 0
    # Here, not at the top: lesson_commands imports this module for --to.
    from lessonledger.ops.hub_metrics import hub_metrics

    bind, port = args.metrics
    with hub_metrics(hub.stats, args.home, bind, port):
        hub.run()
    return 0


#: Query workers a hub may start at most: each is a process folding every event the
#: writer commits, so more than the machine's cores only adds memory and contention.
MAX_QUERY_WORKERS = max(8, os.cpu_count() or 1)


def _workers(text: str) -> int:
    """``--query-workers``'s type: a count of one or more, no more than the cores."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_QUERY_WORKERS:
        msg = (f"--query-workers takes a count from 1 to {MAX_QUERY_WORKERS} (each is a "
               f"process folding every event), not {text!r}")
        raise argparse.ArgumentTypeError(msg)
    return count


def _address(text: str) -> tuple[str, int]:
    """``--metrics``'s type: HOST:PORT, as ``lessonledger metrics`` reads it."""
    from lessonledger.ops.metrics_commands import address

    return address(text)


def _hub(text: str) -> str:
    """``--to``'s type: a hub address (an empty one would quietly mean the local home)."""
    try:
        check_hub_address(text)
    except LedgerConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_remote(p: argparse.ArgumentParser, key_flag: str = "--key") -> None:
    """Give a verb ``--to`` (a hub endpoint) and the CURVE key options.

    ``key_flag`` names the client's key file option: ``--key-file`` on verbs whose
    ``--key`` is already the command's idempotency key.
    """
    p.add_argument("--to", metavar="ENDPOINT", default=None, type=_hub, help=(
        "ask a hub (tcp://HOST:PORT) instead of opening the home"))
    p.add_argument(key_flag, metavar="FILE", default=None, dest="client_key",
                   help="with --to: this client's secret key file (NAME.key_secret)")
    p.add_argument("--server-key", metavar="FILE", default=None,
                   help="with --to: the hub's public key file")
    p.add_argument("--wait", type=seconds, default=30.0, metavar="SECONDS",
                   help="with --to: give up on a hub that does not answer (default 30)")


def remote(args: argparse.Namespace) -> RemoteLedger:
    """The hub client a verb's ``--to``, ``--key`` and ``--server-key`` name."""
    return RemoteLedger(args.to, key=args.client_key, server_key=args.server_key,
                        timeout=min(10.0, args.wait), deadline=args.wait)


def _cmd_status(args: argparse.Namespace) -> int:
    with remote(args) as hub:
        status = hub.status()
    if args.json:
        print_json(status)
        return 0
    started = datetime.fromtimestamp(status.started_at / 1e9, tz=UTC).isoformat(
        timespec="seconds")
    echo(f"hub {args.to}: head {status.head:,}, {status.clients} clients, queue "
         f"{status.queue_depth}/{status.queue_bound}, principals by {status.principal_mode}")
    echo(f"  {status.batches:,} batches of {status.commands:,} requests, "
         f"{status.events:,} events ({status.mean_batch_size:.1f} requests, "
         f"{status.events_per_commit:.1f} events per commit)")
    echo(f"  last batch sizes: {status.last_batch_sizes}")
    echo(f"  refusals {status.refusals:,}, busy {status.busy:,}; up since {started}")
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add serve and status to the CLI's sub-parsers."""
    serve = sub.add_parser("serve", help=(
        "run a hub: this home's one writer, over ZeroMQ (the home is created if missing)"))
    serve.add_argument("--bind", default=DEFAULT_BIND, metavar="ENDPOINT", help=(
        f"where clients connect (default {DEFAULT_BIND}); without keys loopback only"))
    serve.add_argument("--pub", default=None, metavar="ENDPOINT",
                       help="where new heads are announced (default: the next port)")
    serve.add_argument("--key", metavar="FILE", default=None, help=(
        "the hub's secret key file (HUB.key_secret): CURVE on, clients need a key with "
        "a grant (`lessonledger access grant`), and their principal is the grant's"))
    serve.add_argument("--principal", default="operator", type=nonblank, help=(
        "without keys: the principal every connection writes as (default operator)"))
    serve.add_argument("--no-admin", action="store_true",
                       help="without keys: connections may not erase or reconcile")
    serve.add_argument("--queue", type=count_option(1), default=4096, metavar="N",
                       help="commands waiting at most; more are answered busy (default 4096)")
    serve.add_argument("--max-batch", type=count_option(1), default=512, metavar="N",
                       help="commands committed in one transaction at most (default 512)")
    serve.add_argument("--query-workers", type=_workers, default=0, metavar="N", help=(
        "processes answering queries, each with its own reader of the home (default: "
        "half the CPUs, at least one), so a recall never waits for the writer's batch"))
    serve.add_argument("--metrics", type=_address, default=None, metavar="HOST:PORT", help=(
        "serve Prometheus metrics at http://HOST:PORT/metrics: the log's counts, "
        "requests and refusals by kind, commit latency and batch size, recall latency, "
        "erasures and their replica acknowledgements (port 0: any, printed on stderr)"))
    serve.set_defaults(run=_cmd_serve)
    status = sub.add_parser("status", help="a hub's head, clients, queue depth, batch sizes")
    add_remote(status)
    status.add_argument("--json", action="store_true", help="print as JSON")
    status.set_defaults(run=_cmd_status)
    for action in status._actions:
        if action.dest == "to":
            action.required = True
