"""What a refused or failed request tells its caller: one line, and an exit code.

The command line prints the line and exits with the code; the MCP server returns the
same line as a tool error. Both ask :func:`failure`, so an agent reads what a person at
the terminal would.
"""

from __future__ import annotations

from typing import NamedTuple

import lmdb
import msgspec
from lessonledger.ledger.errors import LedgerStorageError, LessonLedgerError
from lessonledger.ledger.text import printable

__all__ = ["Failure", "failure"]


class Failure(NamedTuple):
    """A failure as shown: the exit code (2 refused input, 1 a failed store) and the line."""

    code: int
    line: str


def failure(error: BaseException) -> Failure | None:
    """The line and exit code for ``error``, or None when it is no failure we describe."""
    # Exit code 2: the input was refused (fix it and rerun); 1: the store or the
    # machine failed (nothing in the input to fix).
    if isinstance(error, LedgerStorageError):
        return Failure(1, f"lessonledger: {printable(str(error))}")
    if isinstance(error, LessonLedgerError):
        return Failure(2, f"lessonledger: {printable(str(error))}")
    if isinstance(error, msgspec.ValidationError):
        return Failure(2, f"lessonledger: invalid input: {printable(str(error))}; "
                          "fix it and retry")
    if isinstance(error, UnicodeDecodeError | UnicodeEncodeError):
        return Failure(2, f"lessonledger: input is not UTF-8 text ({error.reason}); "
                          "convert it and retry")
    if isinstance(error, FileNotFoundError | IsADirectoryError | NotADirectoryError):
        # A path the caller gave that names nothing (or a folder for a file): bad input,
        # not a failed store.
        where = f" {printable(str(error.filename))}" if error.filename else ""
        return Failure(2, f"lessonledger: no such file{where} "
                          f"({printable(str(error.strerror or error))}); "
                          "check the path; nothing was done")
    if isinstance(error, OSError) and not isinstance(error, BrokenPipeError):
        where = f": {printable(str(error.filename))}" if error.filename else ""
        return Failure(1, f"lessonledger: {printable(str(error.strerror or error))}{where}; "
                          "nothing after "
                          "that was done")
    if isinstance(error, lmdb.Error):
        return Failure(1, f"lessonledger: the store failed: {printable(str(error))}; "
                          "nothing of the failed "
                          "step was committed")
    return None
