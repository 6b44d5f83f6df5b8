"""Ctrl-C for tests that send SIGINT, whatever the test run itself inherited.

A shell without job control starts a background job (``pytest … &``) with SIGINT
ignored, and an ignored signal stays ignored across fork and exec: a process such a run
starts would never see the Ctrl-C a test sends it (it ran on to its end, exit 0).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


def with_ctrl_c() -> None:
    """``preexec_fn`` for a child that must take SIGINT as Python does by default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def default_ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler in this process for the block, then what it had."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
