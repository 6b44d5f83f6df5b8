"""The CLI's ``main()`` run in the test's own process, answering as a process would.

For the many tests that run a verb only to read or make what a home holds, where the
verb's own process is not what is under test: a ``lessonledger`` process costs about half
a second of Python start-up, most of it imports. The hub, the replicas' sync verbs, and
whatever a test kills or races stay real processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from unittest import mock

from lessonledger.ops.cli import main

__all__ = ["cli"]


def cli(*args: str, stdin: str = "",
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``lessonledger ARGS`` with main(); its exit code, standard output and error.

    Args:
        args: the command line after ``lessonledger``.
        stdin: what the verb reads on standard input.
        env: the whole environment it runs in (as ``subprocess.run``'s ``env``), or None
            for this process's own.
    """
    with mock.patch.dict(os.environ, env or {}, clear=env is not None), \
            mock.patch.object(sys, "stdin", io.StringIO(stdin)), \
            contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's refusals, as the interpreter maps them
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
