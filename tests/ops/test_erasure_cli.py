"""``lessonledger erase`` and ``compact`` as a person and a script use them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.commands.ledger import VIEW_NAME
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ops.cli import main
from lessonledger.ops.config import LOG_NAME
from lessonledger.ops.erasure_commands import EXIT_COMPACTION_PENDING
from lessonledger.projections.store import ViewStore
from residue import erase, found, holder, secret, windows, windows_left


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def erased_home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An initialised home with 50 large events, 40 of them erased."""
    home = tmp_path / "home"
    assert run(capsys, "--home", str(home), "init")[0] == 0
    lmdb_home = acquire(str(home))
    try:
        log = EventLog(lmdb_home, LOG_NAME)
        log.append([NewEvent("s", v, "note", os.urandom(5000)) for v in range(50)])
        assert erase(log, range(1, 41)) == 40
    finally:
        release(lmdb_home)
    return home


def test_compact_json_reports_sizes_and_the_home_still_verifies(
    erased_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--home", str(erased_home), "compact", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert set(result) == {"path", "bytes_before", "bytes_after", "seconds"}
    assert result["path"] == str(erased_home)
    assert 0 < result["bytes_after"] < result["bytes_before"]
    assert result["bytes_after"] == (erased_home / "data.mdb").stat().st_size
    code, out, _ = run(capsys, "--home", str(erased_home), "verify")
    assert code == 0
    assert "40 bodies erased: ok" in out


def test_compact_says_what_it_did_in_one_line(
    erased_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--home", str(erased_home), "compact")
    assert code == 0
    assert re.fullmatch(rf"compacted {re.escape(str(erased_home))}: [\d.]+ kB -> [\d.]+ kB "
                        r"in \d+\.\d\d s\n", out), out


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_compact_of_a_path_that_is_not_a_home_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str
) -> None:
    path = tmp_path / "nothing"
    if make == "empty":
        path.mkdir()
    code, out, err = run(capsys, "--home", str(path), "compact")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"no ledger at {path}" in err
    assert not path.exists() or not list(path.iterdir())


def test_compact_of_a_home_in_use_is_one_line_and_exit_2(
    erased_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (erased_home / "data.mdb").read_bytes()
    lmdb_home = acquire(str(erased_home))
    try:
        code, out, err = run(capsys, "--home", str(erased_home), "compact", "--json")
    finally:
        release(lmdb_home)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "is open in another process (or this one)" in err
    assert "then run `lessonledger compact`" in err
    assert (erased_home / "data.mdb").read_bytes() == before


def test_console_script_compacts(erased_home: Path) -> None:
    script = Path(sys.executable).with_name("lessonledger")
    done = subprocess.run([str(script), "--home", str(erased_home), "compact", "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bytes_after"] > 0


# -- erase --------------------------------------------------------------------------------

PROJECT = "a" * 32


@pytest.fixture
def agents_home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, bytes, bytes]:
    """A home where alice's and bob's outcomes each taught a lesson; their secrets."""
    home = tmp_path / "home"
    assert run(capsys, "--home", str(home), "init")[0] == 0
    alice, bob = secret(), secret()
    with open_ledger(home) as ledger:
        for who, text in (("alice", alice), ("bob", bob)):
            target = f"repo-{who}-" + text.decode()
            ledger.observe_outcome(
                key=who, project=PROJECT, principal=who, session=f"s-{who}", passed=True,
                operations=[Operation(op="pytest:tests/", target=target, ok=False,
                                      error="failed: " + text.decode()),
                            Operation(op="pytest:root", target=target, ok=True, order=1)])
        assert len(ledger.view.lessons) == 2
    return home, alice, bob


def test_erase_then_no_byte_of_the_principal_is_left_in_any_file(
    agents_home: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    home, alice, bob = agents_home
    assert found(str(home), [alice, bob]) == {alice, bob}
    code, out, err = run(capsys, "--home", str(home), "erase", "--principal", "alice",
                         "--reason", "data subject request", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["what"] == "principal"
    assert len(result["erased"]) >= 2  # the outcome and the lesson learned from it
    assert result["compacted"]["bytes_after"] > 0
    assert result["pending"] is None
    # Log, saved view, vector index: alice's bytes are nowhere; bob's are still there.
    assert found(str(home), [alice, bob]) == {bob}
    code, out, _ = run(capsys, "--home", str(home), "verify")
    assert code == 0
    assert f"{len(result['erased'])} bodies erased: ok" in out
    code, out, _ = run(capsys, "--home", str(home), "lessons", "list", "--json")
    assert alice.decode() not in out
    assert bob.decode() in out


def test_erase_without_compaction_leaves_the_bytes_in_free_pages(
    agents_home: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    # The negative control: the residue scan does find what only compaction removes.
    home, alice, _ = agents_home
    # A reader that began before the erasure pins the pages it freed (LMDB reuses a
    # page only once no reader can see it), so the views saved after it cannot overwrite
    # them: what is left is only what compaction would remove.
    lmdb_home = acquire(str(home))
    pinned = lmdb_home.env.begin()
    code, out, _ = run(capsys, "--home", str(home), "erase", "--principal", "alice",
                       "--reason", "r", "--no-compact")
    assert code == 0
    assert "not compacted" in out
    pinned.abort()
    release(lmdb_home)
    assert windows_left(str(home), windows([alice]))
    assert run(capsys, "--home", str(home), "compact")[0] == 0
    assert windows_left(str(home), windows([alice])) == {}


def test_erase_while_another_process_has_the_home_open_says_compaction_waits(
    agents_home: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    home, alice, _ = agents_home
    with holder(str(home)):
        code, out, err = run(capsys, "--home", str(home), "erase", "--session", "s-alice",
                             "--reason", "r")
        assert code == EXIT_COMPACTION_PENDING
        assert "erased " in out
        assert err.count("\n") == 1
        assert "then run `lessonledger compact`" in err
    assert run(capsys, "--home", str(home), "compact")[0] == 0
    assert found(str(home), [alice]) == set()


def test_erase_refuses_an_unknown_lesson_in_one_line_and_writes_nothing(
    agents_home: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    home, _, _ = agents_home
    before = run(capsys, "--home", str(home), "log", "--json")[1]
    code, out, err = run(capsys, "--home", str(home), "erase", "--lesson", "ffff",
                         "--reason", "r")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert run(capsys, "--home", str(home), "log", "--json")[1] == before


def test_compact_first_brings_views_saved_before_an_erasure_up_to_it(
    agents_home: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    # As if the erasing process died after its commit, before rebuilding its views: the
    # saved view and index files from before the erasure are put back.
    home, alice, bob = agents_home
    with open_ledger(home) as ledger:
        ledger.save_view()
        ledger.recaller.save()
    saved = home.parent / "saved"
    shutil.copytree(home / "vectors", saved / "vectors")
    lmdb_home = acquire(str(home))
    try:
        stale = ViewStore(lmdb_home).load(VIEW_NAME)
    finally:
        release(lmdb_home)
    assert stale is not None
    assert alice in stale[1]
    assert run(capsys, "--home", str(home), "erase", "--principal", "alice", "--reason", "r",
               "--no-compact")[0] == 0
    lmdb_home = acquire(str(home))
    try:
        ViewStore(lmdb_home).drop(VIEW_NAME)
        assert ViewStore(lmdb_home).save(VIEW_NAME, *stale)
    finally:
        release(lmdb_home)
    shutil.rmtree(home / "vectors")
    shutil.copytree(saved / "vectors", home / "vectors")
    assert run(capsys, "--home", str(home), "compact")[0] == 0
    assert found(str(home), [alice, bob]) == {bob}


def test_an_erased_lesson_asked_for_by_id_says_it_was_erased(
    agents_home: tuple[Path, bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    home, _, _ = agents_home
    listed = run(capsys, "--home", str(home), "lessons", "list", "--json")[1]
    lesson = json.loads(listed.splitlines()[0])["lesson_id"]
    assert run(capsys, "--home", str(home), "erase", "--lesson", lesson[:8],
               "--reason", "wrong", "--by", "ana")[0] == 0
    for command in (["lessons", "show"], ["why"]):
        code, _, err = run(capsys, "--home", str(home), *command, lesson[:8])
        assert code == 2
        assert err.count("\n") == 1
        assert f"lesson {lesson} was erased at position" in err
        assert "by ana (wrong)" in err
