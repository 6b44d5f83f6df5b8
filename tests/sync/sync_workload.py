"""A hub's workload for the sync tests: outcomes and lessons by several principals."""

from __future__ import annotations

import random
import string
from uuid import UUID

from lessonledger.commands import Ledger, Operation

__all__ = ["PRINCIPALS", "PROJECTS", "fill", "token"]

PROJECTS = ("3f9a0c1b2d4e5f60", "0123456789abcdef")
PRINCIPALS = ("alice", "bob", "carol")
#: Lower-case letters only: mixed case and digits now and then look like a credential,
#: which the ledger refuses.
_ALPHABET = string.ascii_lowercase


def token(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=n))


def fill(ledger: Ledger, steps: int, *, seed: int = 0, tag: str = "w",
         principals: tuple[str, ...] = PRINCIPALS) -> list[str]:
    """Write ``steps`` commands (outcomes, and lessons citing them); return unique texts."""
    rng = random.Random(seed)
    texts: list[str] = []
    outcomes: list[tuple[UUID, str, str, str]] = []
    for i in range(steps):
        principal = principals[i % len(principals)]
        project = PROJECTS[i % 2]
        if i % 4 == 3 and outcomes:
            outcome, project, op, target = rng.choice(outcomes)
            text = f"{principal} lesson {token(rng, 40)}"
            texts.append(text)
            ledger.propose_lesson(
                key=f"{tag}-l{i}", principal=principal, session=f"{principal}-s",
                project=project, text=text, kind="prefer", avoid_op=op,
                prefer_op=f"{op}-fixed", target=target, source="user", evidence=[outcome])
            continue
        task = f"{principal} task {token(rng, 60)}"
        error = f"{principal} error {token(rng, 50)}"
        texts += [task, error]
        op, target = f"op-{rng.randrange(5)}", f"target-{rng.randrange(3)}"
        receipt = ledger.observe_outcome(
            key=f"{tag}-o{i}", principal=principal, session=f"{principal}-s",
            project=project, passed=True, task=task, operations=[
                Operation(op=op, target=target, ok=False, error=error, order=0),
                Operation(op=f"{op}-fixed", target=target, ok=True, order=1)])
        outcomes.append((receipt.ids["outcome_id"], project, op, target))
    return texts
