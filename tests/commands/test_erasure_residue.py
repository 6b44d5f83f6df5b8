"""No 16-byte window of erased content survives ``erase`` + ``compact``, in any file.

The attack that found the hole: a long-lived writer (an agent, writing for hours) does
many transactions, and LMDB recycles its page buffers without zeroing them, so the tail
of one body's overflow page can hold another body's old bytes; LMDB's compacting copy
then copied those tails along. Here writers stay open across many transactions, bodies
span 1 kB to 20 kB around page and overflow boundaries, principals and sessions
interleave, lessons carry their own vectors, and every erasure kind is tried. What is
erased is read back from the log itself (the bodies that are gone), so the test does not
restate the erasure rules; the scan then compares every 16-byte window of that content
with every offset of every file in the home.
"""

from __future__ import annotations

import random
import string
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.ledger.compaction import compact
from lessonledger.projections.embedder import DEFAULT_DIM
from residue import windows, windows_left

PROJECTS = ("3f9a0c1b2d4e5f60", "0123456789abcdef")
PRINCIPALS = ("alice", "bob", "carol")
#: Body sizes around LMDB's 4 kB page: the largest inline node (~2 kB), one overflow
#: page, and runs of 2 to 5 pages, each crossed from both sides.
SIZES = (1000, 1500, 1990, 2010, 2030, 2045, 2060, 2100, 3000, 3990, 4040, 4080, 4100,
         4200, 6100, 8100, 8150, 8200, 12250, 16350, 20000)
ALPHABET = string.ascii_letters + string.digits


def token(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(ALPHABET, k=n))


@dataclass
class World:
    """What the writers wrote: every unique token, and each lesson's own vector."""

    tokens: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    outcomes: list[UUID] = field(default_factory=list)
    #: Each outcome's project, and the operation that failed and the one that worked.
    tried: list[tuple[str, str, str]] = field(default_factory=list)
    lessons: list[UUID] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)


def outcome_fields(rng: random.Random, world: World, size: int, principal: str,
                   session: str, key: str) -> dict[str, Any]:
    """An outcome whose body is about ``size`` bytes of unique text: task and errors."""
    task = token(rng, min(size - 100, 8000))
    world.tokens.append(task)
    ops = []
    left = size - len(task)  # at least one failure, then the one that worked
    op, target = f"{principal}-op-{rng.randrange(3)}", f"{principal}-target-{rng.randrange(2)}"
    order = 0
    while left > 0:
        error = token(rng, min(left, 1000))
        world.tokens.append(error)
        ops.append(Operation(op=op, target=target, ok=False, error=error, order=order))
        left -= len(error)
        order += 1
    ops.append(Operation(op=f"{op}-fixed", target=target, ok=True, order=order))
    return {"key": key, "principal": principal, "session": session,
            "project": rng.choice(PROJECTS), "passed": True, "task": task,
            "operations": ops}


def write(ledger: Ledger, rng: random.Random, world: World, steps: int, tag: str) -> None:
    """One long-lived writer: ``steps`` transactions, principals and sessions interleaved."""
    for i in range(steps):
        principal = rng.choice(PRINCIPALS)
        session = f"{principal}-{tag}-s{rng.randrange(3)}"
        world.sessions.append(session)
        if i % 3 == 2 and world.outcomes:
            text = token(rng, rng.choice((200, 1200, 1990)))
            vector = [rng.uniform(-1, 1) for _ in range(DEFAULT_DIM)]
            world.tokens.append(text)
            world.vectors.append(vector)
            cited = rng.randrange(len(world.outcomes))
            project, op, target = world.tried[cited]
            receipt = ledger.propose_lesson(
                key=f"{tag}-l{i}", principal=principal, session=session, project=project,
                text=text, kind="prefer", avoid_op=op, prefer_op=f"{op}-fixed",
                target=target, source="user", vector=vector,
                evidence=[world.outcomes[cited]])
            world.lessons.append(receipt.ids["lesson_id"])
        else:
            fields = outcome_fields(rng, world, rng.choice(SIZES), principal, session,
                                    f"{tag}-o{i}")
            receipt = ledger.observe_outcome(**fields)
            world.outcomes.append(receipt.ids["outcome_id"])
            first = fields["operations"][0]
            world.tried.append((fields["project"], first.op, first.target))


