"""Queries are the read side: they answer on a read-only home and never take the write lock.

Real homes, a real read-only bind mount (skipped where mounting is not allowed), and real
processes: a writer and a query process side by side while a third holds LMDB's write
lock.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lessonledger.ops.cli import main

P = "3f9a0c1b2d4e5f60"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


@pytest.fixture
def home(demo_copy: Path) -> Path:
    """A home with lessons, a saved view and index, and some events after them.

    The demo's, this test's own copy (see conftest).
    """
    return demo_copy


def queries(capsys: pytest.CaptureFixture[str], home: Path) -> list[list[str]]:
    """Every query command, with a lesson id and a project the home has."""
    code, out, err = run(capsys, "--home", str(home), "lessons", "list", "--all", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    lesson = next(r for r in rows if r["status"] != "claimed")
    project = lesson["scope"] if lesson["scope"] != "global" else rows[-1]["scope"]
    ident = lesson["lesson_id"]
    code, out, _ = run(capsys, "--home", str(home), "stats", "--json")
    head = str(json.loads(out)["head"])
    # Recall's recency counts from now, so its figures are compared as of the head.
    return [
        ["recall", "--project", project, "--as-of", head, lesson["text"][:40], "--json"],
        ["recall", "--project", project, "--no-record", lesson["text"][:40]],
        ["check", "--project", project, "--no-record", lesson["avoid_op"] or lesson["prefer_op"],
         lesson["target"], "--json"],
        ["why", ident, "--project", project, "--query", "run the tests", "--as-of", head,
         "--json"],
        ["why", ident, "--json"],
        ["lessons", "list", "--all", "--json"],
        ["lessons", "show", ident[:8], "--json"],
        ["lessons", "history", ident, "--json"],
        ["log", "--json"],
    ]


def answers(capsys: pytest.CaptureFixture[str], home: Path, asked: list[list[str]],
            *extra: str) -> list[str]:
    said = []
    for argv in asked:
        code, out, err = run(capsys, "--home", str(home), *argv, *extra)
        assert code == 0, (argv, err)
        # What a read-only home adds: that the answer was not recorded.
        said.append(out.replace(', "recorded": false', "").replace(',"recorded":false', ""))
    return said


@pytest.fixture
def mounted(home: Path) -> Iterator[Path]:
    """The home, bind-mounted read-only."""
    target = home.parent / "mounted"
    target.mkdir()
    if subprocess.run(["mount", "--bind", str(home), str(target)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("needs permission to bind-mount (root in a privileged container)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(target)],
                          capture_output=True, check=False).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True, check=False)


def test_queries_on_a_read_only_mount_answer_as_on_the_original_and_write_nothing(
        home: Path, mounted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asked = queries(capsys, home)
    before = files(home)
    on_mount = answers(capsys, mounted, asked)
    assert files(home) == before
    assert on_mount == answers(capsys, home, asked)
    code, out, _ = run(capsys, "--home", str(mounted), "recall", "--project", P, "tests",
                       "--json")
    assert code == 0
    assert json.loads(out)["recorded"] is False


def test_read_only_queries_on_a_writable_copy_write_not_a_byte(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asked = queries(capsys, home)
    backup = home.parent / "backup"
    shutil.copytree(home, backup, ignore=shutil.ignore_patterns("*.lock", "lock.mdb", "lock"))
    before = files(backup)
    assert answers(capsys, backup, asked, "--read-only") == answers(capsys, home, asked)
    assert files(backup) == before


WRITER = """
import sys, time
from lessonledger.commands import Operation, open_ledger
home, until = sys.argv[1], float(sys.argv[2])
i = 0
with open_ledger(home, sync=False) as ledger:
    while time.time() < until:
        ledger.observe_outcome(key=f"w{i}", session=f"s{i % 7}", project="PROJECT", passed=True,
            operations=[Operation(op=f"op{i % 5}", target="t", ok=False, error="exit 2"),
                        Operation(op=f"op{i % 5}-b", target="t", ok=True, order=1)])
        i += 1
