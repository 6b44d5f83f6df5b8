"""Bad input to erase, lessons, serve and every ``--to`` verb (attack11b).

Each was reproduced on main before its fix: an empty lesson prefix erased a home's only
lesson; ``serve`` took port 0 and malformed ``--bind`` values (a traceback, or a hub
announcing heads on port 1, and a home made either way); a malformed ``--to`` was a
``ZMQError`` traceback (exit 1) and an empty one quietly read the local home;
``127.0.0.1.evil.com`` passed as loopback; whitespace principals were written; a
metrics port in use was exit 1 with the home already made.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import InvalidCommandError, LessonNotFoundError
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ops.cli import main
from lessonledger.sync.client import RemoteLedger
from lessonledger.sync.endpoints import is_loopback
from lessonledger.sync.hub import HubConfig

PROJECT = "3f9a0c1b2d4e5f60"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse refuses an option's value so
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_lesson(home: Path) -> str:
    with open_ledger(home, sync=False) as ledger:
        receipt = ledger.propose_lesson(
            key="x1", project=PROJECT, principal="alice", text="Run pytest from the root",
            kind="prefer", avoid_op="pytest:tests/", prefer_op="pytest:root",
            target="tests")
        return str(receipt.ids["lesson_id"])


def _head(home: Path) -> int:
    with open_ledger(home, sync=False) as ledger:
        return ledger.log.head()


@pytest.mark.parametrize("prefix", ["", " ", "\t"])
@pytest.mark.parametrize("verb", [
    ("erase", "--reason", "gdpr", "--no-compact", "--lesson", "{id}"),
    ("lessons", "retire", "{id}", "--reason", "wrong"),
    ("lessons", "show", "{id}"),
    ("lessons", "history", "{id}"),
    ("why", "{id}"),
], ids=lambda v: "-".join(v[:2]))
def test_a_blank_lesson_prefix_matches_nothing_and_writes_nothing(
        verb: tuple[str, ...], prefix: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    _one_lesson(home)
    head = _head(home)
    code, _, err = run(capsys, "--home", home, *[a.format(id=prefix) for a in verb])
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert _head(home) == head


def test_the_api_refuses_a_blank_prefix_too(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _one_lesson(home)
    with open_ledger(home, sync=False) as ledger, pytest.raises(
            LessonNotFoundError, match="no lesson id"):
        ledger.find_lesson("")


@pytest.mark.parametrize("fields", [
    {"what": "principal", "subject": "  "},
    {"what": "session", "subject": "\t"},
    {"what": "principal", "subject": "alice", "reason": "   "},
    {"what": "principal", "subject": "alice", "actor": " "},
])
def test_ledger_erase_refuses_blank_fields_and_writes_nothing(
        fields: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "h"
    _one_lesson(home)
    with open_ledger(home, sync=False) as ledger:
        head = ledger.log.head()
        with pytest.raises(InvalidCommandError) as refused:
            ledger.erase(key="e1", **fields)
        assert ledger.log.head() == head
    blank = next(k for k, v in fields.items() if not v.strip())
    assert refused.value.field == f"$.{blank}"


@pytest.mark.parametrize("argv", [
    ("erase", "--principal", " ", "--reason", "gdpr"),
    ("erase", "--principal", "alice", "--reason", ""),
    ("erase", "--principal", "alice", "--reason", "  "),
    ("erase", "--principal", "alice", "--reason", "gdpr", "--by", " "),
    ("erase", "--session", "", "--reason", "gdpr"),
])
def test_erase_refuses_blank_options(argv: tuple[str, ...], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    _one_lesson(home)
    code, _, err = run(capsys, "--home", home, *argv)
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert _head(home) == 1


@pytest.mark.parametrize("field", ["principal", "session", "actor"])
def test_publish_refuses_a_blank_name(field: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    assert run(capsys, "--home", home, "init")[0] == 0
    commands = tmp_path / "c.jsonl"
    commands.write_text(
        '{"command": "observe_outcome", "key": "o1", "session": "s1", "principal": "bob", '
        f'"project": "{PROJECT}", "passed": true, "{field}": "   "}}\n')
    code, _, err = run(capsys, "--home", home, "publish", commands)
    assert code == 2, err
    assert f"{field} '   ' is only spaces" in err
    assert _head(home) == 0


def test_access_grant_refuses_a_blank_principal(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    assert run(capsys, "--home", home, "init")[0] == 0
    keys = tmp_path / "keys"
    assert run(capsys, "--home", home, "keys", "new", "ada", "--dir", keys)[0] == 0
    code, _, err = run(capsys, "--home", home, "access", "grant", "ada", "--principal", "  ",
                       "--key", keys / "ada.key")
    assert code == 2, err
    assert err.count("\n") == 1, err


def _serve(home: Path, *options: str) -> subprocess.CompletedProcess[str]:
    # A process of its own: a hub that did start would serve until the timeout.
    return subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           "serve", *options], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize("options", [
    ("--bind", "tcp://127.0.0.1:0"),
    ("--bind", "tcp://127.0.0.1"),
    ("--bind", "tcp://127.0.0.1:abc"),
    ("--bind", "tcp://127.0.0.1:70000"),
    ("--bind", "127.0.0.1:7650"),
    ("--bind", "tcp://[::1:7650"),
    ("--bind", "tcp://:7650"),
    ("--bind", "tcp://127.0.0.1:65535"),  # heads would go on port 65536
    ("--bind", "tcp://127.0.0.1.evil.com:7650"),
    ("--bind", "tcp://localhost.example:7650"),
    ("--pub", "garbage"),
    ("--queue", "0"),
    ("--queue", "-1"),
    ("--max-batch", "0"),
    ("--max-batch", "x"),
    ("--query-workers", "0"),
    ("--principal", " "),
])
def test_serve_refuses_bad_options_before_the_home_is_made(
        options: tuple[str, ...], tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _serve(home, *options)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not home.exists()


def test_serve_refuses_a_metrics_port_in_use_before_the_hub_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            hub_port = free.getsockname()[1]
        done = _serve(home, "--bind", f"tcp://127.0.0.1:{hub_port}",
                      "--metrics", f"127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert "hub serving" not in done.stderr
    assert not home.exists()


@pytest.mark.parametrize(("endpoint", "loopback"), [
    ("tcp://127.0.0.1:7650", True),
    ("tcp://127.0.0.2:7650", True),
    ("tcp://127.255.255.254:7650", True),
    ("tcp://[::1]:7650", True),
    ("tcp://localhost:7650", True),
    ("ipc:///tmp/hub", True),
    ("tcp://127.0.0.1.evil.com:7650", False),
    ("tcp://localhost.example:7650", False),
    ("tcp://127.evil:7650", False),
    ("tcp://10.0.0.1:7650", False),
    ("tcp://[::ffff:8.8.8.8]:7650", False),
    ("tcp://*:7650", False),
    ("tcp://0.0.0.0:7650", False),
    ("tcp://127.0.0.1:x", False),  # malformed: never taken as safe
])
def test_loopback_is_decided_on_the_parsed_address(endpoint: str, loopback: bool) -> None:
    assert is_loopback(endpoint) is loopback


def test_hub_config_refuses_what_the_cli_refuses(tmp_path: Path) -> None:
    for bad in ({"bind": "tcp://127.0.0.1:0"}, {"pub": "tcp://x"}, {"queue_bound": 0},
                {"max_batch": 0}, {"query_workers": -1}):
        with pytest.raises(LedgerConfigError):
            HubConfig(home=str(tmp_path), **bad)


TO_VERBS = [
    ("publish", "{file}"),
    ("recall", "--project", PROJECT),
    ("check", "--project", PROJECT, "pytest:root", "tests"),
    ("lessons", "list"),
    ("why", "0"),
    ("log",),
    ("status",),
]
BAD_TO = ["", "tcp://", "tcp://127.0.0.1", "tcp://127.0.0.1:abc", "tcp://127.0.0.1:0",
          "tcp://:7650", "tcp://[::1", "http://127.0.0.1:7650", "ipc://"]


@pytest.mark.parametrize("to", BAD_TO)
@pytest.mark.parametrize("verb", TO_VERBS, ids=lambda v: v[0])
def test_a_malformed_to_is_one_line_and_exit_2(verb: tuple[str, ...], to: str,
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    _one_lesson(home)
    commands = tmp_path / "c.jsonl"
    commands.write_text('{"command": "reconcile", "key": "r1"}\n')
    argv = [a.format(file=commands) for a in verb]
    code, out, err = run(capsys, "--home", home, *argv, "--to", to, "--wait", "2")
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "no hub address" in err
    assert out == ""
    assert _head(home) == 1  # not run on the local home instead


@pytest.mark.parametrize("to", ["tcp://127.0.0.1:abc", "tcp://h:0", ""])
def test_clone_and_the_client_refuse_a_malformed_address(
        to: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "clone", to, tmp_path / "r", "--timeout", "1")
    assert code == 2, err
    assert not (tmp_path / "r").exists()
    with pytest.raises(LedgerConfigError, match="no hub address"):
        RemoteLedger(to)


@pytest.mark.parametrize("argv", [
    ("skill", "register", "{dir}/no-such-skill.md"),
    ("import", "{dir}/no-such-export.jsonl", "--into", "{dir}/new"),
    ("export", "--principal", ""),
    ("export", "--principal", "  "),
    ("export", "--project", ""),
])
def test_bad_input_exits_2_not_1_or_0(argv: tuple[str, ...], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A missing input file was exit code 1 (a failed store); a blank export selection
    exported the events with no principal, exit 0."""
    home = tmp_path / "h"
    _one_lesson(home)
    code, out, err = run(capsys, "--home", home, *[a.format(dir=tmp_path) for a in argv])
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert out == ""
    assert not (tmp_path / "new").exists()