def vector_bytes(vector: list[float]) -> list[bytes]:
    """The ways a vector can sit in a file: in its body, and as the index stores it."""
    unit = np.asarray(vector, dtype=np.float32)
    unit /= np.linalg.norm(unit)
    return [msgspec.msgpack.encode(vector), np.asarray(vector, np.float32).tobytes(),
            unit.tobytes(), unit.astype(np.float16).tobytes()]


def erased_content(ledger: Ledger, before: dict[int, bytes | None],
                   world: World) -> tuple[set[bytes], list[bytes]]:
    """The windows of what the erasure took, and the tokens it must have kept.

    Content is erased when a body holding it is gone and no kept body holds it too.
    """
    after = {r.envelope.position: r.payload for r in ledger.log.scan()}
    gone = [before[p] or b"" for p, body in after.items() if body is None and before.get(p)]
    kept = [body for body in after.values() if body is not None]
    erased, still = [], []
    tokens = [t.encode() for t in world.tokens]
    # A vector is matched by its body encoding; the index's encodings go with it.
    vectors = [vector_bytes(v) for v in world.vectors]
    for piece, ways in [*((t, [t]) for t in tokens), *((v[0], v) for v in vectors)]:
        probe = piece[:64]
        in_gone = any(probe in body for body in gone)
        in_kept = any(probe in body for body in kept)
        if in_gone and not in_kept:
            erased.extend(ways)
        elif in_kept and ways == [piece]:
            still.append(piece)
    return windows(erased), still


def build(home: str, seed: int, steps: int) -> World:
    """Two writers, one after the other, each open across all its transactions."""
    rng = random.Random(seed)
    world = World()
    for writer in ("w1", "w2"):
        with open_ledger(home, sync=False) as ledger:
            write(ledger, rng, world, steps, f"{seed}-{writer}")
    return world


def subject(kind: str, world: World, rng: random.Random) -> str:
    return {"principal": lambda: rng.choice(PRINCIPALS),
            "session": lambda: rng.choice(world.sessions),
            "lesson": lambda: str(rng.choice(world.lessons)),
            "outcome": lambda: str(rng.choice(world.outcomes))}[kind]()


def erase_then_scan(home: str, world: World, kind: str, what: str, *, control: bool) -> None:
    """Erase in a long-lived ledger, check the control, compact, and scan every file.

    The control (the erased bytes are still in the file before compaction) holds for a
    home of some size; in a small one LMDB may already have reused every freed page.
    """
    with open_ledger(home, sync=False) as ledger:
        before = {r.envelope.position: r.payload for r in ledger.log.scan()}
        # The writer keeps writing around the erasure, as an agent would.
        ledger.observe_outcome(key=f"pre-{what}", principal="bob", session="late",
                               project=PROJECTS[0], passed=True, task="x" * 3000)
        erasure = ledger.erase(key=f"erase-{kind}-{what}", what=kind, subject=what,
                               reason="data subject request", actor="auditor")
        assert erasure.erased
        gone, kept = erased_content(ledger, before, world)
    assert gone, "the erasure took nothing the writers wrote: the test would prove nothing"
    # The control: deleted but not compacted, the erased bytes are still in the file.
    if control:
        assert windows_left(home, gone), "the control found no residue: the scan is blind"
    with open_ledger(home, sync=False) as ledger:  # more writes reuse the freed pages
        ledger.observe_outcome(key=f"post-{what}", principal="bob", session="late",
                               project=PROJECTS[0], passed=True, task="y" * 3000)

    compact(home)

    assert windows_left(home, gone) == {}
    data = Path(home, "data.mdb").read_bytes()
    assert all(token in data for token in kept)