print(i)
""".replace("PROJECT", P)

QUERIER = """
import json, sys, time
from lessonledger.commands.read_side import Reader
home, until = sys.argv[1], float(sys.argv[2])
times = []
with Reader(home) as reader:
    while time.time() < until:
        reader.recall("PROJECT", "run op1 on t", session="q")
        reader.check("PROJECT", "op1", "t", session="q")
        reader.lessons("PROJECT", session="q")
        times.append(time.time())
print(json.dumps(times))
""".replace("PROJECT", P)

HOLDER = """
import sys, time, lmdb
env = lmdb.open(sys.argv[1], max_dbs=128, map_size=64 << 30)
txn = env.begin(write=True)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
txn.abort()
env.close()
"""


def test_a_query_process_keeps_answering_while_another_holds_the_write_lock(
        tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    subprocess.run([sys.executable, "-c", WRITER, home, str(time.time() + 1)], check=True,
                   capture_output=True)
    until = time.time() + 30
    writer = subprocess.Popen([sys.executable, "-c", WRITER, home, str(until)],
                              stdout=subprocess.PIPE, text=True)
    querier = subprocess.Popen([sys.executable, "-c", QUERIER, home, str(until)],
                               stdout=subprocess.PIPE, text=True)
    time.sleep(10)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, home, "2"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    held_from = time.time()
    holder.communicate(timeout=30)
    assert holder.returncode == 0
    held_to = time.time()
    out, _ = querier.communicate(timeout=120)
    written, _ = writer.communicate(timeout=120)
    assert querier.returncode == 0
    assert writer.returncode == 0
    times = json.loads(out)
    during = [t for t in times if held_from + 0.2 < t < held_to - 0.2]
    assert len(during) >= 10, f"only {len(during)} answers while the write lock was held"
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) < 1.0, f"a query waited {max(gaps):.2f} s"
    assert int(written) > 0


def test_a_query_process_started_while_another_holds_the_write_lock_answers(
        tmp_path: Path) -> None:
    """GUARD: on fe9130e a fresh process waited for the lock to open its trees (a
    writable LMDB environment opens each in a write transaction): here 15 s."""
    home = str(tmp_path / "home")
    subprocess.run([sys.executable, "-c", WRITER, home, str(time.time() + 1)], check=True,
                   capture_output=True)
    cli = [sys.executable, "-m", "lessonledger.ops", "--home", home]
    asked = [["lessons", "list", "--json"], ["log", "--limit", "3", "--json"],
             ["check", "--project", P, "--no-record", "--json", "op1", "t"],
             ["snapshots", "--json"], ["erasures", "--json"],
             ["recall", "--project", P, "--session", "q", "--json", "run op1 on t"]]
    alone = [subprocess.run([*cli, *argv], capture_output=True, text=True, check=True).stdout
             for argv in asked[:2]]
    head = len(subprocess.run([*cli, "log", "--json"], capture_output=True, text=True,
                              check=True).stdout.splitlines())
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, home, "15"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        started = time.time()
        beside = [subprocess.run([*cli, *argv], capture_output=True, text=True, timeout=60)
                  for argv in asked]
        took = time.time() - started
    finally:
        holder.communicate(timeout=30)
    assert [done.returncode for done in beside] == [0] * len(asked), [d.stderr for d in beside]
    assert [done.stdout for done in beside[:2]] == alone
    # Every answer came before the lock was let go; the recall's record only waited for
    # it (5 s at most), then was given up, and said so.
    assert took < 13, f"the queries took {took:.1f} s beside the held lock"
    assert "not written" in beside[-1].stderr
    after = subprocess.run([*cli, "recall", "--project", P, "--session", "q", "--json",
                            "run op1 on t"], capture_output=True, text=True, check=True)
    assert after.stderr == ""
    log = subprocess.run([*cli, "log", "--json"], capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == head + 1  # that one's record, written
