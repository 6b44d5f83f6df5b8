"""Charts: ``lessons show --chart`` and ``bench trapworld --chart``, read back as files.

A PNG must start with its signature and an IHDR chunk of a real size and end with IEND;
an SVG must parse as XML with an ``svg`` root. Without matplotlib (made unimportable in a
subprocess) each command refuses in one line, exit code 2, before doing any work.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from lessonledger.ops.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    assert data[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82", "the last chunk is IEND"
    return width, height


def svg_root(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_built: Path) -> tuple[Path, str]:
    """The demo's home (a copy of the session's), and a lesson both confirmed and
    contradicted there."""
    home = tmp_path_factory.mktemp("charts") / "home"
    shutil.copytree(demo_built, home)

    def said(*argv: str) -> str:
        # In-process: these only find the lesson (a process each took half a second).
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(["--home", str(home), *argv]) == 0
        return out.getvalue()

    for line in said("lessons", "list", "--all", "--json").splitlines():
        lesson_id = json.loads(line)["lesson_id"]
        story = said("why", lesson_id, "--json")
        kinds = {step["type"] for step in json.loads(story)["steps"]}
        if {"lesson.confirmed", "lesson.contradicted"} <= kinds:
            return home, lesson_id
    msg = "the demo has a lesson confirmed and then contradicted"
    raise AssertionError(msg)


def test_a_lessons_confidence_is_drawn_as_png_and_svg(
        demo: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home, lesson = demo
    png, svg = tmp_path / "c.png", tmp_path / "c.svg"
    code, out, err = run(capsys, "--home", home, "lessons", "show", lesson, "--chart", png)
    assert code == 0, err
    assert f"chart of its confidence over time: {png}" in out
    width, height = png_size(png)
    assert width >= 400
    assert height >= 200
    code, out, err = run(capsys, "--home", home, "lessons", "show", lesson, "--chart", svg,
                         "--json")
    assert code == 0, err
    assert json.loads(out)["lesson_id"] == lesson, "--json prints the lesson as ever"
    svg_root(svg)
    text = svg.read_text()
    # matplotlib writes each text it draws as a comment beside its glyphs: the legend
    # counts the marked outcomes.
    assert "confirmed (" in text
    assert "contradicted (" in text


def test_the_chart_must_be_png_or_svg(demo: tuple[Path, str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    home, lesson = demo
    code, _, err = run(capsys, "--home", home, "lessons", "show", lesson, "--chart",
                       tmp_path / "c.pdf")
    assert code == 2
    assert "ending in .png or .svg" in err
    assert not (tmp_path / "c.pdf").exists()


def test_the_trap_worlds_arms_are_drawn_side_by_side(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "arms.png"
    code, out, err = run(capsys, "bench", "trapworld", "--projects", "2", "--sessions", "4",
                         "--repeats", "1", "--json", "--chart", png)
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["arms"], "the figures are printed as ever"
    width, height = png_size(png)
    assert width > height > 200


_WITHOUT_MATPLOTLIB = """
import sys
sys.modules["matplotlib"] = None  # `import matplotlib` now raises ImportError
from lessonledger.ops.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv", [
    ["lessons", "show", "LESSON", "--chart", "OUT"],
    ["bench", "trapworld", "--repeats", "1", "--chart", "OUT"],
])
def test_without_matplotlib_it_says_how_to_get_it_in_one_line(
        demo: tuple[Path, str], tmp_path: Path, argv: list[str]) -> None:
    home, lesson = demo
    out = tmp_path / "chart.png"
    argv = [str(out) if a == "OUT" else lesson if a == "LESSON" else a for a in argv]
    result = subprocess.run([sys.executable, "-c", _WITHOUT_MATPLOTLIB, "--home", str(home),
                             *argv], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "", "refused before any work"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "charts need matplotlib" in lines[0]
    assert "pip install 'lessonledger[charts]'" in lines[0]
    assert not out.exists()
