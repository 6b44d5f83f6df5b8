"""Review of issue #10 (F6, F8): one JSON object per line, and no path forges a line.

``str.splitlines`` splits on more than ``\\n``: a ``--json`` line holding U+0085 (NEL) was
two lines to a reader splitting that way (``log --json`` gave 17 objects on 78 lines).
And ``init``, ``demo`` and ``compact`` printed the home's path raw, so a ``--home`` (or
``LESSONLEDGER_HOME``) holding an ESC sequence drove the terminal or forged a line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from lessonledger.ops.cli import main
from lessonledger.ops.render import print_json

#: Every character ``str.splitlines`` ends a line at.
LINE_BREAKS = [chr(c) for c in range(sys.maxunicode + 1)
               if len(f"a{chr(c)}b".splitlines()) == 2]


def test_the_line_breaks_are_the_ones_known() -> None:
    assert {f"{ord(c):x}" for c in LINE_BREAKS} == {
        "a", "b", "c", "d", "1c", "1d", "1e", "85", "2028", "2029"}


@pytest.mark.parametrize("char", LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_print_json_writes_one_line_whatever_line_break_the_text_holds(
        char: str, capsys: pytest.CaptureFixture[str]) -> None:
    value = {"text": f"a{char}b{char}", char: 1}
    print_json(value)
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    assert out.endswith("\n")
    assert json.loads(out) == value


NASTY = "home-\n\x1b[31mFORGED\x07\u202e"


def _clean(text: str) -> None:
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\u202e" not in text
    assert not any(line.startswith(("FORGED", "\x1b")) for line in text.splitlines())


def test_init_and_compact_print_the_home_path_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / NASTY)
    assert main(["init", "--home", home]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
    assert "\\x1b[31mFORGED" in out
    assert main(["compact", "--home", home]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
    assert "\\x1b[31mFORGED" in out


def test_demo_prints_the_home_path_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--home", str(tmp_path / NASTY)]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
