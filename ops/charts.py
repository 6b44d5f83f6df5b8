"""Charts: a lesson's confidence over time, and the trap world's arms side by side.

Drawn with matplotlib, an optional extra (``pip install 'lessonledger[charts]'``), on
its Agg canvas with no window and no pyplot state. The format follows the file's suffix:
``.png`` or ``.svg``. Without matplotlib, :func:`require` refuses in one line before any
work is done (exit code 2). Stored text (a lesson's) is drawn as plain text, never
parsed as mathtext, so a ``$`` in it is a dollar sign.
"""

from __future__ import annotations

import argparse
import importlib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.events import LESSON_CONFIRMED, LESSON_CONTRADICTED

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["FORMATS", "ChartsUnavailableError", "arms_chart", "chart_file",
           "confidence_chart", "require"]

#: The file suffixes a chart is written as, and matplotlib's name for each.
FORMATS = {".png": "png", ".svg": "svg"}
#: How each kind of move is marked: confirmations up, contradictions down.
_MARKS = {LESSON_CONFIRMED: ("^", "tab:green", "confirmed"),
          LESSON_CONTRADICTED: ("v", "tab:red", "contradicted")}


class ChartsUnavailableError(LedgerConfigError):
    """matplotlib is not installed, so no chart can be drawn; nothing was done."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"charts need matplotlib, which is not installed ({cause}); "
                         "run `pip install 'lessonledger[charts]'`")


def chart_file(text: str) -> Path:
    """An argparse type: a path ending in ``.png`` or ``.svg``."""
    path = Path(text)
    if path.suffix.lower() not in FORMATS:
        msg = f"expected a chart file ending in .png or .svg, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return path


def require() -> type[Figure]:
    """Matplotlib's Figure class, or a one-line refusal when the extra is missing."""
    try:
        figure = importlib.import_module("matplotlib.figure")
    except ImportError as e:
        raise ChartsUnavailableError(str(e)) from None
    return figure.Figure  # type: ignore[no-any-return]


def _save(figure: Figure, path: Path) -> None:
    # A glyph the font lacks (a stored control, CJK, emoji) is drawn as a box; without
    # this, matplotlib warns on stderr quoting the character raw, once per glyph.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        figure.savefig(path, format=FORMATS[path.suffix.lower()], metadata=_metadata(path))


def _metadata(path: Path) -> dict[str, Any]:
    # No creation date: the same chart of the same log is the same file.
    return {"Date": None} if path.suffix.lower() == ".svg" else {}


def confidence_chart(title: str, steps: Sequence[tuple[int, str, float]], path: Path) -> None:
    """Draw a lesson's confidence over time into ``path``.

    Args:
        title: the lesson's id and text, for the heading.
        steps: each move as ``(occurred_at ns, event type, confidence after it)``: the
            publisher's clock, on which the lesson's own clocks run.
        path: where, ``.png`` or ``.svg``.
    """
    figure = require()(figsize=(8, 4), layout="constrained")
    axes = figure.subplots()
    times = numpy.array([ns // 1000 for ns, _, _ in steps], dtype="datetime64[us]")
    axes.step(times, [c for _, _, c in steps], where="post", color="tab:blue",
              label="confidence")
    for kind, (marker, colour, label) in _MARKS.items():
        marked = [i for i, (_, k, _) in enumerate(steps) if k == kind]
        if marked:
            axes.scatter(times[marked], [steps[i][2] for i in marked], marker=marker,
                         s=60, color=colour, label=f"{label} ({len(marked)})", zorder=3)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("confidence")
    axes.set_xlabel("occurred at (UTC)")
    axes.set_title(title if len(title) <= 80 else title[:79] + "…", fontsize=10,
                   parse_math=False)
    axes.legend(loc="lower right")
    figure.autofmt_xdate()
    _save(figure, path)


def arms_chart(results: Sequence[dict[str, Any]], path: Path,
               metrics: Sequence[str] | None = None) -> None:
    """Draw the trap world's arms side by side, one panel per metric, into ``path``.

    ``results`` are ``bench trapworld``'s, one per world family; each panel groups the
    arms' means by world, with their standard deviation over the repeats as error bars.
    A metric an arm has no figure for (``off`` has no memory) is left out for it.
    """
    if metrics is None:
        from lessonledger.ops.bench.trapworld_bench import METRICS

        metrics = METRICS
    arms = list(results[0]["arms"])
    worlds = [r["world"] for r in results]
    figure = require()(figsize=(4 * min(len(metrics), 4), 3.2 * -(-len(metrics) // 4)),
                       layout="constrained")
    panels = figure.subplots(-(-len(metrics) // 4), min(len(metrics), 4), squeeze=False)
    width = 0.8 / len(arms)
    for axes, metric in zip(panels.flat, metrics, strict=False):
        for i, arm in enumerate(arms):
            xs, ys, errs = [], [], []
            for w, result in enumerate(results):
                figures = result["arms"][arm]
                if figures.get(metric) is not None:
                    xs.append(w + (i - (len(arms) - 1) / 2) * width)
                    ys.append(figures[metric])
                    errs.append(figures["spread"].get(metric, {}).get("sd", 0.0))
            bars = axes.bar(xs, ys, width, yerr=errs, label=arm, capsize=2)
            # The figure on each bar: a zero (no repeat at all) is a result, not a gap.
            axes.bar_label(bars, fmt="%.2f", fontsize=7)
        axes.set_ylim(bottom=0, top=max(axes.get_ylim()[1], 0.05) * 1.1)
        axes.set_title(metric.replace("_", " "), fontsize=9)
        axes.set_xticks(range(len(worlds)), worlds, fontsize=8, rotation=30 if len(worlds) > 2
                        else 0)
    for axes in list(panels.flat)[len(metrics):]:
        axes.set_visible(False)
    panels.flat[0].legend(fontsize=8)
    figure.suptitle("trap world: memory vs none vs last error")
    _save(figure, path)
