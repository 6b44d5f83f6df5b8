"""Erasure residue at LMDB page boundaries, in every file of the home (attack13).

Stored bodies (16-byte salt and payload) are made exactly 4079, 4080 (one overflow page
less its 16-byte header), 4081, 4096, 8176, 8177 and 8192 bytes, plus one of about
730 kB (the largest an outcome can be without the long-key failure of
test_attack13_long_keys). A long-lived writer interleaves alice's and bob's events;
alice's lessons carry their own vectors, so the vector index holds them, and the views
are saved before the erasure. ``lessonledger erase`` (which compacts) then runs in
another process, and every file under the home is scanned for any 16-byte window of
what was erased (tests/residue.py).

GUARDS: every test here passes on c9b9ced (the controls show the scan sees the erased
bytes in data.mdb and in the vector index's files before the erasure).
"""

from __future__ import annotations

import random
import string
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import numpy as np
import pytest
from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.ledger.envelope import SALT_BYTES
from lessonledger.projections.embedder import DEFAULT_DIM
from residue import windows, windows_left

P = "3f9a0c1b2d4e5f60"
#: Lower-case words: random mixed-case runs are sometimes taken for credentials.
ALPHABET = string.ascii_lowercase
#: Stored body sizes at and around one and two 4 kB pages.
SIZES = (4079, 4080, 4081, 4096, 8176, 8177, 8192)


def _token(rng: random.Random, n: int) -> str:
    """``n`` characters: six-letter words, one space after each."""
    return "".join(" " if i % 7 == 6 else rng.choice(ALPHABET) for i in range(n))


def _ops(name: str, error: str) -> list[Operation]:
    return [Operation(op=f"{name}-op", target=f"{name}-target", ok=False, error=error),
            Operation(op=f"{name}-op-fixed", target=f"{name}-target", ok=True, order=1)]


def _stored(ledger: Ledger, position: int) -> int:
    (record,) = ledger.log.read(position, limit=1)
    assert record.payload is not None
    return len(record.payload) + SALT_BYTES


def _sized(ledger: Ledger, rng: random.Random, key: str, who: str, size: int,
           tokens: list[str]) -> UUID:
    """An outcome of ``who`` whose stored body is exactly ``size`` bytes."""
    error = _token(rng, 200)
    # The body grows byte for byte with the task (a str16 in msgpack from 256 on): the
    # same fields written to a scratch home give the rest of the body's size.
    task = _token(rng, 1000)
    fields: dict[str, Any] = {"principal": who, "session": f"{who}-s", "project": P,
                              "passed": True, "operations": _ops(key, error)}
    with open_ledger(f"{ledger.home}-probe", sync=False) as scratch:
        receipt = scratch.observe_outcome(key=key, task=task, **fields)
        base = _stored(scratch, receipt.positions[0]) - len(task)
    task = _token(rng, size - base)
    tokens += [task, error]
    receipt = ledger.observe_outcome(key=key, task=task, **fields)
    assert _stored(ledger, receipt.positions[0]) == size
    return receipt.ids["outcome_id"]


def _big(ledger: Ledger, rng: random.Random, key: str, who: str,
         tokens: list[str]) -> UUID:
    """An outcome of about 730 kB: 500 failures with long keys and errors, a long task."""
    ops: list[Operation] = []
    for i in range(500):
        op, target, error = _token(rng, 200), _token(rng, 200), _token(rng, 1024)
        tokens += [op, target, error]
        ops.append(Operation(op=op, target=target, ok=False, error=error, order=i))
    task = _token(rng, 8192)
    tokens.append(task)
    receipt = ledger.observe_outcome(key=key, principal=who, session=f"{who}-s",
                                     project=P, passed=True, task=task, operations=ops)
    assert _stored(ledger, receipt.positions[0]) > 700_000
    return receipt.ids["outcome_id"]


