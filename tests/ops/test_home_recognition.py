"""Review of issue #10 (F7): what is a home, and nothing is written where none is.

A home is a directory whose ``data.mdb`` is an LMDB environment (its meta page carries
LMDB's magic number) holding only lessonledger's trees: a log's ``<name>.log``,
``.streams``, ``.ids`` and ``.tracking``, and ``views`` (an eventsourcing application on
our module writes the same). ``init`` refused neither a foreign LMDB (it added the
ledger's trees to it) nor an empty ``data.mdb``; a file that is not LMDB was refused, but
only after LMDB had left ``lock.mdb`` and ``home.lock`` beside it. And queries on an
application's home made an empty lesson log there, after which ``log`` demanded
``--log``.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import lmdb
import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from lessonledger.ops.cli import main

P = "3f9a0c1b2d4e5f60"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def trees(home: Path) -> list[bytes]:
    env = lmdb.open(str(home), readonly=True, lock=False, max_dbs=128)
    try:
        with env.begin() as txn:
            return sorted(key for key, _ in txn.cursor())
    finally:
        env.close()


def _foreign(home: Path) -> None:
    env = lmdb.open(str(home), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v", db=env.open_db(b"foo", txn=txn))
    env.close()
    (home / "lock.mdb").unlink()


@pytest.mark.parametrize("make", ["foreign", "empty", "garbage"])
@pytest.mark.parametrize("argv", [["init"], ["log"], ["verify"], ["stats"], ["compact"],
                                  ["erase", "--principal", "x", "--reason", "r"],
                                  ["lessons", "list"]])
def test_a_directory_that_is_no_home_is_refused_and_left_as_it_was(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str,
        argv: list[str]) -> None:
    home = tmp_path / "h"
    home.mkdir()
    if make == "foreign":
        _foreign(home)
    elif make == "empty":
        (home / "data.mdb").write_bytes(b"")
    else:
        (home / "data.mdb").write_bytes(b"not an LMDB file at all\n" * 1000)
    before = files(home)
    code, out, err = run(capsys, "--home", str(home), *argv)
    assert code == 2, (out, err)
    assert len(err.splitlines()) == 1, err
    assert files(home) == before


def test_init_on_a_home_it_made_is_still_fine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    assert run(capsys, "init", "--home", str(home))[0] == 0
    assert run(capsys, "init", "--home", str(home))[0] == 0
    assert run(capsys, "--home", str(home), "publish", "/dev/null")[0] == 2


class Dog(Aggregate):
    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name


class Kennel(Application[UUID]):
    pass


def _app_home(path: Path) -> None:
    app = Kennel(env={"PERSISTENCE_MODULE": "lessonledger.ledger", "LMDB_PATH": str(path)})
    app.save(Dog("fido"))
    app.close()


@pytest.mark.parametrize("argv", [
    ["lessons", "list", "--project", P], ["recall", "--project", P, "run the tests"],
    ["check", "--project", P, "pytest", "tests"], ["why", "0000"], ["lessons", "show", "00"],
    ["erase", "--principal", "x", "--reason", "r"], ["compact"], ["verify"], ["stats"],
    ["log"],
])
def test_queries_and_refusals_on_an_application_home_make_no_lesson_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    home = tmp_path / "app"
    _app_home(home)
    before = trees(home)
    run(capsys, "--home", str(home), *argv)
    assert trees(home) == before
    assert not (home / "vectors").exists()
    code, out, err = run(capsys, "--home", str(home), "log")
    assert code == 0, err
    assert "Registered" in out


def test_an_empty_lesson_log_is_not_counted_when_choosing_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A home where an older version made empty ledger trees beside an application's."""
    home = tmp_path / "app"
    _app_home(home)
    env = lmdb.open(str(home), max_dbs=128)
    for tree in (b"ledger.log", b"ledger.streams", b"ledger.ids"):
        env.open_db(tree)
    env.close()
    for argv in (["log"], ["stats"]):
        code, out, err = run(capsys, "--home", str(home), *argv)
        assert code == 0, (argv, err)
    code, out, err = run(capsys, "--home", str(home), "verify")
    assert code == 0, err
    assert "ledger:" not in out
    assert run(capsys, "--home", str(home), "log", "--log", "ledger")[0] == 0
