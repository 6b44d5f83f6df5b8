"""``lessonledger recall``, ``check`` and ``why``, with ``--json`` and ``--as-of``.

A home is filled through ``publish`` (commands dated 2024, so evidence recency is nil and
an answer replayed later carries the same figures), then asked the way an agent or an
engineer would ask it. ``--as-of`` answers must equal what the same command printed when
the ledger stood at that position or time; bad ``--as-of`` values are one line on stderr
and exit code 2.
"""

from __future__ import annotations

import io
import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lessonledger.ops.cli import main

P, Q, EMPTY = "a" * 32, "b" * 32, "c" * 32
WHEN = "2024-01-01T00:00:00Z"


def outcome(key: str, project: str, session: str, ops: list[tuple[str, str, bool, str]],
            *, passed: bool = True, in_play: list[str] | None = None) -> dict[str, Any]:
    return {"command": "observe_outcome", "key": key, "project": project, "session": session,
            "passed": passed, "occurred_at": WHEN, "in_play": in_play or [],
            "operations": [{"op": op, "target": target, "ok": ok, "error": error, "order": i}
                           for i, (op, target, ok, error) in enumerate(ops)]}


FIRST: list[dict[str, Any]] = [
    outcome("task-1", P, "s1", [("pytest:tests/", "tests", False, "no conftest"),
                                ("pytest:root", "tests", True, "")]),
    outcome("task-2", P, "s1", [("make", "build", False, "no rule to make target"),
                                ("ninja", "build", True, "")]),
    {"command": "propose_lesson", "key": "claim-1", "project": P, "kind": "do",
     "text": "Use uv to install the pytest deps", "prefer_op": "uv:install", "target": "deps",
     "source": "model", "occurred_at": WHEN},
    outcome("task-3", Q, "s2", [("sphinx:html", "docs", False, "missing theme"),
                                ("mkdocs:build", "docs", True, "")]),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse refusing an argument
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def publish(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: str,
            commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(json.dumps(c) for c in commands)))
    code, out, err = run(capsys, "--home", home, "publish")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def head(capsys: pytest.CaptureFixture[str], home: str) -> int:
    code, out, _ = run(capsys, "--home", home, "stats", "--json")
    assert code == 0
    return int(json.loads(out)["head"])


def lessons(capsys: pytest.CaptureFixture[str], home: str) -> dict[str, dict[str, Any]]:
    """Every lesson by the operation it prefers (or, for an avoid lesson, avoids)."""
    code, out, _ = run(capsys, "--home", home, "lessons", "list", "--all", "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    return {row["prefer_op"] or row["avoid_op"]: row for row in rows}


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "home")
    assert run(capsys, "--home", path, "init")[0] == 0
    publish(capsys, monkeypatch, path, FIRST)
    return path


def ask(capsys: pytest.CaptureFixture[str], home: str, *argv: str) -> Any:
    code, out, err = run(capsys, "--home", home, *argv, "--json")
    assert code == 0, err
    assert out.count("\n") == 1
    return json.loads(out)


def without_recency(value: Any) -> Any:
    """A JSON answer without the recency figures, which depend on when it was asked."""
    if isinstance(value, dict):
        return {k: without_recency(v) for k, v in value.items() if k != "recency"}
    if isinstance(value, list):
        return [without_recency(v) for v in value]
    return value


# -- recall ---------------------------------------------------------------------------------


