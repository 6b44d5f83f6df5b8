"""An ``erase`` killed between its commit and its compaction, run again as typed (attack16).

GUARD: on fe9130e the rerun (a new erasure, without ``--key``) said "the 6 events of
principal 'alice' are erased already" with exit 2, and never compacted: her bytes stayed
in ``data.mdb``'s free pages.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from lessonledger.commands import Operation, open_ledger

P = "3f9a0c1b2d4e5f60"
ERASE = ["erase", "--principal", "alice", "--reason", "request"]
#: The CLI, paused for good the moment it reaches ``module.name``.
PAUSE = textwrap.dedent('''
    import importlib, sys, time
    from lessonledger.ops.cli import main
    module = importlib.import_module(sys.argv[1])
    real = getattr(module, sys.argv[2])
    def paused(*a, **k):
        print("paused", flush=True)
        time.sleep(60)
        return real(*a, **k)
    setattr(module, sys.argv[2], paused)
    sys.exit(main(sys.argv[3:]))
''')


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           *argv], capture_output=True, text=True, timeout=120, check=False)


def _holding(home: Path, needle: bytes) -> list[str]:
    return [name for name in os.listdir(home) if (home / name).is_file()
            and needle in (home / name).read_bytes()]


def test_an_erase_rerun_after_a_kill_before_its_compaction_compacts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    secret = f"alice-private-{uuid.uuid4().hex}".encode()
    with open_ledger(home, sync=False) as ledger:
        for who, count in (("alice", 3), ("bob", 200)):
            for i in range(count):
                target = f"{who}-{i}-" + (secret.decode() if who == "alice" else "repo")
                ledger.observe_outcome(
                    key=f"{who}-{i}", project=P, principal=who, passed=True,
                    operations=[Operation(op="pytest:tests/", target=target, ok=False,
                                          error="no conftest"),
                                Operation(op="pytest:root", target=target, ok=True, order=1)])
    assert _holding(home, secret) == ["data.mdb"], "the control"
    proc = subprocess.Popen([sys.executable, "-c", PAUSE, "lessonledger.ops.erasure_commands",
                             "compact", "--home", str(home), *ERASE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "paused\n"  # committed, not compacted
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    again = _cli(home, *ERASE)
    assert again.returncode == 0, again.stderr
    assert "erased already" in again.stdout
    assert _holding(home, secret) == []
    assert _cli(home, "verify").returncode == 0
    # Nothing left to do, nothing new recorded: the same again says so.
    assert _cli(home, *ERASE, "--no-compact").returncode == 2
