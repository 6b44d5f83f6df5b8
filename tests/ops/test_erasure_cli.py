"""``lessonledger compact`` as a person and a script use it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ops.cli import main
from lessonledger.ops.config import LOG_NAME


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def erased_home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An initialised home with 50 large events, 40 of them erased."""
    home = tmp_path / "home"
    assert run(capsys, "--home", str(home), "init")[0] == 0
    lmdb_home = acquire(str(home))
    try:
        log = EventLog(lmdb_home, LOG_NAME)
        log.append([NewEvent("s", v, "note", os.urandom(5000)) for v in range(50)])
        assert log.erase_bodies(range(1, 41)) == 40
    finally:
        release(lmdb_home)
    return home


def test_compact_json_reports_sizes_and_the_home_still_verifies(
    erased_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--home", str(erased_home), "compact", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert set(result) == {"path", "bytes_before", "bytes_after", "seconds"}
    assert result["path"] == str(erased_home)
    assert 0 < result["bytes_after"] < result["bytes_before"]
    assert result["bytes_after"] == (erased_home / "data.mdb").stat().st_size
    code, out, _ = run(capsys, "--home", str(erased_home), "verify")
    assert code == 0
    assert "40 bodies erased: ok" in out


def test_compact_says_what_it_did_in_one_line(
    erased_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--home", str(erased_home), "compact")
    assert code == 0
    assert re.fullmatch(rf"compacted {re.escape(str(erased_home))}: [\d.]+ kB -> [\d.]+ kB "
                        r"in \d+\.\d\d s\n", out), out


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_compact_of_a_path_that_is_not_a_home_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str
) -> None:
    path = tmp_path / "nothing"
    if make == "empty":
        path.mkdir()
    code, out, err = run(capsys, "--home", str(path), "compact")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"no ledger at {path}" in err
    assert not path.exists() or not list(path.iterdir())


def test_compact_of_a_home_in_use_is_one_line_and_exit_2(
    erased_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (erased_home / "data.mdb").read_bytes()
    lmdb_home = acquire(str(erased_home))
    try:
        code, out, err = run(capsys, "--home", str(erased_home), "compact", "--json")
    finally:
        release(lmdb_home)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "is open in another process (or this one)" in err
    assert "then run `lessonledger compact`" in err
    assert (erased_home / "data.mdb").read_bytes() == before


def test_console_script_compacts(erased_home: Path) -> None:
    script = Path(sys.executable).with_name("lessonledger")
    done = subprocess.run([str(script), "--home", str(erased_home), "compact", "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bytes_after"] > 0
