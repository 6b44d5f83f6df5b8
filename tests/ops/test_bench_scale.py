"""``lessonledger bench scale`` on a small home: every figure there, the targets beside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lessonledger.ops.cli import main

FIGURES = ("build_peak_rss_mb", "agent_rss_anon_mb", "open_s", "open_and_first_recall_s",
           "agent_peak_rss_mb",
           "steady_written_bytes_per_event", "steady_stored_bytes_per_event",
           "written_vs_stored", "data_mdb_vs_live")


def test_a_quick_run_reports_every_figure_against_its_target(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "scale", "--events", "2000", "--steady", "40", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    result = json.loads(out)
    assert result["events"] >= 2000
    assert result["steady_calls"] == 40
    assert result["steady_events"] > 0
    for key in FIGURES:
        assert isinstance(result[key], float), key
        assert result[key] > 0, key
    assert result["live_bytes"] <= result["data_mdb_bytes"]
    assert (result["target_open_and_first_recall_s"], result["target_peak_rss_mb"],
            result["target_written_vs_stored"]) == (2.0, 400, 3.0)
    assert "building a home of 2,000 events" in err


def test_too_few_events_is_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "scale", "--events", "10"])
    assert exited.value.code == 2
    assert "--events" in capsys.readouterr().err


def test_a_home_kept_with_home_is_measured_again_without_building(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept = str(tmp_path / "kept")
    args = ["bench", "scale", "--events", "1000", "--steady", "10", "--json", "--keep-home", kept]
    assert main(args) == 0
    first, err = capsys.readouterr()
    assert "building a home of 1,000 events" in err
    size = (tmp_path / "kept" / "data.mdb").stat().st_size
    assert main(args) == 0
    again, err = capsys.readouterr()
    assert "building" not in err
    assert "measuring on a copy of the home kept at" in err
    assert json.loads(again)["events"] == json.loads(first)["events"]
    assert (tmp_path / "kept" / "data.mdb").stat().st_size == size  # measured on a copy


def test_a_home_dir_the_bench_did_not_build_is_refused_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "scale", "--events", "1000", "--keep-home", str(tmp_path)])
    assert code == 2
    assert "build.json" in capsys.readouterr().err
