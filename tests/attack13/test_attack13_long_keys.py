"""An outcome whose failed operation has a long op and target key breaks the home (attack13).

``Operation.op`` and ``Operation.target`` are each ``Key`` (up to 512 characters), and
such an outcome is accepted. The lesson view then keeps a failure row keyed by project,
op and target: over LMDB's 511-byte key limit, so every later save of the views raises
``lmdb.BadValsizeError``. The outcome statistics key an operation's row by project and
op too, so one successful operation with a 500-character op breaks the home the same way.
Found while building a large body for the residue tests. Every
test here FAILS on c9b9ced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import lmdb
import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.ledger.errors import LessonLedgerError

P = "3f9a0c1b2d4e5f60"
LONG_OP, LONG_TARGET = "o" * 300, "t" * 300  # each well inside Key's 512


def _cli(home: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           *argv], input=stdin, capture_output=True, text=True, timeout=120)


def _observe_line(key: str, principal: str, task: str, *, long: bool) -> str:
    op = {"op": LONG_OP, "target": LONG_TARGET} if long else {"op": "make", "target": "b"}
    return json.dumps({"command": "observe_outcome", "key": key, "principal": principal,
                       "project": P, "passed": False, "task": task,
                       "operations": [{**op, "ok": False, "error": "no rule", "order": 0}]})


def _head(home: Path) -> int:
    return int(json.loads(_cli(home, "stats", "--json").stdout)["head"])


@pytest.mark.parametrize("operation", [
    Operation(op=LONG_OP, target=LONG_TARGET, ok=False, error="no rule"),
    Operation(op="o" * 500, target="tests", ok=True)], ids=["failed-300+300", "ok-500"])
def test_a_ledger_with_a_long_keyed_operation_still_closes(tmp_path: Path,
                                                           operation: Operation) -> None:
    """FAILED on c9b9ced: the outcome is taken, and then close() raises lmdb.BadValsizeError (an
    untyped storage error) in this process and in every process that opens the home."""
    home = tmp_path / "home"
    try:
        with open_ledger(home, sync=False) as ledger:
            ledger.observe_outcome(key="k", project=P, passed=False, operations=[operation])
    except LessonLedgerError:
        # Refused with a typed error is fine, as long as nothing was written.
        with open_ledger(home, sync=False) as ledger:
            assert ledger.log.head() == 0
        return
    except lmdb.Error as e:
        pytest.fail(f"accepted, then the home cannot be closed: {e!r}")
    with open_ledger(home, sync=False) as ledger:  # and it opens and closes again
        ledger.observe_outcome(key="k2", project=P, passed=True)


def test_publish_does_not_say_nothing_was_committed_when_it_was(tmp_path: Path) -> None:
    """FAILED on c9b9ced: exit 1, "the store failed ... nothing of the failed step was committed",
    yet the outcome is in the log (head 0 -> 1)."""
    home = tmp_path / "home"
    assert _cli(home, "init").returncode == 0
    done = _cli(home, "publish", "-", stdin=_observe_line("k", "alice", "t", long=True))
    head = _head(home)
    if done.returncode == 0:
        assert head == 1
    else:
        assert head == 0, (f"exit {done.returncode} ({done.stderr.strip()}), but the "
                           f"head moved to {head}")


def test_erasure_still_works_on_a_home_holding_a_long_keyed_failure(tmp_path: Path) -> None:
    """FAILED on c9b9ced: once alice's long-keyed outcome is on file, `lessonledger erase
    --principal bob` exits 1 (the store failed) and bob's task stays in the log: no one can
    be erased from this home any more."""
    home = tmp_path / "home"
    assert _cli(home, "init").returncode == 0
    _cli(home, "publish", "-", stdin=_observe_line("a", "alice", "alice's task", long=True))
    secret = "BOB-PRIVATE-TASK-7f3c9e21d4b5a608"
    _cli(home, "publish", "-", stdin=_observe_line("b", "bob", secret, long=False))
    assert secret.encode() in (home / "data.mdb").read_bytes()
    erased = _cli(home, "erase", "--principal", "bob", "--reason", "request", "--json")
    assert erased.returncode == 0, erased.stderr
    assert secret.encode() not in (home / "data.mdb").read_bytes()


def test_the_doors_refuse_a_string_too_long_to_key_a_view_by(tmp_path: Path) -> None:
    """A command, a raw submission and a hand-built one are refused alike, naming the
    field: an op and target over KEYED_BYTES together, or a principal of 150 three-byte
    characters (inside Label's 200 characters, but 450 bytes)."""
    import msgspec
    from lessonledger.commands.errors import InvalidCommandError
    from lessonledger.ledger.errors import InvalidEventError
    from lessonledger.ledger.events import KEYED_BYTES, OutcomeObserved
    from lessonledger.ledger.submission import Submission, parse_submission

    op = Operation(op="o" * 200, target="t" * (KEYED_BYTES - 199), ok=False, error="x")
    wide = "\u20ac" * 150
    with open_ledger(tmp_path / "home", sync=False) as ledger:
        with pytest.raises(InvalidCommandError) as refused:
            ledger.observe_outcome(key="k", project=P, passed=False, operations=[op])
        assert refused.value.field == "$.operations[0].target"
        with pytest.raises(InvalidCommandError) as refused:
            ledger.observe_outcome(key="k", project=P, passed=True, principal=wide)
        assert refused.value.field == "$.principal"
        event = OutcomeObserved(outcome_id=uuid4(), project=P, passed=False, signal="tool",
                                operations=[op])
        eid = uuid4()
        raw = {"event_id": str(eid), "stream": str(eid), "version": 0, "actor": "pub",
               "occurred_at": "2026-12-01T12:00:00Z", "event": msgspec.to_builtins(event)}
        with pytest.raises(InvalidEventError) as bad:
            parse_submission(msgspec.json.encode(raw))
        assert bad.value.field == "$.event.operations[0].target"
        with pytest.raises(InvalidEventError) as bad:
            parse_submission(msgspec.json.encode({**raw, "session": wide,
                                                  "event": {**raw["event"], "operations": []}}))
        assert bad.value.field == "$.session"
        (result,) = ledger.execute_each([msgspec.convert(raw, Submission)])
        assert isinstance(result, InvalidEventError)
        assert ledger.log.head() == 0
        # At the bound exactly, it is taken, saved and reopened.
        fits = Operation(op="o" * 200, target="t" * (KEYED_BYTES - 200), ok=False, error="x")
        ledger.observe_outcome(key="k", project=P, passed=False, operations=[fits],
                               principal="\u20ac" * (KEYED_BYTES // 3))
    with open_ledger(tmp_path / "home", sync=False) as ledger:
        assert ledger.log.head() >= 1
