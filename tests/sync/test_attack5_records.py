"""Secrets in the ledger's own records (wave 3, attack5).

A snapshot's name and origin and an erasure acknowledgement's replica name are chosen by
people and replicas, kept for good (these records name no principal or session, so no
erasure takes them) and sent to every replica whatever its grant. They were stored as
given: ``snapshot --name 'password=…'`` went to every replica, for ever.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lessonledger.commands import CredentialError, open_ledger
from lessonledger.ops.cli import main
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.protocol import Ack, Refused, decode_reply, encode
from lessonledger.sync.service import SyncService
from lessonledger.sync.snapshots import take_snapshot

SECRETS = ("password=Tr0ub4dor-and-3", "AKIAIOSFODNN7EXAMPLE")


@pytest.mark.parametrize("secret", SECRETS)
def test_a_snapshot_named_or_placed_by_a_secret_is_refused(secret: str, tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        ledger.observe_outcome(key="k", session="s", principal="p",
                               project="3f9a0c1b2d4e5f60", passed=True)
        head = ledger.log.head()
        with pytest.raises(CredentialError, match=r"\$\.name"):
            take_snapshot(ledger, secret, "vm")
        with pytest.raises(CredentialError, match=r"\$\.origin"):
            take_snapshot(ledger, "main", secret)
        assert ledger.log.head() == head


def test_an_acknowledgement_from_a_replica_named_by_a_secret_is_refused(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path / "h", sync=False) as ledger:
        ledger.observe_outcome(key="k", session="s", principal="alice",
                               project="3f9a0c1b2d4e5f60", passed=True)
        erased = ledger.erase(key="e", what="principal", subject="alice", reason="asked")
        head = ledger.log.head()
        exchange = LocalExchange(SyncService(ledger))
        reply = decode_reply(exchange.call(encode(Ack(SECRETS[0], erased.position))))
        assert isinstance(reply, Refused)
        assert "credential" in reply.message
        assert ledger.log.head() == head


def test_a_clone_named_by_a_secret_is_refused_before_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["clone", "tcp://127.0.0.1:9", str(tmp_path / "r"), "--name", SECRETS[0]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "credential" in err
    assert not (tmp_path / "r").exists()
