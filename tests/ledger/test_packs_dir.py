"""What a home's ``ledger.packs`` directory may hold besides packs, and its writer lock.

GUARDS: on 777bdfe a stray file there (``notes.txt``) made every writable open a
``ValueError`` traceback (it was taken for a pack and its name for a position); a
``.partial`` file a sweep took in the moment between its writer's open and its lock was
lost to that writer.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from lessonledger.commands import open_ledger

P = "3f9a0c1b2d4e5f60"
CLI = [sys.executable, "-m", "lessonledger.ops"]


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with open_ledger(home, sync=False) as ledger:
        ledger.observe_outcome(key="o1", project=P, passed=True, task="a task")
    return home


def _cli(home: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "--home", str(home), *argv], input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


def _open_to_write(home: Path) -> None:
    """A writable open in a process of its own (it lays out packs and sweeps first)."""
    code = ("import sys; from lessonledger.ledger.lmdb_env import acquire, release; "
            "release(acquire(sys.argv[1], sync=False))")
    subprocess.run([sys.executable, "-c", code, str(home)], check=True, timeout=120)


def test_what_is_no_pack_there_is_left_alone(tmp_path: Path) -> None:
    home = _home(tmp_path)
    packs = home / "ledger.packs"
    packs.mkdir()
    (packs / "notes.txt").write_text("junk\n")
    (packs / "sub").mkdir()
    (packs / "x.partial").mkdir()
    (packs / f"{7:020d}").mkdir()  # a position's name, but no file
    for done in (_cli(home, "lessons", "list", "--project", P),
                 _cli(home, "publish", "-", stdin='{"command": "observe_outcome", '
                      f'"key": "o2", "project": "{P}", "passed": true}}\n')):
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert sorted(p.name for p in packs.iterdir()) == [
        f"{7:020d}", "notes.txt", "sub", "x.partial"]


def test_a_partial_file_goes_only_when_no_writer_holds_the_lock(tmp_path: Path) -> None:
    """A killed writer's .partial goes at the next open, never one being written."""
    home = _home(tmp_path)
    packs = home / "ledger.packs"
    packs.mkdir()
    partial = packs / f"{1:020d}.999.partial"
    partial.write_bytes(b"bodies of a writer")
    fd = os.open(packs, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # as a writer at work holds it
        _open_to_write(home)
        assert partial.exists(), "swept while its writer held the lock"
    finally:
        os.close(fd)
    _open_to_write(home)
    assert not partial.exists(), "a killed writer's .partial stayed"
