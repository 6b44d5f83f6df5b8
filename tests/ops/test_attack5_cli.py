"""Bad input to the sync verbs: one line, exit code 2, nothing written (wave 3, attack5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import open_ledger
from lessonledger.ops.cli import main
from lessonledger.sync.snapshots import take_snapshot


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse refuses an option's value so
        code = int(e.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("url", ["notaurl", "tcp://[::1", "tcp://*:7650", "tcp://h:99999",
                                 "tcp://h:0", "ipc://", "http://127.0.0.1:7650"])
def test_a_clone_of_an_address_zeromq_refuses_writes_nothing(
        url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was a traceback (ZMQError) and left a replica of that address behind."""
    code, err = run(capsys, "clone", url, str(tmp_path / "r"), "--timeout", "1")
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "no hub address" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv", [
    ("clone", "tcp://127.0.0.1:9", "{dir}/r", "--timeout", "nan"),
    ("clone", "tcp://127.0.0.1:9", "{dir}/r", "--timeout", "inf"),
    ("clone", "tcp://127.0.0.1:9", "{dir}/r", "--timeout", "-1"),  # was: wait for ever
    ("clone", "tcp://127.0.0.1:9", "{dir}/r", "--timeout", "0"),
    ("status", "--to", "tcp://127.0.0.1:9", "--wait", "nan"),  # was: wait for ever
    ("status", "--to", "tcp://127.0.0.1:9", "--wait", "-5"),
    ("metrics", "--port", "0", "--verify-every", "nan"),
    ("metrics", "--port", "0", "--verify-every", "-1"),
])
def test_seconds_that_are_no_wait_are_refused(
        argv: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, "--home", str(tmp_path / "h"),
                    *(a.format(dir=tmp_path) for a in argv))
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "expected seconds" in err
    assert not (tmp_path / "r").exists()
    assert not (tmp_path / "h").exists()


def test_a_checkout_into_a_file_or_into_its_own_home_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    with open_ledger(home, sync=False) as ledger:
        ledger.observe_outcome(key="k", session="s", principal="p",
                               project="3f9a0c1b2d4e5f60", passed=True)
        take_snapshot(ledger, "main", "test")
    (tmp_path / "file").write_text("mine\n")
    before = sorted(p.name for p in home.iterdir())
    for into, says in ((tmp_path / "file", "not a directory"),
                       (home / "inside", "inside")):
        code, err = run(capsys, "--home", str(home), "checkout", "main", "--into", str(into))
        assert code == 2, err
        assert err.count("\n") == 1, err
        assert says in err
    assert (tmp_path / "file").read_text() == "mine\n"
    assert sorted(p.name for p in home.iterdir()) == before
