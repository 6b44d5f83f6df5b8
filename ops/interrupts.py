"""Ctrl-C stops a command even when Python drops the KeyboardInterrupt it raised.

An exception raised inside a ``__del__`` is printed and discarded, never propagated:
a SIGINT that arrives while a finalizer runs (USearch's ``Index.__del__`` frees a whole
graph, which takes a noticeable while for a big index) would be lost, and the command
would run on to its end and exit 0. So the command line's handler also notes each
SIGINT: the progress points every long command passes (:mod:`.progress`) raise again
for one that was noted but never reached :func:`main`, and ``main`` answers 130 for one
noticed only after the command returned.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["check", "handled", "noting"]

_noted = False


def _handler(signum: int, frame: FrameType | None) -> None:
    global _noted
    _noted = True
    raise KeyboardInterrupt


@contextmanager
def noting() -> Iterator[None]:
    """Note SIGINTs for the block, in place of Python's default handler.

    Only that one is replaced (a caller's own handler stays), and it is put back after,
    with nothing noted: a test calling ``main`` in its own process keeps its Ctrl-C.
    """
    global _noted
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _noted = False


def handled() -> None:
    """The KeyboardInterrupt was caught where it was meant to be (a server's stop)."""
    global _noted
    _noted = False


def check() -> None:
    """Raise KeyboardInterrupt again for a SIGINT whose first one was dropped.

    Raises:
        KeyboardInterrupt: a SIGINT was noted and not handled.
    """
    if _noted:
        raise KeyboardInterrupt
