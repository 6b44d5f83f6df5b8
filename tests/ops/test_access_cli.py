"""``lessonledger keys`` and ``access`` through the real command line."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from lessonledger.commands.read_side import open_reader
from lessonledger.ops.cli import main
from lessonledger.sync.keys import load_public, load_secret

P = "3f9a0c1b2d4e5f60"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def hub(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Path:
    """An initialised home, with the key directory at ``tmp_path/keys``."""
    monkeypatch.setenv("LESSONLEDGER_KEYS", str(tmp_path / "keys"))
    home = tmp_path / "home"
    assert run(capsys, "--home", str(home), "init")[0] == 0
    return home


def _files(top: Path) -> dict[str, str]:
    return {str(p.relative_to(top)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(top.rglob("*")) if p.is_file()}


def test_keys_new_writes_a_pair_with_a_private_secret(
        hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "keys", "new", "ada-laptop", "--json")
    assert (code, err) == (0, "")
    made = json.loads(out)
    public, secret = Path(made["public"]), Path(made["secret"])
    assert public == tmp_path / "keys" / "ada-laptop.key"
    assert secret == tmp_path / "keys" / "ada-laptop.key_secret"
    assert load_public(public).decode() == made["public_key"]
    assert load_secret(secret)[0] == load_public(public)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in secret.parent.iterdir()) == [
        "ada-laptop.key", "ada-laptop.key_secret"]


def test_keys_new_into_a_directory_given(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "keys", "new", "bo", "--dir", str(tmp_path / "elsewhere"))
    assert code == 0
    assert (tmp_path / "elsewhere" / "bo.key").is_file()
    assert "bo.key_secret" in out


def test_keys_new_never_overwrites(hub: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "keys", "new", "ada")[0] == 0
    before = _files(tmp_path / "keys")
    code, out, err = run(capsys, "keys", "new", "ada")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "exists already" in err
    assert _files(tmp_path / "keys") == before


def test_grant_list_revoke_round_trip(hub: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "keys", "new", "ada")
    code, out, err = run(capsys, "--home", str(hub), "access", "grant", "ada",
                         "--principal", "ada", "--read", P, "--write", P, "--json")
    assert (code, err) == (0, "")
    granted = json.loads(out)
    assert (granted["principal"], granted["read"], granted["write"], granted["admin"]) == (
        "ada", [P], [P], False)
    code, out, _ = run(capsys, "--home", str(hub), "access", "list", "--json")
    assert code == 0
    listed = json.loads(out)
    assert [g["key_name"] for g in listed] == ["ada"]
    assert listed[0]["public_key"] == granted["public_key"]
    code, out, _ = run(capsys, "--home", str(hub), "access", "list")
    assert "ada: principal ada; reads " + P in out
    code, out, _ = run(capsys, "--home", str(hub), "access", "revoke", "ada")
    assert code == 0
    assert "revoked ada" in out
    assert json.loads(run(capsys, "--home", str(hub), "access", "list", "--json")[1]) == []
    with open_reader(hub) as reader:
        assert reader.allowed_keys() == frozenset()


def test_grant_takes_an_admin_flag_and_a_key_path(hub: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "keys", "new", "root", "--dir", str(tmp_path / "other"))
    code, out, _ = run(capsys, "--home", str(hub), "access", "grant", "root", "--principal",
                       "ops", "--admin", "--key", str(tmp_path / "other" / "root.key"),
                       "--json")
    assert code == 0
    assert json.loads(out)["admin"] is True
    with open_reader(hub) as reader:
        grant = reader.grants()[0]
    assert grant.public_key == load_public(tmp_path / "other" / "root.key").decode()


@pytest.mark.parametrize(("argv", "says"), [
    (["access", "grant", "ada", "--principal", "ada", "--key", "KEYS/ada.key_secret"],
     "holds a secret key"),
    (["access", "grant", "ada", "--principal", "", ], "$.principal"),
    (["access", "grant", "ada", "--principal", "ada", "--read", "my-project"], "$.read[0]"),
    (["access", "grant", "nobody", "--principal", "ada"], "not found"),
    (["access", "grant", "ada", "--principal", "ada", "--key", "KEYS/garbage.key"],
     "is not a key file"),
    (["access", "revoke", "nobody"], "no key named 'nobody'"),
    (["access", "revoke", "../ada"], "$.key_name"),
    (["keys", "new", "../escape"], "is not a key name"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
        hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        argv: list[str], says: str) -> None:
    run(capsys, "keys", "new", "ada")
    (tmp_path / "keys" / "garbage.key").write_text("not a certificate\n")
    before = {"home": _files(hub), "keys": _files(tmp_path / "keys")}
    argv = [a.replace("KEYS", str(tmp_path / "keys")) for a in argv]
    code, out, err = run(capsys, "--home", str(hub), *argv)
    assert (code, out) == (2, "")
    assert err.startswith("lessonledger: ")
    assert err.count("\n") == 1, err
    assert says in err
    assert {"home": _files(hub), "keys": _files(tmp_path / "keys")} == before


def test_a_grant_on_a_missing_home_is_refused_and_creates_nothing(
        hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "keys", "new", "ada")
    missing = tmp_path / "nowhere"
    code, _, err = run(capsys, "--home", str(missing), "access", "grant", "ada",
                       "--principal", "ada")
    assert code == 2
    assert err.count("\n") == 1
    assert not missing.exists()


def test_the_console_script_grants_and_lists(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("lessonledger")
    env = {**os.environ, "LESSONLEDGER_KEYS": str(tmp_path / "keys"),
           "LESSONLEDGER_HOME": str(tmp_path / "home"), "LESSONLEDGER_SYNC": "os"}
    for argv in (["init"], ["keys", "new", "ada"],
                 ["access", "grant", "ada", "--principal", "ada", "--read", P]):
        done = subprocess.run([str(script), *argv], env=env, capture_output=True, text=True,
                              check=False, timeout=120)
        assert done.returncode == 0, done.stderr
    listed = subprocess.run([str(script), "access", "list", "--json"], env=env,
                            capture_output=True, text=True, check=False, timeout=120)
    assert listed.returncode == 0
    assert [g["principal"] for g in json.loads(listed.stdout)] == ["ada"]
