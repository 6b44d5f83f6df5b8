"""The ``lessonledger`` command line.

Every query takes ``--json``. Bad input prints one line saying what is wrong and what to
do, and exits with code 2; a ledger that fails verification exits with code 1.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from lessonledger.ledger.text import printable
from lessonledger.ops import (
    access_commands,
    completion_commands,
    erasure_commands,
    export_commands,
    home_commands,
    hub_commands,
    interrupts,
    lesson_commands,
    mcp_commands,
    metrics_commands,
    recall_commands,
    skill_commands,
    sync_commands,
)
from lessonledger.ops.bench import commands as bench_commands
from lessonledger.ops.config import HOME_ENV, default_home
from lessonledger.ops.failures import failure

__all__ = ["main", "parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # The message quotes what was typed: escaped, as every line a user sees.
        self.exit(2, f"{self.prog}: {printable(message)}; see `{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lessonledger", description=(
        "An event-sourced memory ledger: agents record outcomes and lessons; "
        "every write is an immutable, hash-chained event."))
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {importlib.metadata.version('lessonledger')}")
    _home_option(parser, None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    home_commands.register(sub, _Parser)
    hub_commands.register(sub, _Parser)
    lesson_commands.register(sub, _Parser)
    recall_commands.register(sub, _Parser)
    erasure_commands.register(sub, _Parser)
    export_commands.register(sub, _Parser)
    skill_commands.register(sub, _Parser)
    sync_commands.register(sub, _Parser)
    access_commands.register(sub, _Parser)
    mcp_commands.register(sub, _Parser)
    metrics_commands.register(sub, _Parser)
    completion_commands.register(sub, _Parser)
    bench_commands.register(sub, _Parser)
    _describe(parser)
    return parser


def _home_option(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--home", type=Path, default=default, metavar="DIR", help=(
        f"ledger home directory (default: ${HOME_ENV}, else ~/.lessonledger); "
        "before or after the command"))


def _describe(parser: argparse.ArgumentParser) -> None:
    """Give every sub-command's ``--help`` page a description, and ``--home`` too.

    argparse shows a sub-command's ``help`` only in its parent's list; the page itself
    would start with the options alone. ``--home`` is taken after the command as well as
    before it; with ``SUPPRESS`` as its default there, one given before is kept.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                child = action.choices[listed.dest]
                if child.description is None and listed.help:
                    child.description = listed.help[0].upper() + listed.help[1:] + "."
            for child in action.choices.values():
                _home_option(child, argparse.SUPPRESS)
                _describe(child)


def parser() -> argparse.ArgumentParser:
    """The command line's parser, every verb wired (what completion scripts are made from)."""
    return _parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.home = args.home or default_home(demo=getattr(args, "demo", False))
    try:
        with interrupts.noting():
            code = int(args.run(args))
            interrupts.check()  # a Ctrl-C some finalizer swallowed still counts
        return code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("lessonledger: interrupted; what was committed before stays committed",
              file=sys.stderr)
        return 130
    except Exception as e:
        failed = failure(e)
        if failed is None:
            raise
        print(failed.line, file=sys.stderr)
        return failed.code
