"""The lesson commands of the CLI: publish, list, show, history, edit, retire, rebuild."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from lessonledger.ops.cli import main

PROJECT = "a" * 16
COMMANDS: list[dict[str, Any]] = [
    {"command": "observe_outcome", "key": "task-1", "session": "s1", "project": PROJECT,
     "passed": True, "operations": [
         {"op": "pytest:tests/", "target": "tests", "ok": False, "error": "no conftest"},
         {"op": "pytest:root", "target": "tests", "ok": True, "order": 1}]},
    {"command": "propose_lesson", "key": "claim-1", "project": PROJECT, "kind": "do",
     "text": "Use uv to install", "prefer_op": "uv:install", "target": "deps", "source": "model"},
    # A lesson is new in the first pass; the second finds it unused and decays it.
    {"command": "reconcile", "key": "r1", "now": "2026-12-01T00:00:00Z"},
    {"command": "reconcile", "key": "r2", "now": "2026-12-02T00:00:00Z"},
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "home")
    assert run(capsys, "--home", path, "init")[0] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(json.dumps(c) for c in COMMANDS)))
    code, out, _ = run(capsys, "--home", path, "publish")
    assert code == 0
    keys = [json.loads(line)["key"] for line in out.splitlines()]
    assert keys == ["task-1", "claim-1", "r1", "r2"]
    return path


def _lessons(
    capsys: pytest.CaptureFixture[str], home: str, *extra: str
) -> list[dict[str, object]]:
    code, out, _ = run(capsys, "--home", home, "lessons", "list", "--json", *extra)
    assert code == 0
    return [json.loads(line) for line in out.splitlines()]


def test_publish_learns_a_loop_lesson_and_keeps_the_claim(
    home: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _lessons(capsys, home)
    assert [(r["source"], r["status"]) for r in rows] == [("loop", "trial"), ("model", "claimed")]


def test_publishing_again_writes_nothing(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(COMMANDS[0])))
    code, out, _ = run(capsys, "--home", home, "publish", "-")
    assert code == 0
    assert json.loads(out)["positions"] == [1]


def test_show_lists_the_events_that_moved_it(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    lesson = str(_lessons(capsys, home)[0]["lesson_id"])
    code, out, _ = run(capsys, "--home", home, "lessons", "show", lesson[:18], "--json")
    shown = json.loads(out)
    assert code == 0
    assert [m[1] for m in shown["moves"]] == ["lesson.proposed", "reconcile.passed"]
    assert shown["confidence"] == pytest.approx(0.48)


def test_edit_then_history_walks_the_chain(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    lesson = str(_lessons(capsys, home)[0]["lesson_id"])
    code, _, _ = run(capsys, "--home", home, "lessons", "edit", lesson, "--text",
                     "Run pytest from the repository root", "--expected-version", "0")
    assert code == 0
    code, out, _ = run(capsys, "--home", home, "lessons", "history", lesson, "--json")
    chain = json.loads(out)
    assert [(r["status"], r["text"][:10]) for r in chain] == [
        ("superseded", "Prefer `py"), ("trial", "Run pytest")]


def test_a_retirement_keeps_the_reason_given(
    home: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lesson = str(_lessons(capsys, home)[0]["lesson_id"])
    assert run(capsys, "--home", home, "lessons", "retire", lesson,
               "--reason", "wrong for this repo")[0] == 0
    code, out, _ = run(capsys, "--home", home, "lessons", "show", lesson, "--json")
    assert code == 0
    assert json.loads(out)["moves"][-1][4] == "retired:user: wrong for this repo"


def test_stale_edit_and_unknown_lesson_are_one_line_exit_2(
    home: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lesson = str(_lessons(capsys, home)[0]["lesson_id"])
    code, _, err = run(capsys, "--home", home, "lessons", "retire", lesson,
                       "--expected-version", "7")
    assert code == 2
    assert "not 7" in err
    assert err.count("\n") == 1
    code, _, err = run(capsys, "--home", home, "lessons", "show", "ffff")
    assert code == 2
    assert "no lesson id starts with 'ffff'" in err


def test_a_bad_line_publishes_nothing(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = run(capsys, "--home", home, "stats", "--json")[1]
    lines = [json.dumps({**COMMANDS[0], "key": "fresh"}), '{"command": "observe_outcome"}']
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines)))
    code, _, err = run(capsys, "--home", home, "publish")
    assert code == 2
    assert "line 2" in err
    assert run(capsys, "--home", home, "stats", "--json")[1] == before


@pytest.mark.parametrize("refused", [
    {"command": "edit_lesson", "key": "e9", "text": "x",
     "lesson_id": "00000000-0000-0000-0000-000000000000"},
    {"command": "propose_lesson", "key": "p9", "project": PROJECT, "kind": "do",
     "text": "password=hunter2 works", "prefer_op": "login", "target": "auth"},
])
def test_a_refused_line_publishes_nothing_either(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    refused: dict[str, Any],
) -> None:
    # Well-formed, but refused when it runs: the lines before it must not stay written.
    before = run(capsys, "--home", home, "stats", "--json")[1]
    lines = [json.dumps({**COMMANDS[0], "key": "fresh"}), json.dumps(refused)]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines)))
    code, out, err = run(capsys, "--home", home, "publish")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "line 2" in err
    assert run(capsys, "--home", home, "stats", "--json")[1] == before


def test_rebuild_gives_the_same_lessons(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = _lessons(capsys, home, "--all")
    code, out, _ = run(capsys, "--home", home, "rebuild")
    assert code == 0
    assert "2 lessons" in out
    assert _lessons(capsys, home, "--all") == before


def _line(**fields: Any) -> str:
    return json.dumps({**COMMANDS[0], "key": "fresh", **fields})


@pytest.mark.parametrize(("line", "says"), [
    (_line(operations=[{"op": "o", "target": "t", "ok": True,
                        "order": 18446744073709551616}]), "$.operations[0].order"),
    (_line(operations=[{"op": "o", "target": "t", "ok": True, "order": 10 ** 40}]),
     "$.operations[0].order"),
    (_line(task="\ud800"), "$.task is not valid Unicode"),
    (_line(fingerprint={"python": "3.11 \udcff"}), "$.fingerprint.python is not valid Unicode"),
], ids=["order-2**64", "order-40-digits", "lone-surrogate", "surrogate-in-a-map"])
def test_bad_input_is_one_line_exit_2_and_publishes_nothing(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    line: str, says: str,
) -> None:
    before = run(capsys, "--home", home, "stats", "--json")[1]
    monkeypatch.setattr("sys.stdin", io.StringIO(line))
    code, out, err = run(capsys, "--home", home, "publish")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err
    assert "line 1" in err
    assert says in err
    assert run(capsys, "--home", home, "stats", "--json")[1] == before


def test_a_byte_order_mark_before_the_first_command_is_accepted(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\ufeff" + _line()))
    code, out, err = run(capsys, "--home", home, "publish")
    assert code == 0, err
    assert json.loads(out)["key"] == "fresh"
    path = tmp_path / "commands.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + _line(key="from-a-file").encode())
    code, out, err = run(capsys, "--home", home, "publish", str(path))
    assert code == 0, err
    assert json.loads(out)["key"] == "from-a-file"


@pytest.mark.parametrize("given", ["", "\n  \n"], ids=["empty", "blank-lines"])
def test_publishing_nothing_is_refused_in_one_line(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    given: str,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(given))
    code, out, err = run(capsys, "--home", home, "publish")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "no commands on standard input" in err
