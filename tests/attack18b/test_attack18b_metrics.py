"""attack18b: ``lessonledger metrics --read-only`` (README "Metrics for Prometheus").

README: "`lessonledger metrics [--port P] [--bind 127.0.0.1] [--verify-every 600]
[--read-only]` serves what the log says". With ``--read-only`` it never serves: it opens
the log read-only and then the read side read-only on the same home in one process, and
exits 2 with "cannot read HOME/data.mdb: The environment ... is already open in this
process.; this is not a ledger home" — on a perfectly good home that every other
``--read-only`` query reads.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from _attack18b_agent import P1, Agent, day
from lessonledger.commands import open_ledger

CLI = str(Path(sys.executable).with_name("lessonledger"))


def test_metrics_read_only_serves_a_good_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_ledger(home, sync=False) as led:
        Agent(led).learn(P1, "s1", when=day(0))
    # The same home reads fine read-only elsewhere.
    listed = subprocess.run([CLI, "--home", str(home), "lessons", "list", "--read-only"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr

    server = subprocess.Popen([CLI, "--home", str(home), "metrics", "--port", "0",
                               "--read-only", "--verify-every", "0"],
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "metrics at http://" in line, (line, server.wait(timeout=20))
        url = line.split("metrics at ", 1)[1].strip()
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    text = answer.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert "lessonledger_log_head 2.0" in text
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()
