"""A hub SIGKILLed under load and restarted while its clients retry.

Every command a client got a receipt for is in the log exactly once, where the receipt
says; every command of every plan is in it once the clients are done; and nothing is in
it that no client sent (each event is a plan command's, a policy's or the rules').
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from hubtools import hub, outcome
from lessonledger.commands import open_ledger
from lessonledger.commands.handlers import command_id
from lessonledger.ledger.ids import derived_id
from test_hub_publishers import acknowledged, check_log, finish, publishers

PUBLISHERS = 16
EACH = 60


def test_a_killed_hub_loses_nothing_acknowledged_and_invents_nothing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    kills = 0
    with hub(tmp_path / "hub", tmp_path / "hub.log") as server, \
            publishers(server.endpoint, work, EACH, 1.0) as procs:
        time.sleep(0.5)
        (work / "go").touch()
        for threshold in (100, 400):
            deadline = time.monotonic() + 120
            while sum(len(acknowledged(p)) for p in work.glob("*.acks")) < threshold:
                assert time.monotonic() < deadline, "the publishers stalled"
                time.sleep(0.01)
            before = {p.name: acknowledged(p) for p in work.glob("*.acks")}
            server.kill()  # SIGKILL, mid-batch as likely as not
            kills += 1
            time.sleep(0.3)
            server.start()
        finish(procs, 300)
    assert kills == 2
    acks: dict[str, list[int]] = {}
    for path in work.glob("*.acks"):
        acks.update(acknowledged(path))
    sent = {outcome(agent, i).key for agent in range(PUBLISHERS) for i in range(EACH)}
    assert set(acks) == sent
    # What was acknowledged before the last kill kept its positions.
    for name, earlier in before.items():
        assert all(acks[key] == positions for key, positions in earlier.items()), name
    with open_ledger(tmp_path / "hub", sync=False) as ledger:
        check_log(ledger, acks)
        mine = {derived_id(command_id(key, "operator"), "0").bytes: key for key in sent}
        records = list(ledger.log.scan())
        firsts = Counter(mine[r.envelope.event_id] for r in records
                         if r.envelope.event_id in mine)
        assert set(firsts) == sent
        assert set(firsts.values()) == {1}
        strangers = [r.envelope for r in records if r.envelope.event_id not in mine
                     and r.envelope.actor not in ("policy", "ledger")]
        assert not strangers, strangers[:3]
