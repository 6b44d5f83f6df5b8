"""One hub per home (DESIGN §7): a second ``serve`` of a served home is refused.

Before, it started a second sequencer behind another endpoint. Now it exits 2 with one
line that names the running hub's endpoint, and the first serves on. (A hub SIGKILLed
gives the lock up with its process: ``test_hub_crash`` restarts one under load.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hubtools import free_ports, hub, lessonledger
from lessonledger.sync import RemoteLedger


def test_a_second_hub_on_a_served_home_is_refused_and_the_first_serves_on(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with hub(home, tmp_path / "hub.log") as first:
        port, pub = free_ports(2)
        second = subprocess.run(
            [lessonledger(), "--home", str(home), "serve", "--bind",
             f"tcp://127.0.0.1:{port}", "--pub", f"tcp://127.0.0.1:{pub}"],
            capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert "already served by a hub" in lines[0]
        assert first.endpoint in lines[0]
        with RemoteLedger(first.endpoint, timeout=10) as client:
            assert client.status().head == client.head()



def test_a_hub_lock_that_cannot_be_opened_is_one_line_exit_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert subprocess.run([lessonledger(), "--home", str(home), "init"],
                          capture_output=True).returncode == 0
    (home / "hub.lock").mkdir()  # in the lock's way
    port, pub = free_ports(2)
    served = subprocess.run(
        [lessonledger(), "--home", str(home), "serve", "--bind", f"tcp://127.0.0.1:{port}",
         "--pub", f"tcp://127.0.0.1:{pub}"], capture_output=True, text=True, timeout=120)
    assert served.returncode == 2, served.stderr
    lines = served.stderr.strip().splitlines()
    assert len(lines) == 1, served.stderr
    assert "cannot take the hub lock" in lines[0]
