"""Key files: made by pyzmq, read back, and refused when they are not what is asked for."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import zmq.auth
from lessonledger.commands.access import check_public_key
from lessonledger.sync.keys import KeyFileError, load_public, load_secret, new_keys


def test_a_new_pair_reads_back_as_pyzmq_made_it(tmp_path: Path) -> None:
    public, secret = new_keys(tmp_path / "keys", "ada")
    assert (public.name, secret.name) == ("ada.key", "ada.key_secret")
    assert load_public(public) == zmq.auth.load_certificate(public)[0]
    pub, sec = load_secret(secret)
    assert pub == load_public(public)
    assert zmq.curve_public(sec) == pub
    assert len(check_public_key(pub.decode())) == 32
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert not [p for p in (tmp_path / "keys").iterdir() if p.name.startswith(".")]


def test_a_public_file_has_no_secret_to_load(tmp_path: Path) -> None:
    public, secret = new_keys(tmp_path, "ada")
    with pytest.raises(KeyFileError, match="holds no secret key"):
        load_secret(public)
    with pytest.raises(KeyFileError, match="holds a secret key"):
        load_public(secret, public_only=True)
    assert load_public(secret) == load_public(public)


@pytest.mark.parametrize("text", [
    "", "not a certificate\n", 'curve\n    public-key = "short"\n',
    'curve\n    public-key = "' + "~" * 40 + '"\n'])
def test_a_malformed_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.key"
    path.write_text(text)
    with pytest.raises(KeyFileError) as caught:
        load_public(path)
    assert caught.value.path == path


def test_a_missing_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="keys new"):
        load_secret(tmp_path / "nope.key_secret")


@pytest.mark.parametrize("name", ["", "a/b", "../x", ".x", "a b"])
def test_a_name_that_is_no_file_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(KeyFileError, match="not a key name"):
        new_keys(tmp_path, name)
    assert list(tmp_path.iterdir()) == []
