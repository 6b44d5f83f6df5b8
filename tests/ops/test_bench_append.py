"""Smoke test of the append/replay benchmark: it runs and reports; speed is not checked."""

from __future__ import annotations

import json
from pathlib import Path

from lessonledger.ops.bench.append import run

RATES = (
    "ours_single", "ours_batched", "raw_single", "raw_batched", "sqlite_single",
    "sqlite_batched", "app_ours", "app_popo", "replay_ours", "replay_raw",
    "layout_single", "layout_batched", "app_sqlite",
)
RATIOS = (
    "ours_vs_raw_batched", "ours_vs_raw_single", "ours_vs_sqlite_batched",
    "ours_vs_sqlite_single", "raw_vs_sqlite_batched", "raw_vs_sqlite_single",
    "app_ours_vs_popo", "replay_ours_vs_raw", "ours_vs_layout_batched",
    "ours_vs_layout_single", "layout_vs_raw_batched", "layout_vs_raw_single",
    "layout_vs_sqlite_batched", "layout_vs_sqlite_single", "app_ours_vs_sqlite",
)


def test_run_reports_every_rate_and_ratio_and_cleans_up(tmp_path: Path) -> None:
    lines: list[str] = []
    result = run(events=300, replay_events=2000, workdir=str(tmp_path), progress=lines.append)

    json.dumps(result)  # flat and JSON-able
    for key in [f"{name}_eps" for name in RATES] + list(RATIOS):
        value = result[key]
        assert isinstance(value, float)
        assert value > 0, key
    assert result["events"] == 300
    assert result["replay_events"] == 2000
    assert isinstance(result["mean_payload_bytes"], float)
    assert result["mean_payload_bytes"] > 0
    assert str(result["sqlite_synchronous"])  # reported as found, whatever the build
    assert len(lines) > len(RATES)  # a line per repetition
    assert list(tmp_path.iterdir()) == []
