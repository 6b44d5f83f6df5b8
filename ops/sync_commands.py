"""The sync verbs: clone, pull, push, snapshot, snapshots, checkout, erasures.

One home is the hub (the only writer, ``lessonledger serve``, which answers sync's frames
on the endpoint agents use); replicas clone it and pull. Commands given on a
replica (``publish``) wait in its outbox until ``push`` sends them; the hub decides
them, and the replica pulls the result. Snapshots are taken at the hub and travel with
the log. Each verb is a ``_cmd_*`` function and a few lines in :func:`register`.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ops.config import require_home, seconds, sync_setting
from lessonledger.ops.lesson_commands import open_lessons
from lessonledger.ops.progress import bar
from lessonledger.ops.render import add_read_only, echo, print_json, timestamp
from lessonledger.projections.objects import NamedSnapshot
from lessonledger.sync.keys import load_public, load_secret
from lessonledger.sync.replica import (
    PullResult,
    check_hub_address,
    prepare_clone,
    pull,
    push,
    refold,
    replica_info,
)
from lessonledger.sync.snapshots import checkout, erasures, is_replica, snapshots, take_snapshot
from lessonledger.sync.state import ReplicaInfo
from lessonledger.sync.transport import ZmqExchange

__all__ = ["register", "snapshot_json"]


def _pulled(args: argparse.Namespace, result: PullResult, verb: str) -> None:
    if args.json:
        print_json(msgspec.to_builtins(result))
        return
    echo(f"{verb}: {result.fetched:,} events and {result.bodies:,} bodies "
         f"({result.received:,} bytes) in {result.seconds:.2f} s; head {result.head:,}")
    if result.withheld:
        echo(f"  {result.withheld:,} bodies withheld: this replica's key may not read them")
    for erasure in result.erasures:
        echo(f"  applied the erasure at position {erasure}, compacted, acknowledged")
    if result.pending:
        echo(f"  erasures {result.pending} applied but the home is open elsewhere: the "
             "compaction and acknowledgement wait for the next pull")


def _exchange(url: str, args: argparse.Namespace, info: ReplicaInfo) -> ZmqExchange:
    curve = None
    if info.key:
        public, secret = load_secret(info.key)
        curve = (public, secret, load_public(info.hub_key))
    return ZmqExchange(url, timeout=args.timeout, curve=curve)


def _cmd_clone(args: argparse.Namespace) -> int:
    name = args.name or f"{socket.gethostname()}:{os.path.realpath(args.dir)}"
    if bool(args.key) != bool(args.hub_key):
        msg = "give --key and --hub-key together (this replica's secret, the hub's public)"
        raise LedgerConfigError(msg)
    keys = {"key": os.path.realpath(args.key), "hub_key": os.path.realpath(args.hub_key)
            } if args.key else {}
    for path in keys.values():
        load_public(path)  # a missing or malformed key file is refused before anything
    check_hub_address(args.url)
    now = args.fold == "now"
    # Connected before the directory is made: an address ZeroMQ refuses leaves nothing.
    with _exchange(args.url, args, ReplicaInfo(args.url, name, **keys)) as exchange, \
            bar(f"clone {args.url}", quiet=args.json) as shown:
        prepare_clone(args.url, args.dir, name, **keys)
        result = pull(args.dir, exchange, sync=sync_setting(), progress=shown.update,
                      fold=now)
    if now:
        _pulled(args, result, f"cloned {args.url} into {args.dir}")
        return 0
    folder = _fold_in_background(args.dir)
    if args.json:
        print_json({**msgspec.to_builtins(result), "folding": folder})
        return 0
    _pulled(args, result, f"cloned {args.url} into {args.dir}")
    echo(f"  every object is verified and stored; the views and the index fold in the "
         f"background (process {folder}). Queries answer already, the same, each folding "
         f"what the saved views lack first (slower until that process saves them); "
         f"`lessonledger --home {args.dir} fold` folds in the foreground")
    return 0


def _fold_in_background(directory: Path) -> int:
    """Start ``lessonledger fold`` on ``directory`` in a process of its own; its pid."""
    process = subprocess.Popen(
        [sys.executable, "-m", "lessonledger.ops", "--home", os.fspath(directory), "fold",
         "--json"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    return process.pid


def _cmd_fold(args: argparse.Namespace) -> int:
    if not is_replica(args.home):
        msg = (f"{args.home} is not a replica: a hub's views fold whenever it opens; "
               "`lessonledger fold` is for a home made by `lessonledger clone`")
        raise LedgerConfigError(msg)
    started = time.perf_counter()
    position = refold(args.home)
    seconds = time.perf_counter() - started
    if args.json:
        print_json({"home": str(args.home), "position": position,
                    "seconds": round(seconds, 3)})
    else:
        echo(f"folded the views and the index of {args.home} to position {position:,} "
             f"in {seconds:.2f} s")
    return 0


def _cmd_pull(args: argparse.Namespace) -> int:
    info = replica_info(args.home)
    with _exchange(info.hub, args, info) as exchange, \
            bar(f"pull {info.hub}", quiet=args.json) as shown:
        result = pull(args.home, exchange, sync=sync_setting(), progress=shown.update)
    _pulled(args, result, f"pulled from {info.hub}")
    return 0


def _cmd_push(args: argparse.Namespace) -> int:
    info = replica_info(args.home)
    with _exchange(info.hub, args, info) as exchange:
        outcome = push(args.home, exchange, sync=sync_setting())
    if args.json:
        print_json(msgspec.to_builtins(outcome))
        return 0 if not any(r.refused for r in outcome.results) else 1
    for result in outcome.results:
        if result.refused:
            echo(f"refused {result.key}: {result.refused}")
        else:
            echo(f"accepted {result.key} at positions {result.positions}")
    _pulled(args, outcome.pull, f"pulled from {info.hub}")
    return 0 if not any(r.refused for r in outcome.results) else 1


def snapshot_json(snap: NamedSnapshot) -> dict[str, Any]:
    """A snapshot as plain data (hashes in hex)."""
    s = snap.snapshot
    return {"id": snap.id.hex(), "name": snap.name, "position": snap.position,
            "parent": s.parent.hex() or None, "first": s.first, "last": s.last,
            "root": s.root.hex(), "link": s.link.hex(), "erasures": s.erasures,
            "created_at": timestamp(s.created_at), "origin": s.origin}


def _snapshot_line(snap: NamedSnapshot) -> str:
    s = snap.snapshot
    return (f"{snap.id.hex()[:16]}  {snap.name:<12} positions {s.first}-{s.last:<8} "
            f"erasures {s.erasures:<3} {timestamp(s.created_at)}  {s.origin}")


def _cmd_snapshot(args: argparse.Namespace) -> int:
    if is_replica(args.home):
        msg = (f"{args.home} is a replica: snapshots are taken at the hub "
               f"({replica_info(args.home).hub}) and pulled from there")
        raise LedgerConfigError(msg)
    with open_lessons(args.home) as ledger:
        snap = take_snapshot(ledger, args.name, args.origin or socket.gethostname())
    if args.json:
        print_json(snapshot_json(snap))
    else:
        echo(f"snapshot {snap.id.hex()} ({args.name}) of positions 1-{snap.snapshot.last:,}")
    return 0


def show_snapshots(home: Path, *, as_json: bool, read_only: bool = False) -> int:
    """Print every snapshot of ``home`` (``snapshots`` and ``log --snapshots``)."""
    require_home(home)
    for snap in snapshots(home, read_only=read_only):
        if as_json:
            print_json(snapshot_json(snap))
        else:
            echo(_snapshot_line(snap))
    return 0


def _cmd_snapshots(args: argparse.Namespace) -> int:
    return show_snapshots(args.home, as_json=args.json)


def _cmd_checkout(args: argparse.Namespace) -> int:
    require_home(args.home)
    into = args.into or Path(f"checkout-{args.snapshot[:16]}")
    done = checkout(args.home, args.snapshot, into, read_only=args.read_only or None)
    if args.json:
        print_json(msgspec.to_builtins(done))
    else:
        echo(f"checked out snapshot {done.snapshot[:16]} (positions 1-{done.last:,}) into "
             f"{done.into}: {done.bodies:,} bodies")
        if done.erased_later:
            echo(f"  {done.erased_later:,} bodies left out: erased after the snapshot")
    return 0


def _cmd_erasures(args: argparse.Namespace) -> int:
    require_home(args.home)
    for row in erasures(args.home):
        if args.json:
            print_json(msgspec.to_builtins(row))
        else:
            acked = ", ".join(row.acked_by) or "no replica yet"
            echo(f"position {row.position:<8} {row.what} {row.subject}: {row.bodies:,} "
                 f"bodies; acknowledged by {acked}")
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add the sync commands to the CLI's sub-parsers."""
    cloning = sub.add_parser("clone", help=(
        "make DIR a replica of a hub: every envelope, the bodies it may read, its views; "
        "run again to continue an interrupted clone"))
    cloning.add_argument("url", help="the hub, tcp://HOST:PORT")
    cloning.add_argument("dir", type=Path, help="a new or empty directory")
    cloning.add_argument("--name", help="this replica's name at the hub (default host:path; "
                         "with --key, the key's name)")
    cloning.add_argument("--key", default=None, metavar="PATH",
                         help="this replica's secret key file, to connect with CURVE")
    cloning.add_argument("--hub-key", default=None, metavar="PATH",
                         help="the hub's public key file (NAME.key), with --key")
    cloning.add_argument("--fold", choices=("now", "background"), default="now", help=(
        "now (default): fold the views and the index before returning; background: "
        "return once every object is verified and stored, and fold them in a process of "
        "its own (queries answer meanwhile, folding what they lack themselves)"))
    folding = sub.add_parser("fold", help=(
        "fold a replica's views and index up to its log and save them (what `clone "
        "--fold background` runs); policies never run"))
    folding.add_argument("--json", action="store_true", help="print the result as JSON")
    folding.set_defaults(run=_cmd_fold)
    pulling = sub.add_parser("pull", help=(
        "fetch what the hub has that this replica lacks; apply its erasures"))
    pushing = sub.add_parser("push", help=(
        "send the commands waiting in this replica's outbox to the hub, then pull"))
    for p, run in ((cloning, _cmd_clone), (pulling, _cmd_pull), (pushing, _cmd_push)):
        p.add_argument("--timeout", type=seconds, default=30.0,
                       help="seconds to wait for the hub (default 30)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.set_defaults(run=run)
    snap = sub.add_parser("snapshot", help="record a content-addressed snapshot of the log")
    snap.add_argument("--name", default="main", help="the ref to move (default main)")
    snap.add_argument("--origin", default="", help="where it was taken (default: host name)")
    snap.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    snap.set_defaults(run=_cmd_snapshot)
    listing = sub.add_parser("snapshots", help="list the snapshots, oldest first")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(run=_cmd_snapshots)
    out = sub.add_parser("checkout", help=(
        "materialise the home as it stood at a snapshot into a new home (log, views, "
        "index); every later erasure is applied first; this home keeps its history"))
    out.add_argument("snapshot", help="a ref name, a snapshot id or a unique prefix of one")
    out.add_argument("--into", type=Path, default=None,
                     help="the new home (default ./checkout-<id prefix>)")
    out.add_argument("--json", action="store_true", help="print the result as JSON")
    add_read_only(out)
    out.set_defaults(run=_cmd_checkout)
    listed = sub.add_parser("erasures", help=(
        "each erasure in the log and which replicas acknowledged applying it"))
    listed.add_argument("--json", action="store_true", help="one JSON object per line")
    listed.set_defaults(run=_cmd_erasures)
