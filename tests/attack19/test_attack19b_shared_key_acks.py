"""Two replicas cloned with one key are one name at the hub: `erasures` says the erasure
reached "them" once one of them applied it.

The promise (issue 14, "Erasure on every replica": "A replica that applies a pulled
`Erased` ... acknowledges to the hub. `lessonledger erasures` on the hub lists each
erasure and which replicas have acknowledged it"; DESIGN §7: no byte of the erased
content remains "in any file of any replica").

With keys, the hub names a replica by its key's name (``service._as_key``) and records
an acknowledgement once per name (``_ack``: a name already listed is not recorded again).
A key on two replicas (a laptop and its backup, a clone made again elsewhere) is one
name: after one of them pulls the erasure, `erasures` shows it acknowledged and nothing
on the hub can show that the other still holds every byte of the erased session. The
second replica's own acknowledgement, when it comes, is dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _attack19_paths  # noqa: F401
import pytest
from hubtools import HubProcess, Keys, curve_hub, run_ok
from lessonledger.commands import Ledger

P = "3f9a0c1b2d4e5f60"
SECRET = b"SESSION-CONTENT-TO-ERASE-5f1c9a2e7b"


def _prepare(ledger: Ledger) -> None:
    ledger.observe_outcome(key="o1", principal="pat", session="s-erase", project=P,
                           passed=True, task=SECRET.decode())
    ledger.observe_outcome(key="o2", principal="pat", session="s-keep", project=P,
                           passed=True, task="kept")


@pytest.fixture
def keyed_hub(tmp_path: Path) -> Iterator[tuple[HubProcess, Keys, dict[str, str]]]:
    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P], "write": [P]}),
        "laptop": ("rita", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path / "hubbase", grants, admin="admin", prepare=_prepare) as (
            server, keys):
        env = {**os.environ, "LESSONLEDGER_SYNC": "os", "LESSONLEDGER_KEYS": str(keys.dir)}
        yield server, keys, env


def _holds(home: Path) -> bool:
    return any(SECRET[:16] in p.read_bytes() for p in home.rglob("*") if p.is_file())


def test_erasures_tell_two_replicas_of_one_key_apart(keyed_hub: Any, tmp_path: Path
                                                      ) -> None:
    server, keys, env = keyed_hub
    replicas = [tmp_path / "laptop", tmp_path / "backup"]
    for replica in replicas:
        run_ok("clone", server.endpoint, str(replica), "--key", str(keys.secret("laptop")),
            "--hub-key", str(keys.public("hub")), "--json", env=env)
        assert _holds(replica)  # the control
    with keys.client(server, "admin") as admin:
        admin.erase(key="erase-s", what="session", subject="s-erase", reason="t")
    run_ok("--home", str(replicas[0]), "pull", "--json", env=env)
    assert not _holds(replicas[0])
    assert _holds(replicas[1])  # the backup has not pulled: it holds the session still
    home = server.home
    listed = [json.loads(line) for line in run_ok(
        "--home", str(home), "erasures", "--json", env=env).stdout.splitlines()]
    one = listed[-1]["acked_by"]
    run_ok("--home", str(replicas[1]), "pull", "--json", env=env)
    assert not _holds(replicas[1])
    listed = [json.loads(line) for line in run_ok(
        "--home", str(home), "erasures", "--json", env=env).stdout.splitlines()]
    both = listed[-1]["acked_by"]
    # Which replicas acknowledged: one of two before the backup pulled, both after.
    assert one != both, (one, both)
