"""Issue #10, item 2, at the ledger's own door: a raw submission carrying a secret anywhere.

The detector itself is pinned here too: each listed shape is recognised, as the kind a
refusal names, and the digests and ids the ledger is full of are not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.ledger import EventLog, InvalidEventError
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.submission import parse_submission, to_new_event

SECRETS = {
    "aws-secret-lower": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "db-password": "DB_PASSWORD=Tr0ub4dor-and-3",
    "redis-password-only": "redis://:Sup3rS3cret@cache.internal:6379/0",
    "npm-token": "npm_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5",
}


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EventLog]:
    home = acquire(str(tmp_path_factory.mktemp("secret-submissions")), sync=False)
    yield EventLog(home, "ledger")
    release(home)


def _doc(event: dict[str, Any], **envelope: str) -> dict[str, Any]:
    return {"event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
            "occurred_at": "2026-11-29T10:00:00Z", "actor": "agent", **envelope,
            "event": event}


def _outcome(error: str = "x") -> dict[str, Any]:
    return {"type": "outcome.observed", "outcome_id": str(uuid4()), "project": "a" * 32,
            "passed": False, "signal": "tool", "operations": [
                {"op": "pytest:tests/", "target": "tests", "ok": False, "error": error}]}


OUTCOME = _outcome()


def _where(secret: str) -> dict[str, tuple[dict[str, Any], str]]:
    """A submission with ``secret`` in one field, by the JSON path a refusal names."""
    failing = _outcome(f"deploy failed: {secret}")
    return {
        "$.actor": (_doc(OUTCOME, actor=secret), "$.actor"),
        "$.principal": (_doc(OUTCOME, principal=secret), "$.principal"),
        "$.session": (_doc(OUTCOME, session=secret), "$.session"),
        "$.event.operations[0].error": (_doc(failing), "$.event.operations[0].error"),
        "$.event.query": (_doc({"type": "lesson.recalled", "lesson_ids": [str(uuid4())],
                                "project": "a" * 32, "query": f"deploy {secret}"}),
                          "$.event.query"),
        "$.event.reason": (_doc({"type": "erasure.erased", "what": "principal",
                                 "subject": "alice", "by": "operator",
                                 "reason": f"asked by {secret}"}), "$.event.reason"),
    }


@pytest.mark.parametrize("field", list(_where("x")))
@pytest.mark.parametrize("shape", list(SECRETS))
def test_a_submission_with_a_secret_in_any_field_is_refused_naming_it(
        log: EventLog, shape: str, field: str) -> None:
    doc, path = _where(SECRETS[shape])[field]
    before = log.head()
    with pytest.raises(InvalidEventError) as refused:
        log.append([to_new_event(parse_submission(msgspec.json.encode(doc)))])
    assert log.head() == before, "a refused submission wrote something"
    assert refused.value.field == path
    assert getattr(refused.value, "pattern", None)
    assert "looks like a credential" in str(refused.value)


def test_a_submission_without_secrets_is_stored(log: EventLog) -> None:
    before = log.head()
    doc = _doc(OUTCOME, principal="0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90",
               session="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    log.append([to_new_event(parse_submission(msgspec.json.encode(doc)))])
    assert log.head() == before + 1


LISTED = [
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Secret Keyword"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Secret Keyword"),
    ("DB_PASSWORD=Tr0ub4dor-and-3", "Secret Keyword"),
    ("github_pat_11ABCDEFG0aBcDeFgHiJkL_MnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ0",
     "GitHub Token"),
    ("glpat-Zk3xQ9vB7mN2pL5tR8wY", "GitLab Token"),
    ("https://hooks.slack.com/services/T024BE7LD/B01ABCD2EFG/aBcDeFgHiJkLmNoPqRsTuVwX",
     "Slack Token"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF...\n-----END PGP PRIVATE KEY BLOCK-----",
     "Private Key"),
    ("redis://:Sup3rS3cret@cache.internal:6379/0", "Basic Auth Credentials"),
    ("HTTPS://deploy:Sup3rS3cret@git.example.com/repo.git", "Basic Auth Credentials"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "Stripe Access Key"),
    ("curl -H 'Authorization: Basic ZGVwbG95OlN1cDNyUzNjcmV0' https://x", "Authorization header"),
    ("//registry.npmjs.org/:_authToken=npm_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5", "NPM tokens"),
    ("npm_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5", "NPM tokens"),
    # what the hand list caught before, still caught
    ("password=hunter2", "Secret Keyword"),
    ("use AKIAIOSFODNN7EXAMPLE for the bucket", "AWS Access Key"),
    ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "Private Key"),
    ("GITHUB_TOKEN=ghx0123456789abcdef", "Secret Keyword"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9abcdefghijkl", "Bearer token"),
    # detect-secrets' own allowlist comment allows nothing here
    ("DB_PASSWORD=Tr0ub4dor-and-3  # pragma: allowlist secret", "Secret Keyword"),
]


@pytest.mark.parametrize(("text", "kind"), LISTED)
def test_each_listed_shape_is_recognised_as_its_kind(text: str, kind: str) -> None:
    from lessonledger.ledger.secrets import credential_in

    assert credential_in(text) == kind


NOT_SECRETS = [
    "", "   ", "a" * 64, "0123456789abcdef" * 4, "0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90",
    "pytest:tests/", "pip:install -e .", "agent:a1b2c3d4e5f60718", "global",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "connect to 203.0.113.7:443 timed out", "password=${DB_PASSWORD}", "password: <redacted>",
    "API_KEY=$API_KEY", "secret: ********",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_digests_ids_and_references_are_no_secret(text: str) -> None:
    from lessonledger.ledger.secrets import credential_in

    assert credential_in(text) is None


_FRAGMENTS = ["password", "DB_PASSWORD", "api_key", "secret", "pwd", "token", "auth", "=", "==",
              ":", ":=", ";", " ", "  ", "\n", "'", '"', "`", "${X}", "$X", "<x>", "hunter2",
              "Tr0ub4dor", "ghp_", "AKIA", "IOSFODNN7EXAMPLE", "xoxb-", "123-", "abc", "://",
              "u:p@", "@", "eyJ", "vault.get(", ")", "[", "]", "sk_live_", "0" * 24, "_"]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join))
def test_the_screens_change_no_answer(text: str) -> None:
    """Each plugin runs only on a pattern match, the keyword regexes only on a keyword and
    an assignment sign: necessary conditions, so screening changes no answer."""
    from lessonledger.ledger.secrets import _OURS, _detector

    detector = _detector()
    plugins = {name: plugin for _, name, plugin in detector.patterns if plugin is not None}
    unscreened = next((name for name, plugin in plugins.items()
                       if any(True for _ in plugin.analyze_string(text))), None)
    unscreened = unscreened or next((n for n, rx in _OURS if rx.search(text)), None)
    if unscreened is None and any(detector._assigns_a_secret(line)
                                  for line in text.splitlines()):
        unscreened = detector.keyword_type
    assert detector.find(text) == unscreened