def _lesson(ledger: Ledger, rng: random.Random, key: str, who: str, cited: UUID,
            name: str, tokens: list[str], vectors: list[list[float]]) -> None:
    """A ``do`` lesson citing ``cited`` (outcome ``name``'s): not the loop's own
    ``prefer`` lesson, which would absorb it, so it stays active and in the index."""
    text = _token(rng, 1990)
    vector = [rng.uniform(-1, 1) for _ in range(DEFAULT_DIM)]
    tokens.append(text)
    vectors.append(vector)
    ledger.propose_lesson(key=key, principal=who, session=f"{who}-s", project=P,
                          text=text, kind="do", prefer_op=f"{name}-op-fixed",
                          target=f"{name}-target",
                          source="user", vector=vector, evidence=[cited])


def _vector_bytes(vector: list[float]) -> list[bytes]:
    as32 = np.asarray(vector, dtype=np.float32)
    unit = as32 / np.linalg.norm(as32)
    return [msgspec.msgpack.encode(vector), as32.tobytes(), unit.tobytes(),
            unit.astype(np.float16).tobytes()]


def _world(home: Path, seed: int) -> tuple[dict[str, list[str]], dict[str, list[bytes]],
                                           dict[str, list[UUID]]]:
    """alice's and bob's events, interleaved, by one long-lived writer; views saved."""
    rng = random.Random(seed)
    tokens: dict[str, list[str]] = {"alice": [], "bob": []}
    vectors: dict[str, list[list[float]]] = {"alice": [], "bob": []}
    outcomes: dict[str, list[UUID]] = {"alice": [], "bob": []}
    with open_ledger(home, sync=False) as ledger:
        for n, size in enumerate(SIZES):
            for who in ("alice", "bob"):
                made = _sized(ledger, rng, f"{who}-{n}", who, size, tokens[who])
                outcomes[who].append(made)
                if n % 2 == 0:
                    _lesson(ledger, rng, f"{who}-l{n}", who, made, f"{who}-{n}",
                            tokens[who], vectors[who])
        for who in ("alice", "bob"):
            outcomes[who].append(_big(ledger, rng, f"{who}-big", who, tokens[who]))
        ledger.save_view()
    assert (home / "vectors").is_dir(), "no vector index was saved: the scan would miss it"
    raw = {who: [t.encode() for t in tokens[who]] + [
        b for v in vectors[who] for b in _vector_bytes(v)] for who in tokens}
    return tokens, raw, outcomes


def _erase(home: Path, *argv: str) -> None:
    done = subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           "erase", *argv, "--reason", "data subject request", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("seed", [13])
def test_erasing_a_principal_leaves_no_window_in_any_file(tmp_path: Path, seed: int) -> None:
    home = tmp_path / "home"
    tokens, raw, _ = _world(home, seed)
    gone = windows(raw["alice"])
    # The control: before the erasure, the log, the saved views and the index hold them.
    before = windows_left(str(home), gone)
    assert "data.mdb" in before, before
    assert any(name.startswith("vectors") for name in before), before
    _erase(home, "--principal", "alice")
    assert windows_left(str(home), gone) == {}
    data = (home / "data.mdb").read_bytes()
    assert all(t.encode() in data for t in tokens["bob"][:10])


@pytest.mark.parametrize("which", [1, 3, 6, len(SIZES)])
def test_erasing_an_outcome_at_a_page_boundary_leaves_no_window(tmp_path: Path,
                                                                which: int) -> None:
    """Bob's outcome of stored size 4080, 4096, 8192 bytes or ~730 kB, erased alone."""
    home = tmp_path / "home"
    _, _, outcomes = _world(home, 100 + which)
    target = outcomes["bob"][which]
    with open_ledger(home, sync=False) as ledger:
        (record,) = [r for r in ledger.log.scan() if r.payload is not None
                     and r.envelope.type == "outcome.observed"
                     and str(target).encode() in r.payload]
        assert record.payload is not None
        body = record.payload
        others = [r.payload for r in ledger.log.scan()
                  if r.payload is not None and r.envelope.position != record.envelope.position]
    # Only what no other body repeats (field names, shared op keys) must go; nor the
    # outcome's id, which the Erased record names by design.
    gone = windows(body.split(str(target).encode())) - windows(others)
    assert len(gone) > 3000
    _erase(home, "--outcome", str(target))
    assert windows_left(str(home), gone) == {}
