"""``lessonledger.open_ledger``: one call for a local home or a hub, the same agent code.

The same function body runs against a path and against a real hub process, and gets
the same lesson back; ``import lessonledger`` alone loads no ZeroMQ (the sync layer is
imported when a ledger is opened).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import hubtools
import lessonledger
import pytest
from lessonledger.commands import Operation
from lessonledger.ledger.errors import LedgerClosedError

PROJECT = "f" * 32


def _agent(target: Any) -> list[str]:
    """An agent's whole use of memory: observe, then recall; only ``target`` differs."""
    with lessonledger.open_ledger(target) as ledger:
        ledger.observe_outcome(key="k1", project=PROJECT, session="s1", passed=True,
                               operations=[Operation(op="make", target="build", ok=False,
                                                     error="no Makefile"),
                                           Operation(op="ninja", target="build", ok=True,
                                                     order=1)])
        recalled = ledger.recall(PROJECT, "build it", session="s2")
        assert recalled.lessons
        return [lesson.line for lesson in recalled.lessons] + [recalled.section]


def test_the_same_agent_code_runs_on_a_home_and_on_a_hub(tmp_path: Path) -> None:
    local = _agent(tmp_path / "home")
    with hubtools.hub(tmp_path / "hub", tmp_path / "serve.log", drain=True) as hub:
        remote = _agent(hub.endpoint)
    assert local
    assert remote == local


def test_a_closed_ledger_refuses_alike_on_a_home_and_on_a_hub(tmp_path: Path) -> None:
    def closed(target: Any) -> None:
        with lessonledger.open_ledger(target) as ledger:
            assert ledger.head() == 0
            ledger.close()
            with pytest.raises(LedgerClosedError):
                ledger.head()
            with pytest.raises(LedgerClosedError):
                ledger.recall(PROJECT, "build it", session="s2")
        # ``with`` closed it again on the way out: nothing happened

    closed(tmp_path / "home")
    with hubtools.hub(tmp_path / "hub", tmp_path / "serve.log", drain=True) as hub:
        closed(hub.endpoint)


def test_importing_the_package_loads_no_zeromq() -> None:
    code = "import sys, lessonledger; print('zmq' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
    assert "open_ledger" in lessonledger.__all__
