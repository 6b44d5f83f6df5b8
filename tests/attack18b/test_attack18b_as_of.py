"""attack18b: ``--as-of TIME`` answers as the ledger stood then, never half a command.

DESIGN §5: "Queries accept `--as-of POSITION|TIME`, answering as the ledger stood then".
DESIGN §2: a command is "turned into events that are appended atomically. Nothing
half-written is ever visible"; README: "A command, its events and everything its
policies decide are one write transaction".

An outcome and what its policies decide are one transaction, but they are appended in
two calls with two different ``recorded_at`` (the outcome's, then its policies' a few
hundred microseconds later). ``position_at`` maps a TIME between them to the outcome's
own position, so ``check --as-of TIME`` shows the outcome's failure counted while the
lesson it contradicted is still at its old confidence and not in doubt: a state no
reader ever saw (before the commit: no failure; after it: the lesson at 0.25, in doubt).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _attack18b_agent import P1, P2, PREFER, TARGET, Agent, day, fail, ok
from lessonledger.commands import open_ledger

CLI = str(Path(sys.executable).with_name("lessonledger"))


def _check(home: Path, as_of: str) -> str:
    done = subprocess.run([CLI, "--home", str(home), "check", "--project", P1, PREFER,
                           TARGET, "--as-of", as_of],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_check_as_of_a_time_inside_a_commands_transaction_is_a_committed_state(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lid = agent.learn(P1, "s1", when=day(0))                       # positions 1-2
        agent.outcome(P1, "s2", [fail(PREFER, "exit status 2")], when=day(1),
                      in_play=[lid], passed=False)                    # 3, and 4 decided
        led.flush()
        records = led.log.read(1)
    assert [r.envelope.type for r in records] == [
        "outcome.observed", "lesson.proposed", "outcome.observed", "lesson.contradicted"]
    observed, decided = records[2].envelope.recorded_at, records[3].envelope.recorded_at
    # One transaction, one recorded time: a time falls before it or after all of it.
    assert observed == decided
    committed = {_check(tmp_path, "2"), _check(tmp_path, "4")}
    for micros in (observed // 1000 - 1, -(-observed // 1000), observed // 1000 + 1):
        when = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)).isoformat()
        assert _check(tmp_path, when) in committed, (when, committed)


def test_a_partial_import_does_not_end_inside_a_commands_transaction(tmp_path: Path) -> None:
    """The same cut, made permanent: README "Export, import": an import takes "one of
    positions 1 to M (`--to M`)". Cut at an outcome whose lesson (and promotion) its own
    transaction also wrote, the new home holds that outcome with nothing its policies
    decided, and a ledger opened on it never decides it either: P2's task taught no
    lesson, in a home that "is" the source as of M. Either refuse a cut inside a
    transaction (one line, exit 2) or hold whole transactions only."""
    source, dump, target = tmp_path / "src", tmp_path / "all.jsonl", tmp_path / "dst"
    with open_ledger(source, sync=False) as led:
        agent = Agent(led)
        agent.learn(P1, "s1", when=day(0))       # 1 outcome, 2 lesson
        agent.outcome(P2, "s2", [fail(), ok()], when=day(1))  # 3 outcome; 4-6 decided
        assert led.log.head() == 6
        assert led.lessons(P2, record=False) != []
    exported = subprocess.run([CLI, "--home", str(source), "export", "--include-envelopes",
                               "--to", "3", "-o", str(dump)],
                              capture_output=True, text=True, timeout=60, check=False)
    if exported.returncode == 2:
        assert exported.stderr.count("\n") == 1, exported.stderr
        assert "inside a transaction" in exported.stderr
        assert not dump.exists()
        return  # refused at the cut, in one line: fine
    assert exported.returncode == 0, exported.stderr
    imported = subprocess.run([CLI, "import", str(dump), "--into", str(target)],
                              capture_output=True, text=True, timeout=60, check=False)
    if imported.returncode == 2:
        return  # refused, in one line: fine
    assert imported.returncode == 0, imported.stderr
    with open_ledger(target, sync=False) as led:
        led.catch_up()
        assert led.lessons(P2, record=False) != [], (
            "P2's outcome is in the home, what its transaction decided is not")
