"""``export -o`` into the home it reads (wave 5, attack8).

An export written over ``data.mdb`` replaced the ledger with JSON lines (exit 0, the home
gone); one written anywhere else inside the home became one of its files, outside
everything an erasure compacts, so the erased content stayed in the home for good.
Both are refused in one line with exit code 2, and so is a directory: nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.ops.cli import main

P = "a" * 32


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with open_ledger(home) as ledger:
        ledger.observe_outcome(key="k", project=P, principal="alice", passed=True,
                               operations=[Operation(op="a", target="t", ok=False, error="e"),
                                           Operation(op="b", target="t", ok=True, order=1)])
    return home


def _files(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*"))
            if p.is_file() and p.name != "lock.mdb"}


@pytest.mark.parametrize("where", ["data.mdb", "all.jsonl", "vectors/all.jsonl",
                                   "../home/export.jsonl"])
def test_an_export_into_its_own_home_is_refused_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    home = _home(tmp_path)
    before = _files(tmp_path)
    code = main(["--home", str(home), "export", "-o", str(home / where)])
    out, err = capsys.readouterr()
    assert code == 2, out
    assert err.count("\n") == 1
    assert "inside" in err
    assert _files(tmp_path) == before
    assert main(["--home", str(home), "verify"]) == 0


def test_an_export_to_a_directory_is_refused_as_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    (tmp_path / "out").mkdir()
    before = _files(tmp_path)
    code = main(["--home", str(home), "export", "-o", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1
    assert "is a directory" in err
    assert _files(tmp_path) == before


def test_an_export_beside_the_home_is_written(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    assert main(["--home", str(home), "export", "-o", str(tmp_path / "home.jsonl")]) == 0
    assert (tmp_path / "home.jsonl").read_text().count("\n") == 3
    capsys.readouterr()


def test_a_reversed_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    out = tmp_path / "range.jsonl"
    code = main(["--home", str(home), "export", "--from", "3", "--to", "2", "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1
    assert "--from 3 is past --to 2" in err
    assert not out.exists()
