"""Issue #10, item 2: no secret is stored, in any field a command or a query records.

Each listed shape is tried in every field a writer chooses (the envelope's actor,
principal and session included, since envelopes outlive erasure), through the public
API. A refusal names the field and the kind of secret, and writes nothing; ordinary
agent content (digests, UUIDs, op keys, error messages) is still accepted.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lesson_agent import AVOID, P1, PREFER, T0, TARGET, Agent
from lessonledger.commands import CredentialError, Ledger, Operation, open_ledger
from lessonledger.commands.errors import BatchRefusedError
from lessonledger.commands.messages import ObserveOutcome, command_from

#: The shapes issue #10 lists as stored, and the kind each is refused as.
SHAPES: dict[str, tuple[str, str]] = {
    "aws-secret-lower": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                         "Secret Keyword"),
    "aws-secret-env": ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                       "Secret Keyword"),
    "db-password": ("DB_PASSWORD=Tr0ub4dor-and-3", "Secret Keyword"),
    "github-pat": ("github_pat_11ABCDEFG0aBcDeFgHiJkL_MnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPq"
                   "RsTuVwXyZ01234", "GitHub Token"),
    "gitlab-pat": ("glpat-Zk3xQ9vB7mN2pL5tR8wY", "GitLab Token"),
    "slack-webhook": ("https://hooks.slack.com/services/T024BE7LD/B01ABCD2EFG/"
                      "aBcDeFgHiJkLmNoPqRsTuVwX", "Slack Token"),
    "pgp-private-key": ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "Private Key"),
    "redis-password-only": ("redis://:Sup3rS3cret@cache.internal:6379/0",
                            "Basic Auth Credentials"),
    "https-upper-case": ("HTTPS://deploy:Sup3rS3cret@git.example.com/repo.git",
                         "Basic Auth Credentials"),
    "stripe-live": ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "Stripe Access Key"),
    "basic-authorization": ("Authorization: Basic ZGVwbG95OlN1cDNyUzNjcmV0",
                            "Authorization header"),
    "npm-token": ("npm_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5", "NPM tokens"),
}

_keys = itertools.count()


def key() -> str:
    return f"secrets-{next(_keys)}"


def _observe(led: Ledger, **fields: Any) -> Any:
    return led.observe_outcome(key=key(), project=P1, passed=True, **fields)


def _failing(op: str = AVOID, target: str = TARGET, error: str = "x") -> list[Operation]:
    return [Operation(op=op, target=target, ok=False, error=error)]


def _propose(led: Ledger, **fields: str) -> Any:
    return led.propose_lesson(key=key(), project=P1, **{
        "text": "Run pytest from the root", "kind": "prefer", "avoid_op": AVOID,
        "prefer_op": PREFER, "target": TARGET, "source": "model", **fields})


Write = Callable[[Ledger, str, dict[str, Any]], Any]

#: Every field a writer chooses, by the JSON path a refusal names.
FIELDS: dict[str, Write] = {
    # an outcome
    "$.task": lambda led, s, w: _observe(led, task=f"deploy with {s}"),
    "$.operations[0].op": lambda led, s, w: _observe(led, operations=_failing(op=s)),
    "$.operations[0].target": lambda led, s, w: _observe(led, operations=_failing(target=s)),
    "$.operations[0].error": lambda led, s, w: _observe(led, operations=_failing(
        error=f"deploy failed: {s} rejected")),
    "$.fingerprint.deploy": lambda led, s, w: _observe(led, fingerprint={"deploy": s}),
    "$.fingerprint (a name)": lambda led, s, w: _observe(led, fingerprint={s: "1"}),
    # the envelope of every command
    "$.actor": lambda led, s, w: _observe(led, actor=s),
    "$.principal": lambda led, s, w: _observe(led, principal=s),
    "$.session": lambda led, s, w: _observe(led, session=s),
    # a lesson
    "$.text": lambda led, s, w: _propose(led, text=f"Before deploying set {s}"),
    "$.avoid_op": lambda led, s, w: _propose(led, avoid_op=s),
    "$.prefer_op": lambda led, s, w: _propose(led, prefer_op=s),
    "$.target": lambda led, s, w: _propose(led, target=s),
    "edit $.text": lambda led, s, w: led.edit_lesson(key=key(), lesson_id=w["lesson"],
                                                     text=f"Use {s} instead"),
    "retire $.reason": lambda led, s, w: led.retire_lesson(
        key=key(), lesson_id=w["lesson"], reason=f"obsolete since {s}"),
    "retire $.principal": lambda led, s, w: led.retire_lesson(
        key=key(), lesson_id=w["lesson"], principal=s),
    "$.component": lambda led, s, w: led.declare_environment_change(
        key=key(), scope=P1, component=s, new="2"),
    "$.new": lambda led, s, w: led.declare_environment_change(
        key=key(), scope=P1, component="deploy", new=s),
    "reconcile $.session": lambda led, s, w: led.reconcile(key=key(), now=T0, session=s),
    # queries that record what they were asked
    "recall $.query": lambda led, s, w: led.recall(P1, f"how to deploy with {s}"),
    "recall $.principal": lambda led, s, w: led.recall(P1, "deploy", principal=s),
    "recall $.session": lambda led, s, w: led.recall(P1, "deploy", session=s),
    "recall $.actor": lambda led, s, w: led.recall(P1, "deploy", actor=s),
    "check $.operation": lambda led, s, w: led.check(P1, s, TARGET),
    "check $.target": lambda led, s, w: led.check(P1, AVOID, s),
    "check $.principal": lambda led, s, w: led.check(P1, AVOID, TARGET, principal=s),
    "lessons $.session": lambda led, s, w: led.lessons(P1, session=s),
    # an erasure: the Erased record keeps its reason and who erased, for good
    "erase $.reason": lambda led, s, w: led.erase(
        key=key(), what="principal", subject="alice", reason=f"asked by {s}"),
    "erase $.actor": lambda led, s, w: led.erase(
        key=key(), what="principal", subject="alice", reason="GDPR request", actor=s),
    "erase $.session": lambda led, s, w: led.erase(
        key=key(), what="principal", subject="alice", reason="GDPR request", session=s),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A ledger with a lesson, alice's outcome and a recallable lesson; refusals share it."""
    home: Path = tmp_path_factory.mktemp("secrets")
    with open_ledger(home, sync=False) as led:
        agent = Agent(led)
        lesson = agent.learn(P1, "s1")
        led.observe_outcome(key="alice", project=P1, passed=True, principal="alice",
                            occurred_at=T0)
        yield {"ledger": led, "lesson": lesson}


