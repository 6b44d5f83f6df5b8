"""``lessonledger import`` killed half-way (SIGKILL, a real process) (attack11b).

On main the target was created first and filled in place: killed mid-write it was left
a home with an empty log, which opened as if fine, and a second import refused it as
"not a new or empty directory". Now the home is built beside the target and renamed
onto it once whole: after a kill the target is absent, and a rerun makes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ops.cli import main
from lessonledger.ops.config import LOG_NAME

EVENTS = 4000


@pytest.fixture
def export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An export with envelopes of a home of ``EVENTS`` 2 kB events."""
    home = tmp_path / "src"
    assert main(["--home", str(home), "init"]) == 0
    lmdb_home = acquire(str(home))
    try:
        log = EventLog(lmdb_home, LOG_NAME)
        for batch in range(EVENTS // 500):
            log.append([NewEvent(f"s{batch}", v, "note", os.urandom(2000))
                        for v in range(500)])
    finally:
        release(lmdb_home)
    out = tmp_path / "export.jsonl"
    assert main(["--home", str(home), "export", "--include-envelopes", "-o", str(out)]) == 0
    capsys.readouterr()
    return out


def _writing(folder: Path, target: Path) -> bool:
    """Whether an import into ``target`` has written data (in place, or beside it)."""
    for path in folder.iterdir():
        data = path / "data.mdb"
        if target.name in path.name and data.exists() and data.stat().st_size > 1 << 20:
            return True
    return False


def _import(export: Path, target: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lessonledger.ops", "import", str(export),
                             "--into", str(target)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_killed_import_leaves_no_target_and_a_rerun_makes_it(
        export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "dst"
    child = _import(export, target)
    deadline = time.monotonic() + 120
    while not _writing(tmp_path, target) and child.poll() is None:
        assert time.monotonic() < deadline, "the import never started writing"
        time.sleep(0.01)
    if child.poll() is not None:
        pytest.skip("the import finished before it could be killed (a fast machine)")
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    assert not target.exists(), sorted(p.name for p in tmp_path.iterdir())
    assert main(["import", str(export), "--into", str(target)]) == 0
    assert main(["--home", str(target), "verify"]) == 0
    out = capsys.readouterr().out
    assert f"{EVENTS:,} events" in out
    # What the killed import built aside was taken away by the rerun.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "export.jsonl", "src"]


def test_an_import_into_an_empty_directory_fills_it(
        export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "dst"
    target.mkdir()
    assert main(["import", str(export), "--into", str(target)]) == 0
    assert main(["--home", str(target), "verify"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "export.jsonl", "src"]
