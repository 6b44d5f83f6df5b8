"""Smoke test of the lifecycle benchmark: it runs and reports; speed is not checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lessonledger.ops.bench.lifecycle import run
from lessonledger.ops.cli import main

RATES = (
    "commands_per_s", "query_per_s", "outcome_per_s", "proposal_per_s", "reconcile_per_s",
    "rebuild_eps", "replay_eps", "raw_replay_eps",
)
RATIOS = ("rebuild_vs_raw_replay", "rebuild_vs_replay", "replay_vs_raw_replay")
COUNTS = (
    "commands", "projects", "query_calls", "outcome_calls", "proposal_calls",
    "reconcile_calls", "command_events", "log_events", "log_lessons", "log_active_lessons",
    "log_outcome_observed", "log_lesson_proposed", "log_lesson_confirmed",
    "log_lesson_recalled", "log_reconcile_passed",
)


def test_run_reports_every_rate_and_ratio_and_cleans_up(tmp_path: Path) -> None:
    lines: list[str] = []
    # 400 calls span more than a simulated day, so they include a reconcile.
    result = run(commands=400, log_events=3_000, workdir=str(tmp_path), progress=lines.append)

    json.dumps(result)  # flat and JSON-able
    for key in RATES + RATIOS:
        value = result[key]
        assert isinstance(value, float), key
        assert value > 0, key
    for key in COUNTS:
        value = result[key]
        assert isinstance(value, int), key
        assert value > 0, key
    assert result["commands"] == 400
    assert sum(int(result[f"{kind}_calls"]) for kind in
               ("query", "outcome", "proposal", "reconcile")) == 400
    assert int(result["command_events"]) < 3_000 <= int(result["log_events"])
    assert result["target_rebuild_vs_raw_replay"] == 0.25  # issue 11
    assert result["story_matches_view"] in ("yes", "no")  # reported, not asserted
    assert len(lines) >= 3 + 1 + 3 * 3  # commands, the log, and each fold per repetition
    assert list(tmp_path.iterdir()) == []


def test_cli_runs_it_and_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "lifecycle", "--commands", "100", "--log-events", "1000", "--json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert code == 0
    assert result["commands"] == 100
    assert float(result["rebuild_eps"]) > 0
    assert "rebuild (3/3)" in captured.err


@pytest.mark.parametrize("argv", [["--commands", "5"], ["--log-events", "many"]])
def test_cli_refuses_bad_sizes_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--home", str(tmp_path), "bench", "lifecycle", *argv])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert len(err.strip().splitlines()) == 1
    assert "--help" in err
