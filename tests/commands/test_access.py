"""Access commands on a real home: grants, revocations, their refusals, and erasure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands.access import GrantAccess, RevokeAccess
from lessonledger.commands.errors import (
    CredentialError,
    InvalidCommandError,
    KeyNameTakenError,
    KeyReusedError,
    UnknownKeyError,
)
from lessonledger.ledger.errors import InvalidEventError
from lessonledger.ledger.events import (
    EVENT_CLASSES,
    LEDGER_ONLY,
    NAMES_A_PRINCIPAL,
    AccessGranted,
    AccessRevoked,
    tag_of,
)
from lessonledger.ledger.secrets import credential_in
from lessonledger.ledger.submission import parse_submission
from lessonledger.sync.keys import load_secret, new_keys
from zmq.utils import z85

P, Q = "3f9a0c1b2d4e5f60", "a1b2c3d4e5f60718"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with open_ledger(tmp_path / "home", sync=False) as opened:
        yield opened


def _public_key() -> str:
    """A real CURVE public key (libzmq's)."""
    return zmq.curve_keypair()[0].decode()


def _grant(ledger: Ledger, name: str, public: str, principal: str, **fields: object) -> int:
    receipt = ledger.execute(GrantAccess(key=f"grant-{name}-{principal}-{fields}",
                                         key_name=name, public_key=public,
                                         principal=principal, **fields))  # type: ignore[arg-type]
    return receipt.positions[0]


def test_a_grant_is_an_event_and_the_view_answers_by_key(ledger: Ledger) -> None:
    key = _public_key()
    at = _grant(ledger, "ada-laptop", key, "ada", read=[P, P], write=[P], admin=True)
    grant = ledger.grant_for(key)
    assert grant is not None
    assert (grant.key_name, grant.principal, grant.read, grant.write, grant.admin,
            grant.granted_at) == ("ada-laptop", "ada", frozenset({P}), frozenset({P}), True, at)
    assert ledger.allowed_keys() == frozenset({key})
    assert ledger.grants() == [grant]
    record = ledger.log.read(at, limit=1)[0]
    # The grant is data about its grantee: the envelope names ada, the actor who granted.
    assert (record.envelope.principal, record.envelope.actor) == ("ada", "operator")


def test_a_new_grant_for_the_same_key_replaces_the_old_one_whole(ledger: Ledger) -> None:
    key = _public_key()
    _grant(ledger, "ada", key, "ada", read=[P], write=[P], admin=True)
    _grant(ledger, "ada", key, "ada", read=[Q])
    grant = ledger.grant_for(key)
    assert grant is not None
    assert (grant.read, grant.write, grant.admin) == (frozenset({Q}), frozenset(), False)
    assert len(ledger.grants()) == 1


def test_revoking_ends_the_grant_and_a_retry_writes_nothing(ledger: Ledger) -> None:
    key, other = _public_key(), _public_key()
    _grant(ledger, "ada", key, "ada")
    _grant(ledger, "bo", other, "bo")
    first = ledger.execute(RevokeAccess(key="revoke-ada", key_name="ada"))
    head = ledger.head()
    again = ledger.execute(RevokeAccess(key="revoke-ada", key_name="ada"))
    assert again == first
    assert ledger.head() == head
    assert ledger.grant_for(key) is None
    assert ledger.allowed_keys() == frozenset({other})


def test_a_grant_retried_under_its_key_is_the_same_receipt_and_another_is_refused(
        ledger: Ledger) -> None:
    key = _public_key()
    command = GrantAccess(key="g", key_name="ada", public_key=key, principal="ada")
    assert ledger.execute(command) == ledger.execute(command)
    with pytest.raises(KeyReusedError):
        ledger.execute(GrantAccess(key="g", key_name="ada", public_key=key, principal="eve"))


def _refused(ledger: Ledger, command: GrantAccess | RevokeAccess,
             kind: type[Exception], field: str | None = None) -> None:
    head = ledger.head()
    with pytest.raises(kind) as caught:
        ledger.execute(command)
    if field is not None:
        assert getattr(caught.value, "field", None) == field
    assert ledger.head() == head, "a refused command writes nothing"


def test_revoking_an_unknown_or_revoked_key_name_is_refused(ledger: Ledger) -> None:
    _refused(ledger, RevokeAccess(key="r1", key_name="nobody"), UnknownKeyError)
    _grant(ledger, "ada", _public_key(), "ada")
    ledger.execute(RevokeAccess(key="r2", key_name="ada"))
    with pytest.raises(UnknownKeyError, match="revoked at position 2"):
        ledger.execute(RevokeAccess(key="r3", key_name="ada"))


@pytest.mark.parametrize("public_key", [
    "short",
    "x" * 41,
    "~" * 40,  # not in the Z85 alphabet
    "abc def" + "a" * 33,
])
def test_a_public_key_that_is_not_z85_is_refused(ledger: Ledger, public_key: str) -> None:
    _refused(ledger, GrantAccess(key="g", key_name="ada", public_key=public_key,
                                 principal="ada"), InvalidCommandError, "$.public_key")


def test_a_value_past_the_curve_field_is_refused_as_no_public_key(ledger: Ledger) -> None:
    # 2**256 - 1: 40 valid Z85 characters, but no curve25519 public key has this value,
    # while a secret key may: this is what a pasted secret key looks like half the time.
    past = z85.encode(b"\xff" * 32).decode()
    with pytest.raises(InvalidCommandError, match="secret key") as caught:
        ledger.execute(GrantAccess(key="g", key_name="ada", public_key=past, principal="ada"))
    assert caught.value.field == "$.public_key"
    assert ledger.head() == 0


@pytest.mark.parametrize("principal", ["", " ", "ada\n", " ada"])
def test_an_empty_or_padded_principal_is_refused(ledger: Ledger, principal: str) -> None:
    _refused(ledger, GrantAccess(key="g", key_name="ada", public_key=_public_key(),
                                 principal=principal), InvalidCommandError, "$.principal")


@pytest.mark.parametrize("name", ["", "../ada", "ada laptop", ".hidden", "-x", "a/b"])
def test_a_key_name_that_is_no_file_name_is_refused(ledger: Ledger, name: str) -> None:
    _refused(ledger, GrantAccess(key="g", key_name=name, public_key=_public_key(),
                                 principal="ada"), InvalidCommandError, "$.key_name")


def test_a_project_that_is_no_digest_is_refused(ledger: Ledger) -> None:
    _refused(ledger, GrantAccess(key="g", key_name="ada", public_key=_public_key(),
                                 principal="ada", read=["my-project"]),
             InvalidCommandError, "$.read[0]")


def test_one_key_name_names_one_key(ledger: Ledger) -> None:
    _grant(ledger, "ada", _public_key(), "ada")
    _refused(ledger, GrantAccess(key="g2", key_name="ada", public_key=_public_key(),
                                 principal="ada"), KeyNameTakenError, "$.key_name")


def test_a_public_key_passes_the_credential_screen_in_its_own_field(ledger: Ledger) -> None:
    for i in range(50):  # any real key, whatever characters it happens to hold
        key = _public_key()
        _grant(ledger, f"k{i}", key, "ada")
        assert ledger.grant_for(key) is not None


def test_a_secret_key_pasted_into_any_field_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    public, secret = load_secret(new_keys(tmp_path, "ada")[1])
    line = f'secret-key = "{secret.decode()}"'
    for text in (secret.decode(), f"the key is {secret.decode()}.", line):
        assert credential_in(text) is not None, text
        _refused(ledger, GrantAccess(key="g", key_name="ada", public_key=public.decode(),
                                     principal=text), CredentialError)
        _refused(ledger, GrantAccess(key="g", key_name="ada", public_key=public.decode(),
                                     principal="ada", actor=text), CredentialError)
        with pytest.raises(CredentialError):
            ledger.observe_outcome(key="o", project=P, passed=False, signal="tool",
                                   task=f"connect with {text}")
    assert ledger.head() == 0


def test_ordinary_long_tokens_are_not_taken_for_keys() -> None:
    for text in ("commit 1f0c2d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e fixed it",
                 "see /usr/lib/python3/site-packages/lessonledger/commands/x.py",
                 "ThisIsAVeryLongCamelCaseIdentifierName12",
                 "-" * 40, "https://example.org/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o"):
        assert credential_in(text) is None, text


def test_no_raw_submission_carries_an_access_event() -> None:
    access = {tag_of(AccessGranted), tag_of(AccessRevoked)}
    assert access <= LEDGER_ONLY
    for kind in sorted(access):
        data: dict[str, Any] = {"event_id": "00000000-0000-4000-8000-000000000001",
                "stream": "00000000-0000-4000-8000-000000000002", "version": 0,
                "occurred_at": "2026-01-01T00:00:00Z", "actor": "eve",
                "event": {"type": kind, "key_name": "eve", "public_key": _public_key(),
                          **({"principal": "eve", "admin": True}
                             if kind == tag_of(AccessGranted) else {})}}
        with pytest.raises(InvalidEventError, match="access grant") as caught:
            parse_submission(json.dumps(data))
        assert caught.value.field == "$.event.type"
        # Its public key is left out of the screen, not its other fields.
        data["event"]["key_name"] = "x" * 60
        data["actor"] = "DB_PASSWORD=Tr0ub4dor-and-3"
        with pytest.raises(InvalidEventError, match="credential") as caught:
            parse_submission(json.dumps(data))
        assert caught.value.field == "$.actor"


def test_every_event_naming_a_principal_in_its_body_is_taken_by_erasing_it() -> None:
    for kind in EVENT_CLASSES:
        if "principal" in kind.__struct_fields__:
            assert tag_of(kind) in NAMES_A_PRINCIPAL, kind.__name__


def test_erasing_a_principal_takes_its_grants_and_their_revocations(ledger: Ledger) -> None:
    ada, bo = _public_key(), _public_key()
    _grant(ledger, "ada-old", ada, "ada")
    ledger.execute(RevokeAccess(key="r", key_name="ada-old"))
    _grant(ledger, "ada-laptop", _public_key(), "ada", read=[P])
    _grant(ledger, "bo", bo, "bo")
    erasure = ledger.erase(key="e", what="principal", subject="ada", reason="left")
    assert erasure.erased == [1, 2, 3]
    assert ledger.allowed_keys() == frozenset({bo})
    assert [g.key_name for g in ledger.grants()] == ["bo"]
    assert b"ada" not in ledger.runner["access"].dump()
    assert b"ada-laptop" not in ledger.runner["audit"].dump()


def test_an_erasure_never_brings_back_a_replaced_or_revoked_grant(ledger: Ledger) -> None:
    key = _public_key()
    _grant(ledger, "shared", key, "ada", admin=True)
    _grant(ledger, "shared", key, "bo")  # replaces ada's grant
    ledger.execute(RevokeAccess(key="r", key_name="shared"))
    ledger.erase(key="e", what="principal", subject="bo", reason="left")
    # bo's grant and the revocation are gone; ada's old admin grant must not return.
    assert ledger.grant_for(key) is None
    with open_ledger(ledger.home, sync=False) as again:
        assert again.grant_for(key) is None


def test_a_key_granted_again_after_an_erasure_writes_at_the_next_stream_version(
        ledger: Ledger) -> None:
    key = _public_key()
    _grant(ledger, "k", key, "ada")
    ledger.erase(key="e", what="principal", subject="ada", reason="left")
    _grant(ledger, "k", key, "bo")
    grant = ledger.grant_for(key)
    assert grant is not None
    assert grant.principal == "bo"
