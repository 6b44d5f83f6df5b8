"""A ``clone --fold background`` SIGKILLed while writing a pack leaves ``<n>.<pid>.partial``.

The promise (README, "Erasure"): "``erase`` then compacts the home (below), so no byte of
the erased content is left in any of its files"; "a replica made by ``clone`` applies the
erasure at its next ``pull`` (and acknowledges it)"; and ledger/packs.py: the ``.partial``
files of writers killed mid-write "may hold bodies an erasure later takes: none may stay".

The ``.partial`` files are removed only by ``unpack``, which a writable open runs only
when a *whole* pack file is pending (lmdb_env._lay_out_packs: ``if pending(home)``). A
clone killed before its first rename, finished by ``pull`` (or ``clone`` with the
default ``--fold now``), never has a whole pack: the ``.partial`` stays for good, and the
replica acknowledges an erasure while that file still holds the erased bodies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import _attack18f_paths  # noqa: F401
import pytest
from lessonledger.commands import open_ledger
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.replica import pull
from lessonledger.sync.service import SyncService
from lessonledger.sync.snapshots import erasures
from residue import windows, windows_left
from sync_workload import fill

#: Clones the hub (argv[1]) into argv[2] without folding, one chunk a file, SIGKILLing
#: itself just as the argv[3]-th (default: first) pack file would be renamed into place:
#: what a kill at that step leaves.
_KILLED_CLONE = """
import os, signal, sys
from lessonledger.commands import open_ledger
from lessonledger.sync.exchange import LocalExchange
from lessonledger.sync.replica import prepare_clone, pull
from lessonledger.sync.service import SyncService

from lessonledger.sync import replica as replica_module

replica_module.BATCH_BYTES = 1  # each chunk commits alone: a file each
renames = int(sys.argv[3]) if len(sys.argv) > 3 else 1
real = os.replace
def dying(src, dst, *args, **kwargs):
    global renames
    if ".packs" in str(dst):
        renames -= 1
        if renames == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)
os.replace = dying
with open_ledger(sys.argv[1], sync=False) as ledger:
    prepare_clone("local", sys.argv[2], "r1")
    pull(sys.argv[2], LocalExchange(SyncService(ledger), "r1"), sync=False, fold=False)
print("not killed")
"""

TEXTS: dict[str, list[str]] = {}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("template") / "hub"
    with open_ledger(path, sync=False) as ledger:
        texts = fill(ledger, 300)
    return path, texts


@pytest.fixture
def hub(template: tuple[Path, list[str]], tmp_path: Path) -> str:
    path = str(tmp_path / "hub")
    shutil.copytree(template[0], path)
    TEXTS[path] = template[1]
    return path


def _bobs(hub: str) -> set[bytes]:
    bobs = windows([t.encode() for t in TEXTS[hub] if t.startswith("bob ")])
    return bobs - windows([t.encode() for t in TEXTS[hub] if not t.startswith("bob ")])


def _killed_clone(hub: str, replica: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _KILLED_CLONE, hub, str(replica)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)
    left = sorted(os.listdir(replica / "ledger.packs"))
    assert left, "the kill left no file"
    assert all(name.endswith(".partial") for name in left), left
    return left


@pytest.mark.parametrize("erase_first", [False, True])
def test_a_partial_pack_of_a_killed_clone_is_gone_once_the_replica_applies_an_erasure(
        hub: str, tmp_path: Path, erase_first: bool) -> None:
    replica = tmp_path / "r1"
    _killed_clone(hub, replica)
    bobs = _bobs(hub)
    with open_ledger(hub, sync=False) as ledger:
        if erase_first:  # erased before the replica finishes its clone
            gone = ledger.erase(key="erase-bob", what="principal", subject="bob",
                                reason="asked")
        # The clone finished by a pull (the default: folding), as after any failed clone.
        pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        if not erase_first:
            gone = ledger.erase(key="erase-bob", what="principal", subject="bob",
                                reason="asked")
        result = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        assert result.pending == []
        assert gone.position in result.erasures + (
            [gone.position] if erase_first else [])
    # The replica acknowledged the erasure: it says it holds none of it.
    assert [r.acked_by for r in erasures(hub) if r.position == gone.position] == [["r1"]]
    left = windows_left(str(replica), bobs)
    assert not left, left


_IN_A_PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                       '"$0" "$@"; true']  # sh stays pid 1: the clone is pid 2 in there


def test_a_partial_pack_named_for_a_pid_alive_here_is_gone_once_the_replica_erases(
        hub: str, tmp_path: Path) -> None:
    """The clone killed in a container (a pid namespace of its own: pid 2 in there),
    after two whole pack files; the replica then pulled on the host, where pid 2 is a
    live process (kthreadd), so ``_remove_abandoned`` takes the ``.partial`` for a writer
    "still at it" and keeps it for good. The whole files are laid out (unpack runs)."""
    replica = tmp_path / "r1"
    argv = [*_IN_A_PID_NAMESPACE, sys.executable, "-c", _KILLED_CLONE, hub, str(replica), "3"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              check=False)
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if "unshare" in proc.stderr:
        pytest.skip(f"cannot make a pid namespace here: {proc.stderr.strip()}")
    names = sorted(os.listdir(replica / "ledger.packs"))
    partial = [n for n in names if n.endswith(".partial")]
    assert len(names) == 3, (names, proc.stderr)
    assert len(partial) == 1, names
    writer = int(partial[0].rsplit(".", 2)[1])
    os.kill(writer, 0)  # the precondition: a process of that pid is alive out here
    bobs = _bobs(hub)
    with open_ledger(hub, sync=False) as ledger:
        pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        gone = ledger.erase(key="erase-bob", what="principal", subject="bob",
                            reason="asked")
        result = pull(replica, LocalExchange(SyncService(ledger), "r1"), sync=False)
        assert result.erasures == [gone.position]
    assert [r.acked_by for r in erasures(hub) if r.position == gone.position] == [["r1"]]
    left = windows_left(str(replica), bobs)
    assert not left, left
