"""``lessonledger compact``: getting erased bytes out of the home's files.

Erasing a body deletes it from the log, but LMDB keeps deleted bytes in free pages until
the file is rewritten, and rewriting it needs the home closed in every process. Each
command here is a ``_cmd_*`` function and a few lines in :func:`register`.
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec
from lessonledger.ledger.compaction import compact
from lessonledger.ops.config import require_home
from lessonledger.ops.render import print_json

__all__ = ["register"]


def _size(count: int) -> str:
    """A byte count as a person reads it: ``512 bytes``, ``12.3 MB``."""
    if count < 1000:
        return f"{count} bytes"
    value = float(count)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def _cmd_compact(args: argparse.Namespace) -> int:
    # require_home first: a directory without the marker gets the same one-line advice
    # as every other command, before compaction looks at any LMDB file.
    require_home(args.home)
    result = compact(str(args.home))
    if args.json:
        print_json({"path": str(args.home), **msgspec.to_builtins(result)})
    else:
        print(f"compacted {args.home}: {_size(result.bytes_before)} -> "
              f"{_size(result.bytes_after)} in {result.seconds:.2f} s")
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add the erasure commands to the CLI's sub-parsers."""
    compacting = sub.add_parser("compact", help=(
        "rewrite the home's file without free pages, so erased bytes are gone; "
        "needs every process using the home stopped"))
    compacting.add_argument("--json", action="store_true", help="print the result as JSON")
    compacting.set_defaults(run=_cmd_compact)
