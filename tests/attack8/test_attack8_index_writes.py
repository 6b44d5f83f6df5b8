"""A refused command rewrote the vector index (wave 5, attack8).

Every command line that opens a ledger saved the whole vector index again when it
closed, as a new generation of files, even when nothing had changed since it was saved:
a refused ``erase`` (a typo in a principal's name) rewrote ``index-N.usearch``,
``vectors-N.npy``, ``slots-N.npy`` and ``meta.json``. Bad input writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.ops.cli import main

P = "a" * 32


def _files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and p.name != "lock.mdb"}


@pytest.mark.parametrize("argv", [
    ["erase", "--principal", "nobody", "--reason", "typo"],
    ["lessons", "retire", "00000000"],
    ["snapshot", "--name", "a\nb"],
])
def test_a_refused_command_leaves_every_file_of_the_home_as_it_was(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    home = tmp_path / "home"
    with open_ledger(home) as ledger:
        ledger.observe_outcome(key="k", project=P, principal="alice", passed=True,
                               operations=[Operation(op="a", target="t", ok=False, error="e"),
                                           Operation(op="b", target="t", ok=True, order=1)])
    before = _files(home)
    assert main(["--home", str(home), *argv]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert _files(home) == before


def test_an_index_behind_the_view_or_changed_is_still_saved(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_ledger(home) as ledger:
        ledger.observe_outcome(key="k", project=P, principal="alice", passed=True,
                               operations=[Operation(op="a", target="t", ok=False, error="e"),
                                           Operation(op="b", target="t", ok=True, order=1)])
    saved = sorted(p.name for p in (home / "vectors").iterdir())
    with open_ledger(home) as ledger:
        ledger.observe_outcome(key="k2", project=P, principal="bob", passed=True,
                               operations=[Operation(op="c", target="u", ok=False, error="e"),
                                           Operation(op="d", target="u", ok=True, order=1)])
    assert sorted(p.name for p in (home / "vectors").iterdir()) != saved
    with open_ledger(home) as ledger:
        assert len(ledger.recall(P, "c d", record=False).lessons) == 2
