"""attack18b: ``lessonledger reconcile --now T`` run again is the same pass.

``reconcile --help``: "--key KEY  idempotency key (default: derived from --now)". The key
is derived from the *spelling* of the time (``now.isoformat()``), not the instant, so
the same instant written in another zone (``...T01:00:00+01:00`` for ``...T00:00Z``) is a
second pass: every active lesson decays a second time (DESIGN §4: "-0.02 per reconcile
pass"), though the operator re-ran the pass "as of" the same moment. The README's own
rule for command keys: a retry compares "a time as the same instant in any zone".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _attack18b_agent import P1, Agent, day
from lessonledger.commands import open_ledger

CLI = str(Path(sys.executable).with_name("lessonledger"))


def _reconcile(home: Path, now: str) -> None:
    done = subprocess.run([CLI, "--home", str(home), "reconcile", "--now", now, "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_the_same_instant_in_another_zone_is_not_a_second_decay(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        lid = Agent(led).learn(P1, "s1", when=day(0))
    _reconcile(tmp_path, "2024-01-02T00:00:00Z")      # pass 1: new this epoch, no decay
    _reconcile(tmp_path, "2024-01-03T00:00:00Z")      # pass 2: not in play, 0.50 -> 0.48
    with open_ledger(tmp_path, sync=False) as led:
        once, head = led.lesson(lid).confidence, led.log.head()
    assert abs(once - 0.48) < 1e-9
    _reconcile(tmp_path, "2024-01-03T00:00:00Z")      # the same text: a retry (held)
    _reconcile(tmp_path, "2024-01-03T01:00:00+01:00")  # the same instant, another zone
    with open_ledger(tmp_path, sync=False) as led:
        assert led.lesson(lid).confidence == once, "decayed twice for one instant"
        assert led.log.head() == head
