"""``publish`` and the skill verbs read their input to a bound, and say which (attack11a).

Every command of a ``publish`` is decoded before any runs, and a skill file is read
whole: without a bound, an input with no end (a pipe, a device, a runaway generator)
fills the memory before anything is refused. Real CLI processes on a real home.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.commands import Ledger
from lessonledger.ops.lesson_commands import MAX_PUBLISH_BYTES
from lessonledger.ops.skill_commands import MAX_SKILL_FILE_BYTES

CLI = [sys.executable, "-m", "lessonledger.ops"]


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    Ledger(home).close()
    return home


def _head(home: Path) -> int:
    with Ledger(home) as ledger:
        return ledger.head()


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_publish_refuses_input_over_its_bound_naming_it(tmp_path: Path, source: str) -> None:
    home = _home(tmp_path)
    # A blank line: what is read before the bound is not even a command.
    data = b" " * MAX_PUBLISH_BYTES + b"\n"
    path = tmp_path / "commands.jsonl"
    if source == "file":
        path.write_bytes(data)
    done = subprocess.run([*CLI, "--home", str(home), "publish",
                           "-" if source == "stdin" else str(path)],
                          input=data if source == "stdin" else None,
                          capture_output=True, timeout=120, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert stderr.count("\n") == 1
    assert "over 64 MiB" in stderr
    assert "nothing was published" in stderr
    assert _head(home) == 0


def test_publish_still_reads_input_within_its_bound(tmp_path: Path) -> None:
    home = _home(tmp_path)
    line = (b'{"command": "observe_outcome", "key": "k1", "project": "3f9a0c1b2d4e5f60", '
            b'"passed": true, "signal": "verification"}\r\n')
    done = subprocess.run([*CLI, "--home", str(home), "publish", "-"],
                          input=b"\xef\xbb\xbf" + line, capture_output=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert _head(home) > 0


def test_publish_refuses_bytes_that_are_not_utf8_in_one_line(tmp_path: Path) -> None:
    home = _home(tmp_path)
    done = subprocess.run([*CLI, "--home", str(home), "publish", "-"], input=b"\xff\xfe{}\n",
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1
    assert "line 1: not UTF-8" in done.stderr.decode()


@pytest.mark.parametrize("verb", [["skill", "register"], ["skill", "resolve", "triage"]])
def test_a_skill_file_over_its_bound_is_refused_naming_it(tmp_path: Path,
                                                          verb: list[str]) -> None:
    home = _home(tmp_path)
    big = tmp_path / "SKILL.md"
    big.write_bytes(b"# Triage\n" + b"a" * MAX_SKILL_FILE_BYTES)
    done = subprocess.run([*CLI, "--home", str(home), *verb, str(big)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert f"over {MAX_SKILL_FILE_BYTES:,} bytes" in done.stderr
    assert _head(home) == 0
