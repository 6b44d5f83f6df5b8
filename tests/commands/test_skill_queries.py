"""Skill queries are read-side queries: they fold, never flush or react, never wait to write.

A recall record this process queued waits for the write lock, which another process holds;
the skill queries answer meanwhile, and the queued record still lands once it is free.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from lessonledger.commands import Operation, open_ledger
from lessonledger.ledger.events import LESSON_RECALLED

P = "3f9a0c1b2d4e5f60"
BODY = "# Triage\n\nSort the inbox.\n\n## Replies\n\nDraft short replies.\n"
HOLDER = """
import sys, time, lmdb
env = lmdb.open(sys.argv[1], max_dbs=128, map_size=64 << 30)
txn = env.begin(write=True)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
txn.abort()
"""


def test_skill_queries_answer_while_another_process_holds_the_write_lock(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        ledger.skills.register("triage", BODY, tools=["search"], key="register")
        delta = ledger.skills.propose("triage", tier=3, kind="preference", anchor="replies",
                                      payload="Say thanks.", provenance="user_instruction",
                                      key="d")
        ledger.skills.learn_fact("senders", "boss", "alice@example.com", key="f")
        ledger.observe_outcome(key="o", project=P, passed=True, operations=[
            Operation(op="make", target="build", ok=False, error="no rule to make target"),
            Operation(op="cmake", target="build", ok=True, order=1)])
        assert ledger.lessons(P, record=False), "the loop learned no lesson to recall"
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "3"],
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        started = time.perf_counter()
        assert ledger.lessons(P, session="s1")  # its record now waits for the lock
        assert ledger.skills.base("triage") is not None
        assert [r.delta_id for r in ledger.skills.deltas("triage")] == [delta.ids["delta_id"]]
        assert ledger.skills.find_delta(str(delta.ids["delta_id"])[:8]) == delta.ids["delta_id"]
        assert ledger.skills.learned("senders", {}) == {"boss": "alice@example.com"}
        assert ledger.skills.inert() != []
        took = time.perf_counter() - started
        holder.communicate(timeout=30)
        assert took < 1.5, f"skill queries waited {took:.2f} s for the write lock"
        ledger.flush()
        assert any(r.envelope.type == LESSON_RECALLED for r in ledger.log.scan())
