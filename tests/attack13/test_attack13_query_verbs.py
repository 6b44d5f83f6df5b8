"""Query verbs with ``--json`` on bad input: one line on stderr, exit 2, nothing written.

Run as real processes on a real home holding one outcome and the loop's lesson, and on a
home that does not exist (which must not be created). ``lock.mdb`` is LMDB's reader
table, written by any reader, so only its existence is compared.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

P = "3f9a0c1b2d4e5f60"
ZERO = "00000000-0000-0000-0000-000000000000"
OUTCOME = {"command": "observe_outcome", "key": "k1", "principal": "alice", "project": P,
           "passed": True, "operations": [
               {"op": "a", "target": "t", "ok": False, "error": "x", "order": 0},
               {"op": "b", "target": "t", "ok": True, "order": 1}]}


def _cli(home: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           *argv], input=stdin, capture_output=True, text=True, timeout=120)


def _state(home: Path) -> dict[str, str] | None:
    if not home.exists():
        return None
    found: dict[str, str] = {}
    for top, _, files in os.walk(home):
        for name in files:
            path = Path(top, name)
            found[str(path.relative_to(home))] = "" if name == "lock.mdb" else (
                hashlib.sha256(path.read_bytes()).hexdigest())
    return found


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = tmp_path_factory.mktemp("query") / "home"
    assert _cli(made, "init").returncode == 0
    assert _cli(made, "publish", "-", stdin=json.dumps(OUTCOME)).returncode == 0
    return made


def _refused_cleanly(home: Path, argv: list[str]) -> None:
    before = _state(home)
    done = _cli(home, *argv)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert (done.returncode, len(lines)) == (2, 1), (
        f"exit {done.returncode}, stderr {done.stderr!r}, stdout {done.stdout[:200]!r}")
    assert _state(home) == before, "bad input wrote to the home"


# -- FAILED on c9b9ced ---------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["lessons", "list", "--json", "--project", "nothex"],
    ["lessons", "list", "--json", "--project", "NOTHEX"],
    ["export", "--project", "nothex"],
], ids=["lessons-list-nothex", "lessons-list-upper", "export-nothex"])
def test_a_project_that_is_not_a_digest_is_refused_as_recall_refuses_it(
        home: Path, argv: list[str]) -> None:
    """FAILED on c9b9ced: `recall --project nothex` exits 2 ("is not a project digest"); `lessons
    list --json --project nothex` exits 0 printing nothing (the home holds a lesson), and
    `export --project nothex` exits 0 with an empty export."""
    _refused_cleanly(home, argv)


# -- GUARDS (pass on c9b9ced) --------------------------------------------------------------

BAD = [
    ["lessons", "show", "NOTAUUID", "--json"],
    ["lessons", "show", ZERO, "--json"],
    ["lessons", "history", "NOTAUUID", "--json"],
    ["lessons", "list", "--json", "--bogus"],
    ["why", "NOTAUUID", "--json"],
    ["why", ZERO, "--json"],
    ["recall", "--json", "--project", "nothex", "q"],
    ["recall", "--json", "q"],
    ["recall", "--json", "--project", P, "--as-of", "garbage", "q"],
    ["recall", "--json", "--project", P, "--as-of", "99999", "q"],
    ["recall", "--json", "--project", P, "--session", "x" * 300, "q"],
    ["check", "--json", "--project", "nothex", "a", "t"],
    ["check", "--json", "--project", P, "a"],
    ["check", "--json", "--project", P, "o" * 600, "t"],
    ["log", "--json", "--from", "abc"],
    ["log", "--json", "--limit", "-3"],
    ["log", "--json", "--log", "nosuch"],
    ["verify", "--json", "--log", "nosuch"],
    ["stats", "--json", "--bogus"],
    ["snapshots", "--json", "--bogus"],
    ["erasures", "--json", "--bogus"],
    ["skill", "resolve", "nosuch", "--json"],
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a)[:40] for a in BAD])
def test_guard_bad_input_is_refused_in_one_line_and_writes_nothing(
        home: Path, argv: list[str]) -> None:
    """GUARD (passes)."""
    _refused_cleanly(home, argv)


MISSING = [["lessons", "list", "--json"], ["recall", "--json", "--project", P, "q"],
           ["check", "--json", "--project", P, "a", "t"], ["why", ZERO, "--json"],
           ["log", "--json"], ["verify", "--json"], ["stats", "--json"],
           ["snapshots", "--json"], ["erasures", "--json"], ["facts", "list", "--json"],
           ["deltas", "list", "--json"]]


@pytest.mark.parametrize("argv", MISSING, ids=[" ".join(a)[:30] for a in MISSING])
def test_guard_a_missing_home_is_refused_and_not_created(tmp_path: Path,
                                                         argv: list[str]) -> None:
    """GUARD (passes)."""
    _refused_cleanly(tmp_path / "no-such-home", argv)
