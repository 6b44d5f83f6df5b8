"""Smoke test of the delta benchmark: it runs, the budget holds, nothing is cut mid-item,
consolidation supersedes without deleting; speed is reported, not checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lessonledger.ops.bench.deltas import run
from lessonledger.ops.cli import main


def test_run_reports_the_budget_latency_and_fold(tmp_path: Path) -> None:
    lines: list[str] = []
    result = run(sessions=50, latency_sessions=3, workdir=str(tmp_path),
                 progress=lines.append)
    json.dumps(result)
    assert result["deltas"] == 200
    assert result["skills"] == 10
    assert result["budget_held"] == "yes"
    assert result["cut_items"] == 0
    assert result["superseded"] == 30
    assert result["superseded_kept"] == "yes"
    assert result["retrieval_only_per_resolve"] > 0  # the budget bit
    for key in ("fold_eps", "raw_replay_eps", "fold_vs_raw_replay", "resolve_cold_p99_ms",
                "resolve_cached_p99_ms"):
        assert result[key] > 0, key
    assert result["resolve_cold_calls"] == 30
    assert len(lines) == 4
    assert list(tmp_path.iterdir()) == []


def test_cli_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "deltas", "--sessions", "5", "--latency-sessions", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deltas"] == 200
