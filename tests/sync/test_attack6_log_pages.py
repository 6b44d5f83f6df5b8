"""Reading a hub's log when its bodies are not tiny (attack6).

The hub answered a ``log`` query with every record asked for (up to 5,000) in one
frame, and a frame is at most 1.1 MiB. With bodies of 2 kB, 1,000 records are 2.2 MB:
the client refused the reply, so ``lessonledger log --to`` (5,000 asked) failed ("no
reply from the hub"), ``RemoteLedger.read_log`` raised ``WireError``, and
``subscribe()`` (1,000 at a time) broke for good once 1,000 such events came. The hub
now answers a page that fits a frame; the readers ask for the next.
"""

from __future__ import annotations

import json
from pathlib import Path

from hubtools import hub
from in_process import cli
from lessonledger.commands.messages import ObserveOutcome, command_from
from lessonledger.sync import RemoteLedger

P = "3f9a0c1b2d4e5f60"
EVENTS = 1200


def test_a_log_of_large_bodies_is_read_whole_through_the_hub(tmp_path: Path) -> None:
    with hub(tmp_path / "home", tmp_path / "hub.log", "--query-workers", "1") as server, \
            RemoteLedger(server.endpoint, timeout=60) as client:
        for batch in range(EVENTS // 400):
            client.execute_all([command_from(
                {"key": f"big-{batch}-{i}", "project": P, "passed": True,
                 "task": f"{batch}-{i} " + "x" * 1900}, ObserveOutcome) for i in range(400)])
        page = client.read_log(1, 1000)
        assert 0 < len(page) <= 1000
        assert [r.envelope.position for r in page] == list(range(1, len(page) + 1))
        seen = [r.envelope.position for r in client.subscribe(1, idle=1.0)]
        assert seen == list(range(1, EVENTS + 1))
        # The CLI's main() in this process (its paging through the hub is under test).
        shown = cli("log", "--to", server.endpoint, "--json")
        assert shown.returncode == 0, shown.stderr
        lines = [json.loads(line) for line in shown.stdout.splitlines()]
        assert [line["position"] for line in lines] == list(range(1, EVENTS + 1))
        limited = cli("log", "--to", server.endpoint, "--from", "7", "--limit", "1100")
        assert limited.returncode == 0, limited.stderr
        assert len(limited.stdout.splitlines()) == 1100