@pytest.mark.parametrize("kind", ["principal", "session", "lesson", "outcome"])
def test_erase_and_compact_leave_no_window_of_what_long_lived_writers_wrote(
        tmp_path: Path, kind: str) -> None:
    home = str(tmp_path / "home")
    world = build(home, seed=sum(map(ord, kind)), steps=40)
    what = subject(kind, world, random.Random(kind))
    erase_then_scan(home, world, kind, what, control=True)


@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(4, 24),
       kind=st.sampled_from(["principal", "session", "lesson", "outcome"]))
def test_no_window_of_any_erased_payload_survives_compaction(
        tmp_path_factory: pytest.TempPathFactory, seed: int, steps: int, kind: str) -> None:
    home = str(tmp_path_factory.mktemp("home") / "home")
    world = build(home, seed, steps)
    if kind == "lesson" and not world.lessons:
        kind = "outcome"
    what = subject(kind, world, random.Random(seed))
    erase_then_scan(home, world, kind, what, control=False)


@pytest.mark.parametrize("kind", ["principal", "session", "lesson", "outcome"])
def test_a_body_written_after_an_erased_one_carries_none_of_it(tmp_path: Path,
                                                               kind: str) -> None:
    # The reported pattern, for every kind: alice's body fills most of one overflow
    # page, then a shorter one of bob's reuses that page's buffer in the next transaction.
    home = str(tmp_path / "home")
    rng = random.Random(kind)
    world = World()
    with open_ledger(home, sync=False) as ledger:
        for i in range(2):
            fields = outcome_fields(rng, world, 3200, "alice", "alice-s", f"a{i}")
            world.outcomes.append(ledger.observe_outcome(**fields).ids["outcome_id"])
            first = fields["operations"][0]
            text, vector = token(rng, 900), [rng.uniform(-1, 1) for _ in range(DEFAULT_DIM)]
            world.tokens.append(text)
            world.vectors.append(vector)
            world.lessons.append(ledger.propose_lesson(
                key=f"l{i}", principal="alice", session="alice-s", project=fields["project"],
                text=text, kind="prefer", avoid_op=first.op, prefer_op=f"{first.op}-fixed",
                target=first.target, source="user", vector=vector,
                evidence=[world.outcomes[-1]]).ids["lesson_id"])
            for j in range(2):
                ledger.observe_outcome(**outcome_fields(rng, world, 2100, "bob", "bob-s",
                                                        f"b{i}{j}"))
    what = {"principal": "alice", "session": "alice-s", "lesson": str(world.lessons[0]),
            "outcome": str(world.outcomes[0])}[kind]
    erase_then_scan(home, world, kind, what, control=True)


#: The attack as reported: one process writes two principals' outcomes, and
#: ``lessonledger erase`` (which compacts) runs afterwards in another.
ATTACK = """
import sys
from lessonledger.commands import open_ledger
home, s = sys.argv[1], sys.argv[2]
with open_ledger(home) as led:
    for i in range(2):
        led.observe_outcome(key=f"a{i}", principal="alice", project="3f9a0c1b2d4e5f60",
                            passed=True, task=(s + " ") * 70)
    for i in range(2):
        led.observe_outcome(key=f"b{i}", principal="bob", project="3f9a0c1b2d4e5f60",
                            passed=True, task="b" * 2100)
"""


def test_the_reported_attack_leaves_no_copy_after_lessonledger_erase(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    s = "ALICE-SECRET-" + token(random.Random(7), 32)
    cli = [sys.executable, "-m", "lessonledger.ops", "--home", home]
    subprocess.run([*cli, "init"], check=True, capture_output=True)
    subprocess.run([sys.executable, "-c", ATTACK, home, s], check=True)
    assert s.encode() in Path(home, "data.mdb").read_bytes()
    subprocess.run([*cli, "erase", "--principal", "alice", "--reason", "r"], check=True,
                   capture_output=True)
    assert windows_left(home, windows([(s + " ").encode() * 3])) == {}
