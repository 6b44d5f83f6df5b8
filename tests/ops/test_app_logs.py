"""A home holding other logs than the ledger's is audited whole.

An eventsourcing application on ``PERSISTENCE_MODULE=lessonledger.ledger`` writes a log
named after itself (``<name>.log`` and its indexes). ``verify`` checks every log in a
home; ``log`` and ``stats`` read the only one there, or, when there are several, say
which there are and take ``--log NAME``.
"""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from lessonledger.commands.ledger import open_ledger
from lessonledger.ops.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse refusing an argument
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


class Dog(Aggregate):
    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name

    @event("TrickAdded")
    def add_trick(self, trick: str) -> None:
        pass


class Kennel(Application[UUID]):
    pass


def _app_home(path: Path, kind: type[Application[UUID]] = Application) -> None:
    app = kind(env={"PERSISTENCE_MODULE": "lessonledger.ledger", "LMDB_PATH": str(path)})
    dog = Dog("fido")
    dog.add_trick("roll over")
    app.save(dog)
    app.close()


def test_an_eventsourcing_applications_home_is_audited_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "app"
    _app_home(home)
    code, out, err = run(capsys, "--home", str(home), "verify")
    assert code == 0, err
    assert "verified 2 of 2 events" in out
    assert "application" in out
    code, out, err = run(capsys, "--home", str(home), "log")
    assert code == 0, err
    assert len(out.splitlines()) == 2
    stats = json.loads(run(capsys, "--home", str(home), "stats", "--json")[1])
    assert stats["head"] == 2


def test_a_home_with_several_logs_verifies_each_and_asks_which_to_list(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "both"
    with open_ledger(home) as ledger:
        ledger.reconcile(key="r1", now="2026-11-29T00:00:00Z")
    _app_home(home, Kennel)
    code, out, err = run(capsys, "--home", str(home), "verify")
    assert code == 0, err
    assert "kennel" in out
    assert "ledger" in out
    reports = [json.loads(line) for line in
               run(capsys, "--home", str(home), "verify", "--json")[1].splitlines()]
    assert {(r["log"], r["checked"]) for r in reports} == {("ledger", 1), ("kennel", 2)}
    code, out, err = run(capsys, "--home", str(home), "log")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "--log" in err
    assert "kennel" in err
    assert "ledger" in err
    code, out, err = run(capsys, "--home", str(home), "log", "--log", "kennel")
    assert code == 0, err
    assert len(out.splitlines()) == 2
    code, _, err = run(capsys, "--home", str(home), "log", "--log", "nope")
    assert code == 2
    assert "kennel" in err