def _log(led: Ledger) -> list[tuple[int, bytes | None]]:
    led.flush()  # queued recall records commit first: a refused query must queue none
    return [(r.envelope.position, r.payload) for r in led.log.scan()]


@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_listed_secret_is_refused_in_every_field_naming_it_and_nothing_is_written(
        world: dict[str, Any], shape: str, field: str) -> None:
    led: Ledger = world["ledger"]
    secret, kind = SHAPES[shape]
    before = _log(led)
    with pytest.raises(CredentialError) as refused:
        FIELDS[field](led, secret, world)
    assert refused.value.field == field[field.index("$"):]
    assert refused.value.pattern == kind
    assert f"{refused.value.field} looks like a credential ({kind})" in str(refused.value)
    assert _log(led) == before


ORDINARY = [
    "Run pytest from the repository root, not from tests/",
    "pytest:tests/ fails: no conftest.py found",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90",
    "ConnectionRefusedError: [Errno 111] connect to 10.0.0.12:5432 refused",
    "timeout after 30s fetching https://93.184.216.34:8443/api/v1/items",
    "FATAL: password authentication failed for user \"postgres\"",
    "set password=${DB_PASSWORD} in the env file, never the value",
    "Password: ****",
    "secret = vault.read(\"db/creds\")",
    "integrity sha512-3Bk6JhKzkF0B0J+Q9bB0aZ9i7xGq2v6zLr5Q1qK4T8sY7jV3nW2mX0cE9dH6fA1uI4oP7lR==",
    "git clone git@github.com:org/repo.git failed: Permission denied (publickey)",
    "postgres://db.internal:5432/app refused the connection",
    "https://alice@example.com/repo is read-only",
    "token: str was missing its default; add one",
    "the AKIA prefix marks an AWS access key id",
    "passed=True but the build stayed red",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_agent_content_is_accepted_everywhere(world: dict[str, Any], text: str) -> None:
    led: Ledger = world["ledger"]
    before = led.log.head()
    receipt = _observe(led, task=text, operations=_failing(error=text), fingerprint={
        "tool": text[:200]}, principal="0b6c1a7e-95d3-4f0e-8a2b-6d4c3e2f1a90",
        session=text[:200], actor="agent:a1b2c3d4e5f60718")
    assert receipt.positions
    assert led.log.head() > before
    led.recall(P1, text, session="s1")
    led.check(P1, AVOID, text[:512])


def test_a_query_that_records_nothing_is_answered_whatever_it_holds(
        world: dict[str, Any]) -> None:
    led: Ledger = world["ledger"]
    secret = SHAPES["db-password"][0]
    before = _log(led)
    led.recall(P1, f"deploy with {secret}", record=False)
    led.check(P1, secret, TARGET, principal=secret, record=False)
    led.lessons(P1, session=secret, record=False)
    assert _log(led) == before


@pytest.mark.parametrize(("option", "field"), [("--reason", "$.reason"), ("--by", "$.actor")])
@pytest.mark.parametrize("shape", ["db-password", "basic-authorization"])
def test_the_erase_command_line_refuses_a_secret_reason_or_author(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, field: str,
        shape: str) -> None:
    from lessonledger.ops.cli import main

    assert main(["--home", str(tmp_path), "init"]) == 0
    with open_ledger(tmp_path, sync=False) as led:
        _observe(led, principal="alice", occurred_at=T0)
        before = _log(led)
    capsys.readouterr()
    argv = ["--home", str(tmp_path), "erase", "--principal", "alice", "--reason", "GDPR request",
            "--no-compact", option, SHAPES[shape][0]]
    assert main(argv) == 2
    assert f"{field} looks like a credential ({SHAPES[shape][1]})" in capsys.readouterr().err
    with open_ledger(tmp_path, sync=False) as led:
        assert _log(led) == before


def test_a_batch_with_one_secret_is_refused_whole_naming_the_command(
        world: dict[str, Any]) -> None:
    led: Ledger = world["ledger"]
    batch = [command_from({"key": key(), "project": P1, "passed": True}, ObserveOutcome),
             command_from({"key": key(), "project": P1, "passed": True,
                           "session": SHAPES["npm-token"][0]}, ObserveOutcome)]
    before = _log(led)
    with pytest.raises(BatchRefusedError) as refused:
        led.execute_all(batch)
    assert refused.value.index == 1
    assert isinstance(refused.value.cause, CredentialError)
    assert refused.value.cause.field == "$.session"
    assert _log(led) == before
