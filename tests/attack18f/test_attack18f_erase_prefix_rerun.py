"""``erase --lesson PREFIX --key K`` retried after a ``--no-compact`` (or killed) run, once
a new live lesson shares the prefix.

The promise (README, "Erasure"): ``erase --lesson 3f2a`` takes an "id or unique prefix";
"A retry with the same ``--key`` (and the same subject, reason and ``--by``) erases
nothing more"; "``erase`` then compacts the home, so no byte of the erased content is
left in any of its files". The rerun is how a killed ``erase`` is finished (commit
d586a71: "erase --lesson/--outcome rerun compacts what the killed run left").

The CLI resolves the text through the view first (ops/erasure_commands.py
``_cmd_erase``, ``ledger.find_lesson``): the erased lesson has left the view, and a live
lesson that arrived since with the same prefix is "the unique" match
(commands/read_side.py ``find_lesson``: the erased lessons are looked at only when no
live one matches). So the retry, with every argument the same, is taken for the same key
with another subject: refused (exit 2), its compaction never run, the erased lesson's
text left in ``data.mdb``. Without ``--key`` the same rerun erases the newcomer instead.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import _attack18f_paths  # noqa: F401
from in_process import cli
from lessonledger.commands import Operation, open_ledger
from lessonledger.commands.handlers import command_id
from lessonledger.ledger.compaction import due
from lessonledger.ledger.ids import derived_id

P = "3f9a0c1b2d4e5f60"
OPS = [Operation(op="pytest:tests/", target="t", ok=False, error="no conftest"),
       Operation(op="pytest:root", target="t", ok=True, order=1)]


def _lesson_id(key: str, principal: str) -> str:
    return str(derived_id(command_id(key, principal), "lesson"))


def _propose(home: Path, key: str, text: str, outcome: uuid.UUID) -> str:
    with open_ledger(home, sync=False) as ledger:
        return str(ledger.propose_lesson(
            key=key, principal="alice", project=P, text=text, kind="prefer",
            avoid_op="pytest:tests/", prefer_op="pytest:root", target="t", source="user",
            evidence=[outcome]).ids["lesson_id"])


def _holding(home: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def test_an_erase_lesson_retried_with_its_key_and_prefix_finishes_the_first_run(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    secret = f"lesson-secret-{uuid.uuid4().hex}"
    with open_ledger(home, sync=False) as ledger:
        outcome = ledger.observe_outcome(key="o-1", project=P, principal="alice",
                                         passed=True, task="task", operations=OPS
                                         ).ids["outcome_id"]
    first = _propose(home, "l-1", f"Run from the root {secret}", outcome)
    prefix = first[:3]
    listed = cli("--home", str(home), "lessons", "list", "--all", "--json")
    assert listed.stdout.count(f'"{prefix}') == 1, "the prefix is unique when first run"
    erase = ["--home", str(home), "erase", "--lesson", prefix, "--reason", "request",
             "--key", "erase-it"]
    done = cli(*erase, "--no-compact")  # as a run killed before its compaction leaves it
    assert done.returncode == 0, done.stdout + done.stderr
    assert due(str(home))
    # Agents go on: a new lesson whose id happens to share the prefix.
    key = next(k for k in (f"l-new-{i}" for i in range(100_000))
               if _lesson_id(k, "alice").startswith(prefix))
    newcomer = _propose(home, key, "Run from the root, said again", outcome)
    assert newcomer.startswith(prefix)
    again = cli(*erase)
    # The prefix now names two lessons: refused in one line, writing nothing; the id in
    # full (as `erasures` lists it) finishes the first run.
    assert again.returncode == 2, again.stdout + again.stderr
    assert again.stderr.count("\n") == 1
    assert "an erased one" in again.stderr
    assert due(str(home))
    erase[erase.index(prefix)] = first
    again = cli(*erase)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not due(str(home)), "the retry left the first run's compaction undone"
    assert _holding(home, secret.encode()) == []
    shown = cli("--home", str(home), "lessons", "show", newcomer)
    assert shown.returncode == 0, "the newcomer was erased instead"


def test_an_erase_lesson_rerun_without_a_key_never_takes_another_lesson(
        tmp_path: Path) -> None:
    """The same without ``--key`` (the rerun d586a71 makes finish a killed run): the
    prefix names two lessons, one erased and one live, and the live one is erased."""
    home = tmp_path / "home"
    secret = f"lesson-secret-{uuid.uuid4().hex}"
    with open_ledger(home, sync=False) as ledger:
        outcome = ledger.observe_outcome(key="o-1", project=P, principal="alice",
                                         passed=True, task="task", operations=OPS
                                         ).ids["outcome_id"]
    first = _propose(home, "l-1", f"Run from the root {secret}", outcome)
    prefix = first[:3]
    erase = ["--home", str(home), "erase", "--lesson", prefix, "--reason", "request"]
    assert cli(*erase, "--no-compact").returncode == 0
    key = next(k for k in (f"l-new-{i}" for i in range(100_000))
               if _lesson_id(k, "alice").startswith(prefix))
    newcomer = _propose(home, key, "Run from the root, said again", outcome)
    cli(*erase)
    shown = cli("--home", str(home), "lessons", "show", newcomer)
    assert shown.returncode == 0, "the rerun erased the newcomer: " + shown.stderr
