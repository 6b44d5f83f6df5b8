"""Progress bars: drawn for a person at a terminal, absent from every other output.

Each long command runs as a real process twice: with stdout and stderr piped (a script,
a CI log), where not one progress byte may appear (no carriage return, no escape, no bar
glyph), and on a pseudo-terminal, where the bar must be drawn (else the first check
would pass for a command that draws nothing at all). ``--json`` on a terminal is silent.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

#: What a rich bar puts on the screen: a carriage return or an escape, and its glyphs.
PROGRESS_BYTES = (b"\r", b"\x1b", "━".encode())


def cli(*argv: object) -> list[str]:
    return [sys.executable, "-m", "lessonledger.ops", *map(str, argv)]


def _env() -> dict[str, str]:
    return {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LESSONLEDGER_SYNC": "os"}


def piped(*argv: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cli(*argv), capture_output=True, env=_env(), timeout=300)


def on_a_terminal(*argv: object) -> tuple[int, bytes]:
    """Run with stdout and stderr on one pseudo-terminal; its exit code and the screen."""
    main, child = pty.openpty()
    process = subprocess.Popen(cli(*argv), stdin=subprocess.DEVNULL, stdout=child,
                               stderr=child, env=_env())
    os.close(child)
    screen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child side closed
            break
        if not chunk:
            break
        screen += chunk
    os.close(main)
    return process.wait(timeout=300), screen


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("progress") / "home"
    assert piped("--home", home, "demo").returncode == 0
    return home


def _commands(home: Path, tmp: Path) -> list[list[object]]:
    return [
        ["--home", home, "verify"],
        ["--home", home, "rebuild"],
        ["--home", home, "export", "--include-envelopes", "-o", tmp / "all.jsonl"],
        ["import", tmp / "all.jsonl", "--into", tmp / "imported"],
        ["--home", tmp / "imported", "compact"],
        ["bench", "trapworld", "--projects", "1", "--sessions", "3", "--repeats", "1"],
    ]


def test_output_that_is_not_a_terminal_has_no_progress_bytes(home: Path,
                                                             tmp_path: Path) -> None:
    for argv in _commands(home, tmp_path):
        result = piped(*argv)
        assert result.returncode == 0, (argv, result.stderr)
        for stream in (result.stdout, result.stderr):
            for mark in PROGRESS_BYTES:
                assert mark not in stream, (argv, mark, stream[-300:])


def test_a_person_at_a_terminal_sees_the_bar(home: Path, tmp_path: Path) -> None:
    labels = ["verify ledger", "rebuild all", "export", "import: write", "compact",
              "bench trapworld"]
    for argv, label in zip(_commands(home, tmp_path), labels, strict=True):
        code, screen = on_a_terminal(*argv)
        assert code == 0, (argv, screen[-500:])
        assert label.encode() in screen, (argv, screen[-500:])
        assert "━".encode() in screen, (argv, screen[-500:])


def test_json_on_a_terminal_draws_no_bar(home: Path) -> None:
    for argv in (["verify", "--json"], ["rebuild", "--json"]):
        code, screen = on_a_terminal("--home", home, *argv)
        assert code == 0, screen
        assert "━".encode() not in screen, (argv, screen)
        assert b"\x1b" not in screen, (argv, screen)
