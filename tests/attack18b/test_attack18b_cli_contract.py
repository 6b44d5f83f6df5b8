"""attack18b: the command line's contract for bad input (README "A short tour").

README: "Bad input prints one line saying what is wrong and what to do, and exits with
code 2, having written nothing."

- ``deltas list --status actve`` (a typo of a closed set: staged, active, rejected,
  archived, orphaned, superseded) answers "no deltas" with exit 0: a reviewer is told
  there is nothing to review.
- ``skill resolve NAME FILE --scope NOTHEX`` resolves and prints with exit 0 (the same
  with ``--session`` is refused, exit 2, only when the record is written): a scope that
  is no project digest is bad input either way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import InvalidCommandError

CLI = str(Path(sys.executable).with_name("lessonledger"))
BODY = "# Triage\n\nDo the thing.\n\n## Drafting replies\n\nBe nice.\n"


def _home(tmp_path: Path) -> tuple[Path, Path]:
    home, skill = tmp_path / "home", tmp_path / "SKILL.md"
    skill.write_text(BODY)
    with open_ledger(home, sync=False) as led:
        led.skills.register("triage", BODY, tools=["search"])
        delta = led.skills.propose("triage", tier=3, kind="preference",
                                   anchor="drafting-replies", provenance="user_instruction",
                                   payload="Keep it short.").ids["delta_id"]
        led.skills.approve([delta])
    return home, skill


def _run(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "--home", str(home), *argv], capture_output=True, text=True,
                          timeout=60, check=False)


def test_deltas_list_refuses_a_status_that_does_not_exist(tmp_path: Path) -> None:
    home, _ = _home(tmp_path)
    assert "active" in _run(home, "deltas", "list", "--status", "active").stdout
    done = _run(home, "deltas", "list", "--status", "actve")
    assert done.returncode == 2, (done.returncode, done.stdout)
    assert len(done.stderr.strip().splitlines()) == 1


def test_skill_resolve_refuses_a_scope_that_is_no_project_digest(tmp_path: Path) -> None:
    home, skill = _home(tmp_path)
    done = _run(home, "skill", "resolve", "triage", str(skill), "--scope", "NOTHEX")
    assert done.returncode == 2, (done.returncode, done.stdout[:200])
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_api_refuses_such_a_scope_too(tmp_path: Path) -> None:
    home, _ = _home(tmp_path)
    with open_ledger(home, sync=False) as led:
        head = led.head()
        with pytest.raises(InvalidCommandError, match="not a project digest"):
            led.skills.resolve("triage", BODY, scope="NOTHEX", session="s1")
        assert led.head() == head