def test_recall_prints_the_section_and_records_what_it_showed(
        home: str, capsys: pytest.CaptureFixture[str]) -> None:
    by_op = lessons(capsys, home)
    pytest_lesson, build_lesson = by_op["pytest:root"], by_op["ninja"]
    before = head(capsys, home)
    code, out, err = run(capsys, "--home", home, "recall", "--project", P, "--session", "s9",
                         "run the pytest tests from the root")
    assert code == 0
    assert out.splitlines() == [
        "Lessons:", f"- [trial] {pytest_lesson['text']} (confidence 0.50)",
        f"- [trial] {build_lesson['text']} (confidence 0.50)"]
    assert re.fullmatch(r"\(2 of 2 candidates, \d+ tokens\)\n", err)
    assert head(capsys, home) == before + 1
    code, out, _ = run(capsys, "--home", home, "log", "--from", str(before + 1), "--json")
    event = json.loads(out)
    assert (event["type"], event["session"], event["actor"]) == (
        "lesson.recalled", "s9", "agent")

    answer = ask(capsys, home, "recall", "--project", P, "--no-record", "pytest")
    assert [x["lesson_id"] for x in answer["lessons"]] == [
        pytest_lesson["lesson_id"], build_lesson["lesson_id"]]
    assert (answer["project"], answer["query"]) == (P, "pytest")
    assert answer["tokens"] == -(-len(answer["section"].encode()) // 4) <= 300
    assert [x["label"] for x in answer["lessons"]] == ["trial", "trial"]
    assert head(capsys, home) == before + 1, "--no-record records nothing"

    # Never the claim, never another project's lesson, whatever the words.
    other = ask(capsys, home, "recall", "--project", Q, "--no-record",
                "pytest uv install make ninja")
    assert [x["lesson_id"] for x in other["ranked"]] == [by_op["mkdocs:build"]["lesson_id"]]
    mine = ask(capsys, home, "recall", "--project", P, "--no-record", "uv install mkdocs")
    assert by_op["uv:install"]["lesson_id"] not in [x["lesson_id"] for x in mine["ranked"]]
    code, out, _ = run(capsys, "--home", home, "recall", "--project", EMPTY, "anything")
    assert (code, out) == (0, "no lessons on file for this project\n")


# -- check ----------------------------------------------------------------------------------


def test_check_is_one_line_and_records_the_lessons_it_names(
        home: str, capsys: pytest.CaptureFixture[str]) -> None:
    lesson = lessons(capsys, home)["pytest:root"]
    before = head(capsys, home)
    code, out, _ = run(capsys, "--home", home, "check", "--project", P, "--session", "s9",
                       "pytest:tests/", "tests")
    assert code == 0
    assert out == (f"pytest:tests/ on tests: avoid (trial, 0.50: {lesson['text']}) "
                   "failed 1x here before, last: no conftest\n")
    assert head(capsys, home) == before + 1

    answer = ask(capsys, home, "check", "--project", P, "--no-record", "pytest:root", "tests")
    assert answer == {
        "project": P, "operation": "pytest:root", "target": "tests",
        "supporting": [lesson["lesson_id"]], "opposing": [], "failures": 0,
        "last_error": "", "line": f"pytest:root on tests: prefer (trial, 0.50: "
                                  f"{lesson['text']})",
        "shown": [lesson["lesson_id"]], "overruled": [], "doubted": []}
    code, out, _ = run(capsys, "--home", home, "check", "--project", Q, "pytest:tests/",
                       "tests")
    assert (code, out) == (0, "pytest:tests/ on tests: nothing on file\n")
    assert head(capsys, home) == before + 1, "--no-record and nothing shown record nothing"


# -- why ------------------------------------------------------------------------------------


def test_why_lists_the_events_and_explains_the_recall(
        home: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    by_op = lessons(capsys, home)
    lesson_id = by_op["pytest:root"]["lesson_id"]
    publish(capsys, monkeypatch, home, [
        outcome("confirm-1", P, "s3", [("pytest:root", "tests", True, "")],
                in_play=[lesson_id])])
    story = ask(capsys, home, "why", lesson_id[:13])
    assert story["recall"] is None
    steps = [(s["type"], s["actor"], s["session"], s["confidence"]) for s in story["steps"]]
    assert steps == [("lesson.proposed", "policy", "s1", 0.5),
                     ("lesson.confirmed", "policy", "s3", 0.65)]
    code, out, _ = run(capsys, "--home", home, "log", "--json")
    events = {e["position"]: e for e in map(json.loads, out.splitlines())}
    for step in story["steps"]:
        assert events[step["position"]]["type"] == step["type"]
        assert events[step["position"]]["actor"] == step["actor"]
        assert step["outcome"] is not None
        # ISO times as the other commands print them, the exact clock beside them.
        event = events[step["position"]]
        assert (step["recorded_at"], step["recorded_at_ns"]) == (
            event["recorded_at"], event["recorded_at_ns"])
        since = datetime.fromisoformat(step["recorded_at"]) - datetime(1970, 1, 1, tzinfo=UTC)
        assert since // timedelta(microseconds=1) == step["recorded_at_ns"] // 1000
    row = story["lesson"]
    for clock in ("created_at", "last_evidence_at"):
        assert datetime.fromisoformat(row[clock]).tzinfo == UTC, row[clock]
    assert row["created_at"] == events[story["steps"][0]["position"]]["occurred_at"]

    code, out, _ = run(capsys, "--home", home, "why", lesson_id, "--project", P, "--query",
                       "pytest")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{lesson_id}  trial  confidence 0.65  scope {P}")
    assert [line.split()[0] for line in lines[2:4]] == [
        f"@{s['position']}" for s in story["steps"]]
    assert "lesson.confirmed" in lines[3]
    assert "-> 0.65" in lines[3]
    assert re.fullmatch(rf"  recall for {P[:16]} / 'pytest': shown at place 1 with score "
                        r"0\.\d{3}", lines[4])
    code, out, _ = run(capsys, "--home", home, "why", by_op["uv:install"]["lesson_id"],
                       "--project", P)
    assert out.splitlines()[-1] == (
        f"  recall for {P[:16]} / '': not shown: it is a claim: never recalled until an "
        "attributed outcome confirms it")

    reasons = {}
    for op in ("uv:install", "mkdocs:build"):
        verdict = ask(capsys, home, "why", by_op[op]["lesson_id"], "--project", P,
                      "--query", "pytest")["recall"]
        assert verdict["shown"] is False
        reasons[op] = verdict["reason"]
    assert "claim" in reasons["uv:install"]
    assert "belongs to project" in reasons["mkdocs:build"]


# -- as of ----------------------------------------------------------------------------------


def answers(capsys: pytest.CaptureFixture[str], home: str, ids: list[str],
            *as_of: str) -> list[Any]:
    """What recall, check and why say, as JSON (``--no-record`` unless ``--as-of``)."""
    record = [] if as_of else ["--no-record"]
    found: list[Any] = []
    for project in (P, Q):
        for query in ("pytest root", "build with ninja"):
            found.append(ask(capsys, home, "recall", "--project", project, *record, *as_of,
                             query))
        for op, target in (("pytest:tests/", "tests"), ("make", "build")):
            found.append(ask(capsys, home, "check", "--project", project, *record, *as_of,
                             op, target))
    for lesson_id in ids:
        found.append(ask(capsys, home, "why", lesson_id, "--project", P, "--query", "pytest",
                         *as_of))
    return [without_recency(a) for a in found]


def test_as_of_a_position_or_a_time_answers_as_the_ledger_stood_then(
        home: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    by_op = lessons(capsys, home)
    ids = [by_op[op]["lesson_id"] for op in ("pytest:root", "ninja", "uv:install")]
    then, first = head(capsys, home), answers(capsys, home, ids)
    time.sleep(0.01)
    between = datetime.now(UTC)
    time.sleep(0.01)

    # The ledger moves on: a confirmation, a contradicting lesson, a retirement, a
    # confirmed claim, and agents asking (which records).
    publish(capsys, monkeypatch, home, [
        outcome("confirm-1", P, "s3", [("pytest:root", "tests", True, "")],
                in_play=[ids[0]]),
        outcome("task-4", P, "s4", [("pytest:root", "tests", False, "import error"),
                                    ("pytest:tests/", "tests", True, "")]),
        {"command": "retire_lesson", "key": "retire-1", "lesson_id": ids[1],
         "occurred_at": WHEN},
        outcome("confirm-2", P, "s5", [("uv:install", "deps", True, "")], in_play=[ids[2]]),
    ])
    assert run(capsys, "--home", home, "recall", "--project", P, "pytest")[0] == 0
    assert run(capsys, "--home", home, "check", "--project", P, "make", "build")[0] == 0
    now = answers(capsys, home, ids)
    assert now != first

    # As of the position, and as of a time between the two stages: the first answers.
    last = head(capsys, home)
    assert answers(capsys, home, ids, "--as-of", str(then)) == first
    assert answers(capsys, home, ids, "--as-of", between.isoformat()) == first
    naive = between.replace(tzinfo=None).isoformat()  # read as UTC
    assert answers(capsys, home, ids, "--as-of", naive) == first
    # As of the head: today's answers.
    assert answers(capsys, home, ids, "--as-of", str(last)) == now
    assert head(capsys, home) == last, "answering as of a point records nothing"

    # Before anything was written: nothing on file.
    code, out, _ = run(capsys, "--home", home, "recall", "--project", P, "--as-of",
                       "2000-01-01T00:00:00Z", "pytest")
    assert (code, out) == (0, "no lessons on file for this project\n")
    code, out, _ = run(capsys, "--home", home, "check", "--project", P, "--as-of", "0",
                       "pytest:tests/", "tests")
    assert (code, out) == (0, "pytest:tests/ on tests: nothing on file\n")


@pytest.mark.parametrize(("value", "says"), [
    ("yesterday", "expected a log position or an ISO 8601 time, got 'yesterday'"),
    ("-3", "expected a log position or an ISO 8601 time, got '-3'"),
    ("2024-13-01", "expected a log position or an ISO 8601 time"),
    ("99999", "--as-of 99999 is past the last position"),
])
def test_a_bad_as_of_is_one_line_and_exit_code_2(
        home: str, capsys: pytest.CaptureFixture[str], value: str, says: str) -> None:
    lesson_id = lessons(capsys, home)["pytest:root"]["lesson_id"]
    before = head(capsys, home)
    for argv in (["recall", "--project", P, "pytest"],
                 ["check", "--project", P, "pytest:tests/", "tests"],
                 ["why", lesson_id]):
        code, out, err = run(capsys, "--home", home, *argv, "--as-of", value)
        assert (code, out) == (2, ""), argv
        assert err.count("\n") == 1, err
        assert says in err
    assert head(capsys, home) == before


def test_why_as_of_before_the_lesson_existed_is_one_line_and_exit_code_2(
        home: str, capsys: pytest.CaptureFixture[str]) -> None:
    lesson_id = lessons(capsys, home)["mkdocs:build"]["lesson_id"]
    story = ask(capsys, home, "why", lesson_id)
    born = story["steps"][0]["position"]
    assert ask(capsys, home, "why", lesson_id, "--as-of", str(born))["steps"] == story["steps"]
    code, out, err = run(capsys, "--home", home, "why", lesson_id, "--as-of", str(born - 1))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert lesson_id in err
    assert f"did not exist yet at {born - 1}" in err
    assert f"first recorded at position {born}" in err
    code, out, err = run(capsys, "--home", home, "why", lesson_id, "--as-of", "2001-01-01")
    assert (code, out) == (2, "")
    assert "did not exist yet at 2001-01-01T00:00:00+00:00" in err
