"""``erase --lesson`` / ``--outcome`` SIGKILLed between commit and compaction, run again.

The promise (README, "Erasure"): a retry with the same ``--key`` erases nothing more;
a killed ``erase`` run again completes, and afterwards no file of the home holds the
erased content (``tests/ops/test_erasure_crash.py`` and attack16's guard check it for
``--principal`` only; the same harness passes for ``--principal`` and ``--session``).

- ``--lesson`` (with or without ``--key``): the CLI resolves the id through the lesson
  view first (``ops/erasure_commands.py``, ``ledger.find_lesson``) and an erased lesson
  is no longer in it: the rerun is refused ("lesson … was erased at position N", exit 2)
  before the idempotency key or the compaction is reached.
- ``--outcome`` without ``--key``: the rerun is refused with ``UnknownOutcomeError``
  ("outcome … is already erased", exit 2), which ``_cmd_erase`` does not take for
  "erased by an earlier run: compact now", as it does ``NothingToEraseError``.

Either way the compaction the home itself records as due (its ``unswept`` tree) is never
run, and the erased text (for a lesson: reliably, its text in the views' old rows) stays
in ``data.mdb``'s free pages. ``lessonledger compact`` would sweep it; the rerun is what
the README and the guard tests name as the way to finish a killed ``erase``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import _attack18a_paths  # noqa: F401
import pytest
from in_process import cli
from lessonledger.commands import Operation, open_ledger
from lessonledger.ledger.compaction import due
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog

P = "3f9a0c1b2d4e5f60"
CLI = [str(Path(sys.executable).with_name("lessonledger"))]
ENV = {**os.environ, "LESSONLEDGER_SYNC": "os"}


class Base:
    def __init__(self, home: Path, lesson: str, outcome: str, lesson_secret: bytes,
                 outcome_secret: bytes) -> None:
        self.home, self.lesson, self.outcome = home, lesson, outcome
        self.secrets = {"lesson": lesson_secret, "outcome": outcome_secret}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """An outcome and a lesson, each with a secret of its own, and much else (so the
    compaction takes long enough to be caught)."""
    home = tmp_path_factory.mktemp("base") / "home"
    lesson_secret = f"lesson-secret-{uuid.uuid4().hex}"
    outcome_secret = f"outcome-secret-{uuid.uuid4().hex}"
    ops = [Operation(op="pytest:tests/", target="t", ok=False, error="no conftest"),
           Operation(op="pytest:root", target="t", ok=True, order=1)]
    with open_ledger(home, sync=False) as ledger:
        outcome = ledger.observe_outcome(key="o-1", project=P, principal="alice",
                                         passed=True, task=f"task {outcome_secret} " * 150,
                                         operations=ops).ids["outcome_id"]
        lesson = ledger.propose_lesson(
            key="l-1", principal="alice", project=P, text=f"Run from the root {lesson_secret}",
            kind="prefer", avoid_op="pytest:tests/", prefer_op="pytest:root", target="t",
            source="user", evidence=[outcome]).ids["lesson_id"]
        for i in range(1500):
            ledger.observe_outcome(key=f"bob-{i}", project=P, principal="bob", passed=True,
                                   task=f"bob task {i} " + "x" * 400)
    return Base(home, str(lesson), str(outcome), lesson_secret.encode(),
                outcome_secret.encode())


def _erasures(home: Path) -> int:
    lmdb_home = acquire(str(home))
    try:
        return sum(r.envelope.type == "erasure.erased"
                   for r in EventLog(lmdb_home, "ledger").scan())
    finally:
        release(lmdb_home)


def _holding(home: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def _kill_once_compacting(home: Path, argv: list[str]) -> None:
    """Run ``argv``; SIGKILL it the moment its compaction's temporary directory appears
    (the erasure is committed by then, the compacted file not yet swapped in)."""
    proc = subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if any(n.startswith(".compact-") for n in os.listdir(home)):
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize(("kind", "key"), [("lesson", True), ("lesson", False),
                                           ("outcome", False)])
def test_an_erase_killed_before_its_compaction_run_again_leaves_nothing(
        base: Base, tmp_path: Path, kind: str, key: bool) -> None:
    secret = base.secrets[kind]
    subject = base.lesson if kind == "lesson" else base.outcome
    erase = ["erase", f"--{kind}", subject, "--reason", "request",
             *(["--key", "erase-it"] if key else [])]
    for attempt in range(8):
        home = tmp_path / f"home-{attempt}"
        shutil.copytree(base.home, home)
        assert _holding(home, secret) == ["data.mdb"], "the control"
        _kill_once_compacting(home, [*CLI, "--home", str(home), *erase])
        if _erasures(home) == 1 and due(str(home)):
            break  # killed after the commit, before the compacted file was swapped in
        shutil.rmtree(home)
    else:
        pytest.fail("never killed between the commit and the compaction")
    assert cli("--home", str(home), "verify").returncode == 0  # the home is sound
    again = cli("--home", str(home), *erase)
    assert again.returncode == 0, again.stdout + again.stderr
    # The home's own record that deleted bytes may sit in free pages: swept by now.
    assert not due(str(home)), "the rerun left the erasure's compaction undone"
    assert _holding(home, secret) == [], "the erased text is still in the home's files"


def test_an_erase_lesson_retried_with_its_key_after_no_compact_compacts(
        base: Base, tmp_path: Path) -> None:
    """The same window without a kill: the first run did not compact (``--no-compact``),
    the retry with the same key is refused instead of finishing the job."""
    home = tmp_path / "home"
    shutil.copytree(base.home, home)
    erase = ["erase", "--lesson", base.lesson, "--reason", "request", "--key", "erase-it"]
    assert cli("--home", str(home), *erase, "--no-compact").returncode == 0
    again = cli("--home", str(home), *erase)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _holding(home, base.secrets["lesson"]) == []
