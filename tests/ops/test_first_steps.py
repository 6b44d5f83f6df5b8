"""What a new user tries first works, or says in one line what to do instead.

A home made from Python is a home to the CLI; ``--home`` goes before or after the
sub-command; ``init`` never takes over a directory holding something else; the demo
keeps out of the home agents use; ``why --as-of`` before a lesson says "not yet";
``rebuild`` speaks JSON; Ctrl-C is one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ctrl_c import with_ctrl_c
from lessonledger.commands.ledger import open_ledger
from lessonledger.ops.cli import main
from lessonledger.projections.views import view_names


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse refusing an argument
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_home_made_from_python_is_a_home_to_the_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "made-in-python"
    with open_ledger(home) as ledger:
        ledger.reconcile(key="r1", now="2026-11-29T00:00:00Z")
    for argv in (["log"], ["verify"], ["stats"], ["lessons", "list"]):
        code, _, err = run(capsys, "--home", str(home), *argv)
        assert code == 0, (argv, err)
    assert "reconcile.passed" in run(capsys, "--home", str(home), "log")[1]


def test_home_may_come_after_the_sub_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    assert run(capsys, "init", "--home", first)[0] == 0
    assert run(capsys, "init", "--home", second)[0] == 0
    assert run(capsys, "lessons", "list", "--home", first)[0] == 0
    code, out, err = run(capsys, "stats", "--json", "--home", first)
    assert code == 0, err
    assert json.loads(out)["home"] == first
    # Before it still works, and the later one wins.
    assert json.loads(run(capsys, "--home", first, "stats", "--json")[1])["home"] == first
    code, out, _ = run(capsys, "--home", first, "stats", "--json", "--home", second)
    assert json.loads(out)["home"] == second


def test_the_command_a_missing_home_suggests_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "absent"
    code, _, err = run(capsys, "--home", str(home), "log")
    assert code == 2
    suggested = err.split("`")[1].split()
    assert suggested[0] == "lessonledger"
    assert run(capsys, *suggested[1:])[0] == 0
    assert run(capsys, "--home", str(home), "log")[0] == 0


def test_init_refuses_a_directory_holding_something_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\n")
    code, out, err = run(capsys, "--home", str(checkout), "init")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "empty or new directory" in err
    assert sorted(p.name for p in checkout.iterdir()) == ["pyproject.toml"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, "--home", str(empty), "init")[0] == 0
    assert run(capsys, "--home", str(empty), "init")[0] == 0, "a home is initialised again"


def test_the_demo_keeps_out_of_the_home_agents_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LESSONLEDGER_HOME", raising=False)
    code, out, err = run(capsys, "demo")
    assert code == 0, err
    demo = tmp_path / ".lessonledger-demo"
    assert f"ledger home: {demo}" in out
    assert f"lessonledger --home {demo} lessons list" in out
    assert (demo / "data.mdb").exists()
    assert not (tmp_path / ".lessonledger").exists()
    # Named explicitly, the demo uses the home it is given.
    monkeypatch.setenv("LESSONLEDGER_HOME", str(tmp_path / "chosen"))
    assert run(capsys, "demo")[0] == 0
    assert (tmp_path / "chosen" / "data.mdb").exists()


def test_rebuild_speaks_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / "home")
    assert run(capsys, "--home", home, "init")[0] == 0
    code, out, err = run(capsys, "--home", home, "rebuild", "--json")
    assert code == 0, err
    assert json.loads(out) == {"views": view_names(), "position": 0, "lessons": 0}
    code, out, err = run(capsys, "--home", home, "rebuild", "lessons", "--json")
    assert json.loads(out)["views"] == ["lessons"]


def test_ctrl_c_while_bench_recall_builds_its_index_is_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("lessonledger")
    bench = subprocess.Popen(
        [str(script), "bench", "recall", "--sizes", "30000", "--queries", "10",
         "--projects", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)}, preexec_fn=with_ctrl_c)
    assert bench.stderr is not None
    for line in bench.stderr:
        if line.startswith("embedded"):
            break
    time.sleep(1.0)  # into the index build, which takes seconds at this size
    bench.send_signal(signal.SIGINT)
    _, err = bench.communicate(timeout=120)
    assert "Traceback" not in err, err
    assert bench.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("lessonledger: interrupted")
