"""Credentials as an agent's command lines carry them (wave 3, attack5).

An operation is often the shell command the agent ran, so a password passed as a flag's
value after a space, an ``X-Api-Key`` header, or ``curl -u user:password`` is as stored
as a ``password=`` assignment. detect-secrets reads none of these three.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import CredentialError, Operation, open_ledger
from lessonledger.ledger.secrets import credential_in

P = "3f9a0c1b2d4e5f60"

REFUSED = [
    "docker login -u deploy --password Tr0ub4dor-and-3 registry.example.com",
    "mysql --password 'Tr0ub4dor-and-3' -h db",
    "gh release create --token ghx7Qm2pLw9ZrT4v",
    "deploy --api-key 9f8e7d6c5b4a39281726354433221100",
    "curl -H 'X-Api-Key: 9f8e7d6c5b4a39281726354433221100' https://api.example.com",
    '{"api-key": "9f8e7d6c5b4a39281726354433221100"}',
    "curl -u deploy:Tr0ub4dor-and-3 https://ci.example.com/api",
    "curl --user=deploy:Tr0ub4dor-and-3 https://ci.example.com/api",
]

ACCEPTED = [
    "docker login --password-stdin registry.example.com",
    "docker login --password $REGISTRY_PASSWORD",
    'mysql --password "$(cat /run/secrets/db)"',
    "deploy --api-key <your key>",
    "X-Api-Key: ${API_KEY}",
    "curl -u $CI_USER:$CI_PASSWORD https://ci.example.com/api",
    "docker run -u 1000:1000 builder make",
    "pytest --token-file tests/fixtures/token.txt",
]


@pytest.mark.parametrize("text", REFUSED)
def test_a_credential_on_a_command_line_is_refused_and_nothing_written(
        text: str, tmp_path: Path) -> None:
    assert credential_in(text) is not None
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        with pytest.raises(CredentialError, match=r"\$\.operations\[0\]\.op"):
            ledger.observe_outcome(key="k", session="s", principal="p", project=P,
                                   passed=False, operations=[
                                       Operation(op=text, target="deploy", ok=False,
                                                 error="exit 1")])
        assert ledger.log.head() == 0


@pytest.mark.parametrize("text", ACCEPTED)
def test_the_same_shapes_without_a_secret_are_accepted(text: str) -> None:
    assert credential_in(text) is None
