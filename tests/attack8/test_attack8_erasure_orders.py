"""Erasures in awkward orders (wave 5, attack8): each held, and is kept so.

Every file is scanned with a 16-byte window of what was erased (``residue``): the home,
a checkout of a snapshot taken before the erasure, and the TMPDIR every command ran
with. Also: recall and check by the erased text find nothing, in this process and in one
that held the home open across the erasure; a second erasure of the same subject is
refused and writes nothing; a rebuild after the erasure brings nothing back; and a
lesson's own vector goes from the index files with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.ops.cli import main
from residue import secret, windows, windows_left

P = "a" * 32

#: Opens the home, answers a recall and a check by argv[3] before and after a line on
#: stdin (the erasure happens in between), printing how many lessons matched each time.
HOLDER = """
import sys
from lessonledger.commands import open_ledger
home, project, text = sys.argv[1:4]
with open_ledger(home) as ledger:
    def matched():
        shown = ledger.recall(project, text, record=False).lessons
        check = ledger.check(project, "pytest:tests/", "t-" + text, record=False)
        return sum(text in row.line for row in shown) + len(check.opposing + check.supporting)
    print(matched(), flush=True)
    sys.stdin.readline()
    print(matched(), flush=True)
"""


def _home(tmp_path: Path) -> tuple[Path, str]:
    home, text = tmp_path / "home", secret().decode()
    with open_ledger(home) as ledger:
        for who, words in (("alice", text), ("bob", "bob's own words")):
            ledger.observe_outcome(
                key=who, project=P, principal=who, session=f"s-{who}", passed=True,
                task="task " + words, operations=[
                    Operation(op="pytest:tests/", target="t-" + words, ok=False,
                              error="failed: " + words),
                    Operation(op="pytest:root", target="t-" + words, ok=True, order=1)])
    return home, text


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    return scratch


def test_erase_then_checkout_of_an_older_snapshot_then_rebuild_then_erase_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tmpdir_env: Path) -> None:
    home, text = _home(tmp_path)
    wanted = windows([text.encode()])
    assert _cli(capsys, "--home", str(home), "snapshot", "--name", "before")[0] == 0
    assert _cli(capsys, "--home", str(home), "erase", "--principal", "alice",
                "--reason", "asked")[0] == 0
    assert _cli(capsys, "--home", str(home), "checkout", "before", "--into",
                str(tmp_path / "restored"))[0] == 0
    assert _cli(capsys, "--home", str(home), "rebuild", "all")[0] == 0
    files = {p: p.read_bytes() for p in home.rglob("*") if p.is_file() and p.name != "lock.mdb"}
    code, err = _cli(capsys, "--home", str(home), "erase", "--principal", "alice",
                     "--reason", "asked again")
    assert code == 2
    assert err.count("\n") == 1
    assert {p: p.read_bytes() for p in home.rglob("*")
            if p.is_file() and p.name != "lock.mdb"} == files
    assert _cli(capsys, "--home", str(home), "compact")[0] == 0
    assert windows_left(str(tmp_path), wanted) == {}
    with open_ledger(tmp_path / "restored") as restored:
        assert all(text not in row.line
                   for row in restored.recall(P, text, record=False).lessons)
        assert all(text not in row.text for row in restored.view.lessons.values())


def test_a_process_holding_the_home_across_the_erasure_finds_nothing_by_its_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tmpdir_env: Path) -> None:
    home, text = _home(tmp_path)
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(home), P, text],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env={**os.environ}) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        assert int(holder.stdout.readline()) >= 1
        code, err = _cli(capsys, "--home", str(home), "erase", "--session", "s-alice",
                         "--reason", "asked")
        assert code == 3, err  # erased; the compaction waits for the holder
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert int(holder.stdout.readline()) == 0
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    assert _cli(capsys, "--home", str(home), "compact")[0] == 0
    assert windows_left(str(tmp_path), windows([text.encode()])) == {}


def test_a_lessons_own_vector_leaves_the_index_files_with_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home, _ = _home(tmp_path)
    vector = np.random.default_rng(8).standard_normal(256).astype(np.float32)
    vector /= np.linalg.norm(vector)
    with open_ledger(home) as ledger:
        (evidence,) = [o for o in ledger.view.outcomes.values() if o.session == "s-bob"]
        lesson = ledger.propose_lesson(
            key="own", project=P, principal="carol", text="run the root suite", kind="do",
            prefer_op="pytest:root", target="t-bob's own words", evidence=[evidence.outcome_id],
            vector=vector.tolist()).ids["lesson_id"]
    stored = windows([vector.astype(np.float16).tobytes()])
    assert windows_left(str(home / "vectors"), stored)
    assert _cli(capsys, "--home", str(home), "erase", "--lesson", str(lesson),
                "--reason", "asked")[0] == 0
    assert windows_left(str(home), stored) == {}
