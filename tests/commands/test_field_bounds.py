"""Review of issue #10 (F1): a fingerprint's names and values are bounded, checked first.

A fingerprint is a tool's name and version (``{"pytest": "8.1"}``): names of at most 200
characters, values of at most 512, as :class:`DeclareEnvironmentChange` has always
bounded its ``component`` and ``new``. One outcome with a 100 kB value made the
credential check run for seconds; a bound is checked before any pattern is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import CredentialError, InvalidCommandError
from lessonledger.commands.messages import (
    ObserveOutcome,
    ProposeLesson,
    checked_command,
    command_from,
    decode_command,
)
from lessonledger.ledger import InvalidEventError
from lessonledger.ledger.events import OutcomeObserved, decode_event, encode_event
from lessonledger.ledger.submission import parse_submission

P = "3f9a0c1b2d4e5f60"
SECRET = "DB_PASSWORD=Tr0ub4dor-and-3 "
OUTCOME: dict[str, Any] = {"key": "k", "project": P, "passed": True}
LESSON: dict[str, Any] = {"key": "l", "project": P, "text": "avoid x", "kind": "avoid",
                          "avoid_op": "x", "target": "t"}
TOO_LONG = [{"tool": "x" * 513}, {"n" * 201: "1.0"}, {"tool": SECRET * 40},
            {"tool": "x" * 100_000}]


@pytest.mark.parametrize("fields", [OUTCOME, LESSON])
@pytest.mark.parametrize("fingerprint", TOO_LONG)
def test_a_long_fingerprint_name_or_value_is_refused_by_its_bound(
        fields: dict[str, Any], fingerprint: dict[str, str]) -> None:
    kind = ObserveOutcome if "passed" in fields else ProposeLesson
    doc = fields | {"command": kind.__struct_config__.tag, "fingerprint": fingerprint}
    with pytest.raises(msgspec.ValidationError, match=r"\$\.fingerprint"):
        decode_command(json.dumps(doc))
    with pytest.raises(InvalidCommandError) as refused:
        command_from(fields | {"fingerprint": fingerprint}, kind)
    assert refused.value.field in ("$.fingerprint", "$.fingerprint[...]")
    by_hand = kind(**fields | {"fingerprint": fingerprint})
    with pytest.raises(InvalidCommandError) as refused:
        checked_command(by_hand)
    assert refused.value.field in ("$.fingerprint", "$.fingerprint[...]")


def test_the_longest_fingerprint_is_accepted(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        receipt = ledger.observe_outcome(**OUTCOME, fingerprint={"n" * 200: "v" * 512})
        assert receipt.positions == [1]


def test_a_long_secret_fingerprint_is_refused_for_its_length_before_any_pattern(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        start = time.perf_counter()
        with pytest.raises(InvalidCommandError):
            ledger.observe_outcome(**OUTCOME, fingerprint={"tool": SECRET * 4000})
        assert time.perf_counter() - start < 1.0
        assert ledger.log.head() == 0


def _submission(fingerprint: dict[str, str]) -> bytes:
    return json.dumps({
        "event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
        "occurred_at": "2026-11-30T00:00:00Z", "actor": "a",
        "event": {"type": "outcome.observed", "outcome_id": str(uuid4()), "project": P,
                  "passed": True, "signal": "verification", "fingerprint": fingerprint}}
    ).encode()


@pytest.mark.parametrize("fingerprint", TOO_LONG)
def test_a_raw_submission_bounds_a_fingerprint_before_its_credential_check(
        fingerprint: dict[str, str]) -> None:
    with pytest.raises(InvalidEventError) as refused:
        parse_submission(_submission(fingerprint))
    assert refused.value.field.startswith("$.event.fingerprint")
    assert parse_submission(_submission({"n" * 200: "v" * 512}))


def test_an_event_stored_with_a_long_fingerprint_still_decodes() -> None:
    """The bound is on what comes in, not on the catalogue: old logs keep decoding."""
    event = OutcomeObserved(outcome_id=uuid4(), project=P, passed=True,
                            signal="verification", fingerprint={"tool": "x" * 5000})
    assert decode_event(encode_event(event)) == event


HOLDER = """
import sys, time, lmdb
env = lmdb.open(sys.argv[1], max_dbs=128, map_size=64 << 30)
txn = env.begin(write=True)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
txn.abort()
"""


def test_a_refused_command_is_refused_while_another_process_holds_the_write_lock(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        ledger.observe_outcome(**OUTCOME)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "3"],
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        start = time.perf_counter()
        with pytest.raises(InvalidCommandError):
            ledger.observe_outcome(**OUTCOME | {"key": "k2"},
                                   fingerprint={"tool": "x" * 100_000})
        with pytest.raises(CredentialError):
            ledger.observe_outcome(**OUTCOME | {"key": "k3"}, task=SECRET)
        assert time.perf_counter() - start < 1.5
        holder.communicate(timeout=30)
