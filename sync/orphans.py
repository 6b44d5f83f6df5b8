"""A hub's helper process dies with the process that started it.

The writer and the query workers serve one front: once it is gone (SIGKILL gives it no
chance to stop them) nobody reads their answers, and a writer left behind would hold
the home's write lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys

__all__ = ["die_with_parent"]

#: Linux's prctl option asking for a signal when the parent exits.
_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: signal.Signals) -> None:
    """Ask the kernel for ``signum`` when the parent exits (Linux); elsewhere a no-op.

    The caller still looks at its parent pid now and then: the request is lost if the
    parent died before it was made.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum)
