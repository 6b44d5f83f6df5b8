"""The command line as a person and a script use it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog
from lessonledger.ops.cli import main
from lessonledger.ops.config import LOG_NAME
from residue import erase


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def demo_home(demo_copy: Path) -> Path:
    return demo_copy  # the demo's home, this test's own (see conftest)


def _repeats(out: str) -> tuple[int, int]:
    """(memory on, memory off): traps hit again after being seen to fail, from the table."""
    line = next(x for x in out.splitlines() if "a trap hit again" in x)
    on, off = re.findall(r"(\d+) of \d+|no chance", line)
    return int(on or 0), int(off or 0)


def test_demo_tells_the_story(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--home", str(tmp_path / "fresh"), "demo")
    assert code == 0
    on, off = _repeats(out)
    assert on <= 1 < 20 <= off, out
    assert "[global, trusted" in out, "a shared trap was learned in two projects"
    assert "no longer shown (the world changed)" in out
    assert "Why the strongest lesson exists" in out
    assert "lesson.proposed        by policy" in out
    assert "chain and bodies intact" in out


def _counts(capsys: pytest.CaptureFixture[str], home: Path) -> dict[str, int]:
    code, out, _ = run(capsys, "--home", str(home), "stats", "--json")
    assert code == 0
    counts: dict[str, int] = json.loads(out)["events_by_type"]
    return counts


def test_a_second_demo_carries_on_with_what_the_first_learned(
    demo_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _counts(capsys, demo_home)
    code, out, _ = run(capsys, "--home", str(demo_home), "demo")
    assert code == 0
    assert "This is run 2 in this home" in out
    assert "chain and bodies intact" in out
    again = _counts(capsys, demo_home)
    assert again["outcome.observed"] == 2 * first["outcome.observed"] == 2 * 36
    on, off = _repeats(out)
    assert on == 0
    assert off >= 20


def test_log_json_shows_everything_an_auditor_needs(
    demo_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--home", str(demo_home), "log", "--from", "2", "--limit", "3",
                       "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [r["position"] for r in rows] == [2, 3, 4]
    assert set(rows[0]) >= {"position", "recorded_at", "occurred_at", "type", "stream",
                            "actor", "principal", "body"}
    assert all(r["body"]["type"] == r["type"] for r in rows)
    for row in rows:
        for clock in ("recorded_at", "occurred_at"):
            # ISO 8601 UTC to the microsecond, exactly the nanoseconds beside it.
            when, ns = datetime.fromisoformat(row[clock]), row[f"{clock}_ns"]
            assert when.tzinfo == UTC
            assert (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) \
                == ns // 1000


def test_erased_body_shows_as_erased_and_verifies(
    demo_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = acquire(str(demo_home))
    erase(EventLog(home, LOG_NAME), [1])
    release(home)
    code, out, _ = run(capsys, "--home", str(demo_home), "log", "--limit", "1")
    assert code == 0
    assert out.rstrip().endswith("erased")
    code, out, _ = run(capsys, "--home", str(demo_home), "verify")
    assert code == 0
    assert "1 bodies erased: ok" in out


def test_verify_names_a_body_deleted_without_an_erasure(
    demo_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = acquire(str(demo_home))
    EventLog(home, LOG_NAME).erase_bodies([7])  # no Erased record names it
    release(home)
    code, out, _ = run(capsys, "--home", str(demo_home), "verify")
    assert code == 1
    assert "position 7: body: body is missing and no erasure names it" in out
    assert "bodies erased" not in out
    assert "DAMAGED at position 7" in out


def test_verify_names_a_damaged_body(demo_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = acquire(str(demo_home))
    with home.env.begin(write=True) as txn:
        db = home.env.open_db(f"{LOG_NAME}.log".encode(), txn=txn)
        txn.put((3).to_bytes(8, "big") + b"\x01", b"\x00" * 16 + b"forged", db=db)
    release(home)
    code, out, _ = run(capsys, "--home", str(demo_home), "verify")
    assert code == 1
    assert "position 3: body:" in out
    assert "DAMAGED at position 3" in out
    code, out, _ = run(capsys, "--home", str(demo_home), "verify", "--json")
    report = json.loads(out)
    assert code == 1
    assert report["ok"] is False
    assert [p["position"] for p in report["problems"]] == [3]


def test_stats_counts_by_type(demo_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--home", str(demo_home), "stats", "--json")
    stats = json.loads(out)
    assert code == 0
    assert stats["head"] == sum(stats["events_by_type"].values())
    assert stats["events_by_type"]["outcome.observed"] == 3 * 12  # projects x sessions


@pytest.mark.parametrize("argv", [
    ["log", "--from", "0"], ["log", "--limit", "lots"], ["nonsense"], ["bench", "append",
                                                                       "--events", "5"],
])
def test_bad_arguments_say_what_to_do_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--home", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert len(err.strip().splitlines()) == 1
    assert "--help" in err


def test_missing_home_is_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--home", str(tmp_path / "absent"), "log")
    assert code == 2
    assert err.count("\n") == 1
    assert "lessonledger init" in err
    assert not (tmp_path / "absent").exists()


def test_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("lessonledger")
    assert script.exists()
    init = subprocess.run([str(script), "--home", str(tmp_path / "h"), "init"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert init.returncode == 0, init.stderr
    assert "ledger home ready" in init.stdout


@pytest.mark.parametrize(("argv", "says"), [
    (["log", "--from", "99999999999999999999999"], "expected a whole number"),
    (["log", "--limit", "0"], "expected a whole number"),
    (["reconcile", "--now", "0001-01-01"], "outside 1970-2261"),
    (["lessons", "edit", "0", "--text", ""], "at `$.text`"),
    (["publish", "BINARY"], "not UTF-8"),
])
def test_input_the_checks_found_is_one_line_never_a_traceback(
    demo_home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    binary = demo_home.parent / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe{}\n")
    argv = [str(binary) if a == "BINARY" else a for a in argv]
    if argv[:2] == ["lessons", "edit"]:
        listed = run(capsys, "--home", str(demo_home), "lessons", "list", "--json")[1]
        argv[2] = json.loads(listed.splitlines()[0])["lesson_id"]
    before = run(capsys, "--home", str(demo_home), "log", "--json")[1]
    try:
        code, _, err = run(capsys, "--home", str(demo_home), *argv)
    except SystemExit as exited:  # argparse refuses it before any command runs
        code, err = int(str(exited.code)), capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert says in err
    assert run(capsys, "--home", str(demo_home), "log", "--json")[1] == before


@pytest.mark.parametrize("damage", ["truncated", "emptied", "deleted"])
def test_a_log_file_cut_short_or_lost_is_reported_not_read(
    demo_home: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    data = demo_home / "data.mdb"
    if damage == "deleted":
        data.unlink()
    else:
        os.truncate(data, 0 if damage == "emptied" else data.stat().st_size // 2)
    for command in ("verify", "log", "stats"):
        code, out, err = run(capsys, "--home", str(demo_home), command)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1
        assert "restore" in err
    assert data.exists() == (damage != "deleted")


def _files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def test_read_only_audits_write_not_a_byte(
    demo_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A copy as a backup holds it: no lock files, nobody writing.
    backup = demo_home.parent / "backup"
    shutil.copytree(demo_home, backup, ignore=shutil.ignore_patterns("*.lock", "lock.mdb"))
    before = _files(backup)
    for command in (["verify"], ["log", "--json"]):
        code, out, err = run(capsys, "--home", str(backup), *command, "--read-only")
        assert code == 0, err
        assert out == run(capsys, "--home", str(demo_home), *command)[1]
    code, out, _ = run(capsys, "--home", str(backup), "stats", "--json", "--read-only")
    stats = json.loads(out)
    assert code == 0
    assert stats["head"] == sum(stats["events_by_type"].values()) > 0
    assert _files(backup) == before


def test_a_home_on_a_read_only_filesystem_is_audited_without_asking(
    demo_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mounted = demo_home.parent / "mounted"
    mounted.mkdir()
    bind = subprocess.run(["mount", "--bind", str(demo_home), str(mounted)],
                          capture_output=True, check=False)
    if bind.returncode != 0:
        pytest.skip("needs permission to bind-mount (root in a privileged container)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)],
                          capture_output=True, check=False).returncode != 0:
            pytest.skip("cannot remount read-only here")
        code, out, err = run(capsys, "--home", str(mounted), "verify")
        assert code == 0, err
        assert ": ok" in out
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True, check=False)
