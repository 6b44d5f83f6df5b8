"""``lessonledger completion bash|zsh``: scripts that real shells load and complete with.

bash runs the script's completion function as it would on Tab (``COMP_WORDS`` set, the
function called) and the candidates are read back. zsh completes only inside its line
editor, so there the script must parse (``zsh -n``), register itself with ``compdef``
when evaluated, and name every verb.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.ops.cli import parser

CLI = str(Path(sys.executable).with_name("lessonledger"))

BASH = r"""
source "$SCRIPT"
comp() {
  COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
  COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
  _shtab_lessonledger
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '; echo
}
"""


def _verbs() -> list[str]:
    [sub] = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


def _bash(cwd: Path, *words: str) -> list[str]:
    script = BASH + "comp " + " ".join(f"'{w}'" for w in words)
    done = subprocess.run(["bash", "-c", script],
                          env={"SCRIPT": str(cwd / "script.bash"), "PATH": "/usr/bin:/bin"},
                          cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_verbs_options_choices_and_home_directories(tmp_path: Path) -> None:
    with (tmp_path / "script.bash").open("w") as script:
        subprocess.run([CLI, "completion", "bash"], stdout=script, check=True)
    (tmp_path / "homes").mkdir()
    (tmp_path / "notes.txt").write_text("")
    assert _bash(tmp_path, "lessonledger", "re") == ["rebuild", "recall", "reconcile"]
    assert _bash(tmp_path, "lessonledger", "") == _verbs()
    assert {"completion", "mcp", "metrics"} <= set(_verbs())
    assert _bash(tmp_path, "lessonledger", "mcp", "--") == [
        "--help", "--home", "--key", "--metrics", "--project", "--server-key", "--to",
        "--wait"]
    assert _bash(tmp_path, "lessonledger", "metrics", "--v") == ["--verify-every"]
    assert _bash(tmp_path, "lessonledger", "completion", "") == ["bash", "zsh"]
    assert _bash(tmp_path, "lessonledger", "recall", "--home", "") == ["homes"], "no files"


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_parses_registers_and_names_every_verb(tmp_path: Path) -> None:
    script = subprocess.run([CLI, "completion", "zsh"], capture_output=True, text=True,
                            check=True).stdout
    assert script.startswith("#compdef lessonledger")
    (tmp_path / "_lessonledger").write_text(script)
    assert subprocess.run(["zsh", "-n", str(tmp_path / "_lessonledger")],
                          check=False).returncode == 0
    registered = subprocess.run(
        ["zsh", "-f", "-c", 'autoload -Uz compinit && compinit -u -D; '
         'eval "$($CLI completion zsh)"; print -r -- $_comps[lessonledger]'],
        env={"CLI": CLI, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, check=True)
    assert registered.stdout.strip() == "_shtab_lessonledger"
    for verb in _verbs():
        assert f"    {verb}:" in script, verb
