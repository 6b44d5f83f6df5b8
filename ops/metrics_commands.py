"""``lessonledger metrics``: a home's Prometheus metrics over HTTP, for a home without a hub.

It serves what the log says (events by type, erasures, lessons, size, the last
verification; :class:`~lessonledger.ops.metrics.LedgerCollector`). Commands, refusals
and latencies are seen only by the process serving requests: ``lessonledger mcp
--metrics HOST:PORT`` exposes those too.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ops import interrupts
from lessonledger.ops.config import open_log, seconds_or_zero
from lessonledger.ops.lesson_commands import open_queries
from lessonledger.ops.metrics import LedgerCollector, Verifier, serve
from lessonledger.ops.render import add_read_only
from prometheus_client import CollectorRegistry

__all__ = ["address", "register", "serving"]


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) > 65535:
        msg = f"expected a port from 0 to 65535, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def address(text: str) -> tuple[str, int]:
    """An argparse type: ``HOST:PORT`` (``PORT`` alone binds 127.0.0.1)."""
    host, _, port = text.rpartition(":")
    try:
        return host.strip("[]") or "127.0.0.1", _port(port)
    except argparse.ArgumentTypeError:
        msg = f"expected HOST:PORT (e.g. 127.0.0.1:9650), got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


@contextmanager
def serving(registry: CollectorRegistry, bind: str, port: int) -> Iterator[None]:
    """Serve ``registry`` for the length of the block; say where on stderr.

    Raises:
        LedgerConfigError: the address cannot be listened on (a port in use, a host
            that is not this machine's).
    """
    try:
        server = serve(registry, port, bind)
    except OSError as e:
        msg = (f"cannot serve metrics on {bind}:{port}: {e.strerror or e}; choose another "
               "port (or stop what listens there); nothing was started")
        raise LedgerConfigError(msg) from e
    host = f"[{bind}]" if ":" in bind else bind
    print(f"lessonledger: metrics at http://{host}:{server.server_port}/metrics",
          file=sys.stderr, flush=True)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def _until_stopped() -> None:
    """Wait for SIGTERM or Ctrl-C, either of which stops the server cleanly."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        interrupts.handled()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cmd_metrics(args: argparse.Namespace) -> int:
    with open_log(args.home, read_only=args.read_only) as log, \
            open_queries(args.home, read_only=args.read_only) as reader:
        verifier = Verifier(log, args.verify_every).start()
        registry = CollectorRegistry()
        collector = LedgerCollector(log, reader, home=args.home, verifier=verifier)
        collector.catch_up()
        registry.register(collector)
        try:
            with serving(registry, args.bind, args.port):
                _until_stopped()
        finally:
            verifier.stop()
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add metrics to the CLI's sub-parsers."""
    metrics = sub.add_parser("metrics", help=(
        "serve the home's Prometheus metrics over HTTP until stopped"))
    metrics.add_argument("--port", type=_port, default=9650, help=(
        "the port to listen on (default 9650; 0 takes a free one, printed on stderr)"))
    metrics.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS", help=(
        "the address to listen on (default 127.0.0.1: this machine only)"))
    metrics.add_argument("--verify-every", type=seconds_or_zero, default=600.0, metavar="SECONDS",
                         help=("verify the log this often, for lessonledger_verify_ok "
                               "(default 600; 0: once, at the start)"))
    add_read_only(metrics)
    metrics.set_defaults(run=_cmd_metrics)
