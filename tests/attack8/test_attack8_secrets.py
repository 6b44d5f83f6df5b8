"""Credentials the screen let through (wave 5, attack8).

Each is a password or token as agents' shell lines and config files carry them: the
MySQL client's attached ``-pPASSWORD``, ``sshpass -p``, ``docker login -p``, a netrc
line, a ``passphrase=`` assignment and a Hugging Face token. detect-secrets reads none
of them, and each was stored for good in an operation, an error or a lesson.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import CredentialError, Operation, open_ledger
from lessonledger.ledger.secrets import credential_in

P = "3f9a0c1b2d4e5f60"

REFUSED = [
    "mysql -u root -pTr0ub4dor3 -h db.internal prod",
    "mysqldump -uroot -p'Tr0ub4dor3' prod > dump.sql",
    "sshpass -p Tr0ub4dor3 ssh deploy@web1",
    "docker login -u deploy -p Tr0ub4dor3 registry.example.com",
    "machine github.com login deploy password Tr0ub4dor3",
    "gpg --batch passphrase=Tr0ub4dor-and-3",
    "HF hub refused hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
]

ACCEPTED = [
    "mysql -u root -p prod",                 # -p alone: the client prompts
    "mysql -p$DB_PASSWORD prod",
    "mkdir -p build/out",
    "ssh -p 2222 deploy@web1",
    "sshpass -p $SSHPASS ssh deploy@web1",
    "docker login -u deploy --password-stdin registry.example.com",
    "docker run -p 8080:80 web",
    "login failed: password incorrect",
    "hf_hub_download(repo_id='org/model')",
]


@pytest.mark.parametrize("text", REFUSED)
def test_the_credential_is_refused_and_nothing_written(text: str, tmp_path: Path) -> None:
    assert credential_in(text) is not None
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        with pytest.raises(CredentialError, match=r"\$\.operations\[0\]\.error"):
            ledger.observe_outcome(key="k", session="s", principal="p", project=P,
                                   passed=False, operations=[
                                       Operation(op="deploy", target="web", ok=False,
                                                 error=text)])
        assert ledger.log.head() == 0


@pytest.mark.parametrize("text", ACCEPTED)
def test_the_same_shapes_without_a_secret_are_accepted(text: str) -> None:
    assert credential_in(text) is None
