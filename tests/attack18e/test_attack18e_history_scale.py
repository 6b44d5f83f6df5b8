"""attack18e: ``history`` is quadratic in the length of a supersede chain.

DESIGN §5/§8 ask that queries stay fast, and the README's "Views that scale" that a
query reads only what it is asked for. ``commands/read_side.py`` ``history`` orders the
linked lessons with a loop that, for each lesson it places, takes the minimum over
every lesson still waiting (``min([... for i, n in waiting.items() ...], key=lambda i:
(rows[i].created_at, str(i)))``) and walks every linked lesson to count down (``for
later in linked``): O(n^2) for a chain of n lessons. Measured here: 2,000 edits answer
in ~0.9 s, 4,000 in ~3.5 s, and 8,000 would take ~14 s, longer than writing them.

Timed tests are noisy (DESIGN §8), so this counts work instead: every step hashes every
linked id (``later in waiting``, ``before.get(later, ...)``), so the number of
``UUID.__hash__`` calls during one ``history`` grows with n^2 (about n^2 for a chain);
an ordering linear in the chain (or n log n) hashes each id a bounded number of times.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from _attack18e_agent import P1, Agent, day
from lessonledger.commands import open_ledger


def test_history_of_a_long_edit_chain_does_linear_work(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    n = 600
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        first = current = agent.learn(P1, "s1", when=day(0))
        for i in range(n):
            current = led.edit_lesson(key=f"edit-{i}", lesson_id=current,
                                      text=f"Run pytest from the root, take {i}").ids["lesson_id"]
        led.history(first)  # warm: whatever a first read loads
        calls = [0]
        plain = uuid.UUID.__hash__

        def counted(self: uuid.UUID) -> int:
            calls[0] += 1
            return plain(self)

        monkeypatch.setattr(uuid.UUID, "__hash__", counted)
        found = led.history(first)
        monkeypatch.setattr(uuid.UUID, "__hash__", plain)
        assert len(found) == n + 1
        # Linear: about 25 a lesson (the view's rows, the links, the order); quadratic
        # was 734,000 here.
        assert calls[0] < 40 * n, f"{calls[0]:,} ids hashed for a chain of {n + 1}"
