"""Ctrl-C stops a command even when a finalizer swallowed its KeyboardInterrupt."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from ctrl_c import default_ctrl_c, with_ctrl_c
from lessonledger.ops import interrupts

# A SIGINT handled inside a __del__: Python prints the KeyboardInterrupt and drops it,
# as it did when Ctrl-C landed while USearch freed an index (the bench ran on, exit 0).
SCRIPT = """
import os, signal, sys, time
from lessonledger.ops import interrupts
from lessonledger.ops.progress import Bar

class Freed:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)

with (interrupts.noting() if sys.argv[1] == "noting" else open(os.devnull)):
    Freed()
    print("ran on", flush=True)
    try:
        Bar(None, None).say("the next step")
        print("not stopped")
    except KeyboardInterrupt:
        print("stopped")
"""


@pytest.mark.parametrize(("mode", "expected"), [("noting", "stopped"),
                                                 ("plain", "not stopped")])
def test_a_dropped_ctrl_c_stops_at_the_next_progress_point(mode: str, expected: str) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True,
                          text=True, timeout=60, check=True, preexec_fn=with_ctrl_c)
    assert done.stdout.splitlines() == ["ran on", expected], done.stderr
    assert "KeyboardInterrupt" in done.stderr  # Python's own "Exception ignored" note


def test_noting_puts_the_default_handler_back_with_nothing_noted() -> None:
    with default_ctrl_c():
        with interrupts.noting():
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    interrupts.check()  # raises nothing: the interrupt reached the code meant to get it
