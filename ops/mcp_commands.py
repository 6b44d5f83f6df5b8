"""``lessonledger mcp``: serve a ledger to an agent as MCP tools over stdio.

The ledger is the home's (``--home``), or a hub's (``--to tcp://HOST:PORT``, with
``--key`` and ``--server-key`` for CURVE): the tools call the same methods either way
(:class:`~lessonledger.ops.ledger_api.LedgerApi`), and with ``--to`` every command is the
hub's to decide, under the principal and grants of this server's key.

An MCP client (Claude Code, Cursor, an agents SDK) starts this as a subprocess in the
project's directory; the project digest is the directory's (:func:`lessonledger.project_id`)
unless ``--project`` names one. Nothing but the protocol is written to stdout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
from pathlib import Path
from typing import Any

from lessonledger.commands.messages import checked_project
from lessonledger.ops.config import open_log
from lessonledger.ops.hub_commands import add_remote, remote
from lessonledger.ops.lesson_commands import open_lessons
from lessonledger.ops.metrics_commands import address
from lessonledger.ops.project import project_id

__all__ = ["register"]


def _cmd_mcp(args: argparse.Namespace) -> int:
    # Imported here: the SDK takes most of a second to import, which no other verb needs.
    from lessonledger.ops.mcp_server import serve_stdio
    from lessonledger.ops.metrics import Instruments, LedgerCollector, MeteredLedger
    from lessonledger.ops.metrics_commands import serving
    from prometheus_client import CollectorRegistry

    project = checked_project(args.project) if args.project else project_id(Path.cwd())
    version = importlib.metadata.version("lessonledger")
    if args.to is not None:
        with remote(args) as hub:
            if args.metrics is None:
                serve_stdio(hub, project, version=version)
                return 0
            # The log's counts are the hub's to serve (`serve --metrics`); this server
            # counts and times the requests it made.
            registry = CollectorRegistry()
            with serving(registry, *args.metrics):
                serve_stdio(MeteredLedger(hub, Instruments(registry)), project,
                            version=version)
        return 0
    with open_lessons(args.home) as ledger:
        if args.metrics is None:
            serve_stdio(ledger, project, version=version)
            return 0
        registry = CollectorRegistry()
        metered = MeteredLedger(ledger, Instruments(registry))
        with open_log(args.home) as log:
            registry.register(LedgerCollector(log, ledger, home=args.home))
            with serving(registry, *args.metrics):
                serve_stdio(metered, project, version=version)
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add mcp to the CLI's sub-parsers."""
    mcp = sub.add_parser("mcp", help=(
        "serve the ledger to an agent as MCP tools over stdio (recall, check, "
        "observe_outcome, propose_lesson, lessons, why)"))
    mcp.add_argument("--project", default=None, metavar="DIGEST", help=(
        "the project digest tools use when a call names none (default: the working "
        "directory's, from its git remote, else its path)"))
    mcp.add_argument("--metrics", type=address, default=None, metavar="HOST:PORT", help=(
        "also serve Prometheus metrics there: the home's, and the requests this server "
        "answered, refused and timed (see `lessonledger metrics`; with --to, only the "
        "requests: the hub serves its log's with `serve --metrics`)"))
    add_remote(mcp)
    mcp.set_defaults(run=_cmd_mcp)
