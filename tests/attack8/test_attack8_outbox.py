"""A replica's ``publish`` queues commands in its outbox (wave 5, attack8).

The outbox is stored in the replica's home, so a command is held to the same checks the
ledger runs before it writes: a credential in any field, or a field past its bound, is
refused in one line with exit code 2, and no byte of the home changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import (
    BatchRefusedError,
    CredentialError,
    InvalidCommandError,
)
from lessonledger.ops.cli import main
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.replica import prepare_clone, pull, queue_commands
from lessonledger.sync.service import SyncService

P = "3f9a0c1b2d4e5f60"
AWS = "AKIAZ3MQ7XWPL4K2HJQE"


def _replica(tmp_path: Path) -> Path:
    replica = tmp_path / "replica"
    with open_ledger(tmp_path / "hub", sync=False) as hub:
        prepare_clone("local", replica, "laptop")
        pull(replica, LocalExchange(SyncService(hub), ""), sync=False)
    return replica


def _files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file()}


def _line(**fields: object) -> str:
    return json.dumps({"command": "observe_outcome", "key": "k1", "project": P,
                       "passed": True, **fields})


@pytest.mark.parametrize(("fields", "named"), [
    ({"task": f"deploy with {AWS}"}, "$.task"),
    ({"session": "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0"}, "$.session"),
    ({"operations": [{"op": "git push", "target": "origin", "ok": False,
                      "error": "https://ada:hunter2pass@git.example/r.git refused"}]},
     "$.operations[0].error"),
])
def test_publish_on_a_replica_refuses_a_credential_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, object],
        named: str) -> None:
    replica = _replica(tmp_path)
    commands = tmp_path / "c.jsonl"
    commands.write_text(_line(key="fine", task="ok") + "\n" + _line(**fields) + "\n")
    before = _files(replica)
    code = main(["--home", str(replica), "publish", str(commands)])
    out, err = capsys.readouterr()
    assert code == 2, out
    assert err.count("\n") == 1
    assert named in err
    assert "line 2" in err
    assert _files(replica) == before


def test_queue_commands_refuses_what_the_ledger_would(tmp_path: Path) -> None:
    replica = _replica(tmp_path)
    before = _files(replica)
    with pytest.raises(BatchRefusedError) as secret:
        queue_commands(replica, [_line(key="a").encode(), _line(task=f"key {AWS}").encode()],
                       sync=False)
    assert secret.value.index == 1
    assert isinstance(secret.value.cause, CredentialError)
    with pytest.raises(BatchRefusedError) as bound:
        queue_commands(replica, [_line(operations=[{"op": "", "target": "t", "ok": True}])
                                 .encode()], sync=False)
    assert isinstance(bound.value.cause, InvalidCommandError)
    assert _files(replica) == before
