"""Smoke test of the recall benchmark: it runs and reports; speed and recall are not checked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lessonledger.ops.bench.recall import Corpus, lesson_texts, run

FIGURES = ("p50_ms", "p99_ms", "p50_cpu_ms", "p99_cpu_ms", "recall_at_10", "index_qps",
           "exact_qps", "speedup_vs_exact", "speedup_p50", "index_p50_ms", "exact_p50_ms",
           "build_s", "build_vectors_per_s", "save_s", "open_ms")


def test_lesson_texts_are_seeded_spread_and_varied() -> None:
    texts, owners = lesson_texts(300, 7, seed=1)
    assert (texts, owners) == lesson_texts(300, 7, seed=1)
    assert texts != lesson_texts(300, 7, seed=2)[0]
    assert set(owners) == set(range(7))
    assert len(set(texts)) > 250
    assert not any("{" in t or "}" in t for t in texts)


def test_run_reports_every_figure_per_size_and_cleans_up(tmp_path: Path) -> None:
    lines: list[str] = []
    result = run(sizes=(300, 600), projects=20, queries=12, workdir=str(tmp_path),
                 progress=lines.append)

    json.dumps(result)
    assert set(result["sizes"]) == {"300", "600"}
    for size, figures in result["sizes"].items():
        assert figures["lessons"] == int(size)
        assert figures["queries"] == 12
        assert figures["plan_time"] == "stand-in"
        for key in FIGURES:
            assert isinstance(figures[key], float), key
            assert figures[key] >= 0, key
        assert 0 <= figures["recall_at_10"] <= 1
        assert figures["index_bytes"] > 0
    for name in ("embedder", "dim", "dtype", "connectivity", "expansion_add",
                 "expansion_search"):
        assert result["config"][name]["why"], name
    assert lines
    assert list(tmp_path.iterdir()) == []


def test_run_times_a_given_plan_recall(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def factory(corpus: Corpus) -> Callable[[str, str], object]:
        assert len(corpus.lesson_ids) == len(corpus.texts) == len(corpus.projects) == 250
        assert len(corpus.global_ids) == 200

        def recall(project: str, query: str) -> object:
            seen.append((project, query))
            return corpus.index.search(corpus.embedder.embed([query])[0], 5)

        return recall

    result = run(sizes=(250,), projects=5, queries=4, workdir=str(tmp_path),
                 plan_recall=factory)
    assert result["sizes"]["250"]["plan_time"] == "recall"
    assert len(seen) == 8  # a cold pass and a warm pass over the same 4 asks
    assert seen[:4] == seen[4:]
