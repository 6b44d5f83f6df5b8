"""``serve --principal`` names whom every event of a keyless hub is written as (attack8).

The principal is a string the operator chooses, and it goes into every envelope the hub
writes, which outlive any erasure of their bodies: a credential there (an operator who
pasted a key for a name) was written on every event. It is held to what a command's
principal is held to: refused in one line with exit code 2 before the hub starts, and
the home it would have created is not made.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.commands.errors import CredentialError, InvalidCommandError
from lessonledger.sync.authority import LoopbackAuthority


def test_serve_refuses_a_credential_for_a_principal_before_the_home_is_made(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    # A process of its own: a hub that did start would serve until killed.
    done = subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           "serve", "--bind", "tcp://127.0.0.1:0", "--principal",
                           "AKIAZ3MQ7XWPL4K2HJQE"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--principal looks like a credential" in done.stderr
    assert not home.exists()


@pytest.mark.parametrize(("principal", "refused"), [
    ("password=hunter2xyz", CredentialError),
    ("x" * 201, InvalidCommandError),
    ("a\ud800b", InvalidCommandError),
])
def test_the_authority_refuses_what_a_command_could_not_carry(
        principal: str, refused: type[Exception]) -> None:
    with pytest.raises(refused, match="--principal"):
        LoopbackAuthority(principal)


def test_a_plain_principal_is_served() -> None:
    assert LoopbackAuthority("operator").access(None) is not None
