"""kill -9 of ``lessonledger erase`` at any moment, then the same erase run again.

The erase runs as a real process and is killed after delays spread over one whole run
(before the commit, between the commit and the views' rebuild, during the compaction).
Whatever the moment, running the same command again (same ``--key``) must end with one
erasure recorded, a log that verifies, and no erased byte in any file of the home.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog
from lessonledger.ledger.verify import verify
from lessonledger.ops.cli import main
from residue import found, secret

PROJECT = "a" * 32
CLI = [str(Path(sys.executable).with_name("lessonledger"))]
ERASE = ["erase", "--principal", "alice", "--reason", "request", "--key", "erase-alice"]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A home where alice taught one lesson and bob a few hundred."""
    home = tmp_path_factory.mktemp("base") / "home"
    assert subprocess.run([*CLI, "--home", str(home), "init"], check=False,
                          capture_output=True).returncode == 0
    alices = secret()
    with open_ledger(home, sync=False) as ledger:
        for who, count in (("alice", 1), ("bob", 300)):
            for i in range(count):
                target = f"{who}-{i}-" + (alices.decode() if who == "alice" else "repo")
                ledger.observe_outcome(
                    key=f"{who}-{i}", project=PROJECT, principal=who, passed=True,
                    operations=[Operation(op="pytest:tests/", target=target, ok=False,
                                          error="no conftest"),
                                Operation(op="pytest:root", target=target, ok=True,
                                          order=1)])
    return home, alices


def erasures(home: Path) -> int:
    lmdb_home = acquire(str(home))
    try:
        log = EventLog(lmdb_home, "ledger")
        assert verify(log).ok
        return sum(r.envelope.type == "erasure.erased" for r in log.scan())
    finally:
        release(lmdb_home)


def test_a_killed_erase_run_again_ends_erased_everywhere(
    base: tuple[Path, bytes], tmp_path: Path
) -> None:
    source, alices = base
    timed = tmp_path / "timed"
    shutil.copytree(source, timed)
    started = time.perf_counter()
    assert subprocess.run([*CLI, "--home", str(timed), *ERASE], check=False,
                          capture_output=True).returncode == 0
    span = time.perf_counter() - started
    assert found(str(timed), [alices]) == set()
    for step in range(8):
        home = tmp_path / f"killed-{step}"
        shutil.copytree(source, home)
        erasing = subprocess.Popen([*CLI, "--home", str(home), *ERASE],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(span * (0.4 + 0.6 * step / 7))  # the first 40%: starting Python
        os.kill(erasing.pid, signal.SIGKILL)
        erasing.wait()
        assert erasures(home) in (0, 1)  # committed whole, or not at all
        # Run again in this process (the CLI's main()): what is under test is the kill of
        # the first run; the second is an ordinary one.
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            again = main(["--home", str(home), *ERASE])
        assert again == 0, err.getvalue()
        assert erasures(home) == 1
        assert found(str(home), [alices]) == set(), f"residue after a kill at step {step}"
