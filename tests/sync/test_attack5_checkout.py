"""Attacks on checkout as disaster recovery (wave 3, attack5).

A checkout of a snapshot taken before an erasure leaves the erased bodies out and
records their positions as ``erased_later``: no ``Erased`` record in its log names them.
The checkout is a home of its own, so it may become the hub again (that is what disaster
recovery is for); its replicas and its own checkouts must then know those positions for
what they are, or their ``verify`` calls the erasure damage.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from hubtools import hub, lessonledger
from in_process import cli
from lessonledger.commands import open_ledger
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.replica import prepare_clone, pull
from lessonledger.sync.service import SyncService
from lessonledger.sync.snapshots import checkout, take_snapshot
from sync_workload import fill

#: Checkout, snapshot, verify and lessons run by main() in this process: they are about
#: what lands in the homes. The clone from the restored hub stays a process of its own
#: talking to the hub's (:func:`_process`).
_cli = cli


def _process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([lessonledger(), *args], capture_output=True, text=True,
                          timeout=120)


def _restored(tmp_path: Path) -> tuple[Path, list[str]]:
    """A hub erased after its snapshot, checked out from that snapshot: (home, alice's)."""
    source = tmp_path / "source"
    with open_ledger(source, sync=False) as ledger:
        texts = fill(ledger, 12, principals=("alice", "bob"))
        take_snapshot(ledger, "main", "test")
        ledger.erase(key="gdpr", what="principal", subject="alice", reason="request")
    restored = tmp_path / "restored"
    done = checkout(source, "main", restored)
    assert done.erased_later > 0
    return restored, [t for t in texts if t.startswith("alice")]


def test_a_replica_of_a_hub_restored_by_checkout_verifies(tmp_path: Path) -> None:
    """The restored hub's clone lists the later-erased bodies as erased, not as damage."""
    restored, alice = _restored(tmp_path)
    assert _cli("--home", str(restored), "verify").returncode == 0
    assert _cli("--home", str(restored), "snapshot", "--name", "after").returncode == 0
    replica = tmp_path / "replica"
    with hub(restored, tmp_path / "hub.log") as served:
        cloned = _process("clone", served.endpoint, str(replica), "--timeout", "20", "--json")
        assert cloned.returncode == 0, cloned.stderr
    checked = _cli("--home", str(replica), "verify", "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = [json.loads(line) for line in checked.stdout.splitlines()]
    assert any(line.get("erased") for line in report), report
    for path in replica.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(t.encode()[:16] in data for t in alice), path
    # A checkout of that replica, or of the restored hub, inherits what they excuse.
    again = tmp_path / "again"
    take = _cli("--home", str(replica), "checkout", "after", "--into", str(again))
    assert take.returncode == 0, take.stderr
    assert _cli("--home", str(again), "verify").returncode == 0


#: A checkout in a process of its own, SIGKILLed once its second batch of records is
#: in: the copy commits in batches (two records each here), as a long log does.
_KILLED_MID_COPY = """
import os, signal, sys
from lessonledger.ledger.log import Writing
from lessonledger.sync import snapshots

snapshots._IMPORT_BATCH = 2
imported = Writing.import_records
batches = []

def import_then_die(self, rows, **kw):
    envelopes = imported(self, rows, **kw)
    batches.append(len(rows))
    if len(batches) == 2:
        self.transaction.commit()
        os.kill(os.getpid(), signal.SIGKILL)
    return envelopes

Writing.import_records = import_then_die
snapshots.checkout(sys.argv[1], "main", sys.argv[2])
"""


def test_a_checkout_killed_midway_leaves_no_home_and_can_be_run_again(
        tmp_path: Path) -> None:
    """It left a truncated home that verified ok, and refused a new checkout there."""
    source = tmp_path / "source"
    with open_ledger(source, sync=False) as ledger:
        fill(ledger, 12, principals=("alice", "bob"))
        taken = take_snapshot(ledger, "main", "test")
    into = tmp_path / "restored"
    killed = subprocess.run([sys.executable, "-c", _KILLED_MID_COPY, str(source), str(into)],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not into.exists() or not any(into.iterdir()), sorted(into.iterdir())
    again = _cli("--home", str(source), "checkout", "main", "--into", str(into), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["last"] == taken.snapshot.last
    assert _cli("--home", str(into), "verify").returncode == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_checkout_writes_nothing_to_the_home_it_restores(tmp_path: Path) -> None:
    """It created the ``sync`` tree in its source: a backup changed by a restore from it.

    And a backup no process writes to (``--read-only``; by itself on a read-only
    filesystem) is read without even a lock.
    """
    source = tmp_path / "source"
    with open_ledger(source, sync=False) as ledger:
        fill(ledger, 6)
        take_snapshot(ledger, "main", "test")
    backup = tmp_path / "backup"
    backup.mkdir()
    (backup / "data.mdb").write_bytes((source / "data.mdb").read_bytes())
    before = (source / "data.mdb").read_bytes()
    checkout(source, "main", tmp_path / "one")
    assert (source / "data.mdb").read_bytes() == before
    done = _cli("--home", str(backup), "checkout", "main", "--into", str(tmp_path / "two"),
                "--read-only")
    assert done.returncode == 0, done.stderr
    assert [p.name for p in backup.iterdir()] == ["data.mdb"]
    assert (backup / "data.mdb").read_bytes() == before
    assert _cli("--home", str(tmp_path / "two"), "verify").returncode == 0


def test_a_replica_behind_an_erasure_forgets_it_when_the_restored_hub_is_pulled(
        tmp_path: Path) -> None:
    """A replica that had alice's bodies, and never pulled her erasure before the hub was
    restored from an older snapshot, kept them for good: the restored hub's log holds no
    ``Erased`` record to send it, only which bodies a later erasure took."""
    source = tmp_path / "source"
    replica = tmp_path / "replica"
    with open_ledger(source, sync=False) as ledger:
        texts = fill(ledger, 12, principals=("alice", "bob"))
        alice = [t for t in texts if t.startswith("alice")]
        prepare_clone("local", replica, "r1")
        pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        fill(ledger, 4, seed=3, tag="later", principals=("bob",))
        take_snapshot(ledger, "main", "test")
        ledger.erase(key="gdpr", what="principal", subject="alice", reason="request")
    assert any(t.encode() in p.read_bytes() for t in alice for p in replica.rglob("*.mdb"))
    restored = tmp_path / "restored"
    checkout(source, "main", restored)
    with open_ledger(restored, sync=False) as ledger:
        done = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        assert done.head == ledger.log.head()
    for path in replica.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [t for t in alice if t.encode()[:16] in data], path
    checked = _cli("--home", str(replica), "verify")
    assert checked.returncode == 0, checked.stdout
    listed = _cli("--home", str(replica), "lessons", "list", "--all", "--json")
    assert "alice" not in listed.stdout


#: A checkout SIGKILLed right after its rename into place, before it removes its marker.
_KILLED_AFTER_RENAME = """
import os, signal, sys
from lessonledger.sync import snapshots

replace = os.replace

def replace_then_die(src, dst):
    replace(src, dst)
    if str(dst).endswith("restored"):
        os.kill(os.getpid(), signal.SIGKILL)

snapshots.os.replace = replace_then_die
snapshots.checkout(sys.argv[1], "main", sys.argv[2])
"""


def test_a_checkout_killed_after_its_rename_is_made_again(tmp_path: Path) -> None:
    """It left a whole home with its marker, which a rerun refused as not empty."""
    source = tmp_path / "source"
    with open_ledger(source, sync=False) as ledger:
        fill(ledger, 12, principals=("alice", "bob"))
        taken = take_snapshot(ledger, "main", "test")
    into = tmp_path / "restored"
    killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER_RENAME, str(source),
                             str(into)], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (into / "CHECKOUT-UNDER-WAY").is_file(), "the kill landed after the rename"
    again = _cli("--home", str(source), "checkout", "main", "--into", str(into), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["last"] == taken.snapshot.last
    assert not (into / "CHECKOUT-UNDER-WAY").exists()
    assert _cli("--home", str(into), "verify").returncode == 0
