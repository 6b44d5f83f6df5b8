"""Answers bigger than a request may be: a catalogue of long lessons through the hub.

A request frame is at most ~1.1 MiB (what a client may make a hub read), and replies were
held to the same limit: a catalogue of 800 lessons of 2 kB each (1.6 MB) was refused by
the client as ``oversize`` and ``lessons list --to`` failed, though the same home answers
it locally. Replies come from the hub the client chose to trust, and now have their own,
larger limit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hubtools import hub, lessonledger
from lessonledger.commands import open_ledger
from lessonledger.commands.messages import ProposeLesson, command_from
from lessonledger.commands.read_side import Reader
from lessonledger.sync import RemoteLedger, wire
from lessonledger.sync.authority import Access
from lessonledger.sync.queries import answer_bytes
from lessonledger.sync.wire import MAX_FRAME_BYTES

P = "3f9a0c1b2d4e5f60"
LESSONS = 800


def _long_lessons(home: Path, count: int) -> None:
    with open_ledger(str(home), sync=False) as ledger:
        ledger.execute_all([command_from(
            {"key": f"long-{i}", "project": P, "kind": "avoid", "avoid_op": f"op-{i}",
             "target": f"t{i}", "text": f"lesson {i} " + "y" * 1900}, ProposeLesson)
            for i in range(count)])


def test_a_catalogue_over_the_request_limit_is_answered_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _long_lessons(home, LESSONS)
    with open_ledger(str(home), sync=False) as ledger:
        local = ledger.catalogue(P, everything=True)
    assert len(local) == LESSONS
    with hub(home, tmp_path / "hub.log", "--query-workers", "1") as server, \
            RemoteLedger(server.endpoint, timeout=60) as client:
        remote = client.catalogue(P, everything=True)
        assert remote == local
        shown = subprocess.run([lessonledger(), "lessons", "list", "--to", server.endpoint,
                                "--project", P, "--all", "--json"],
                               capture_output=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout) > MAX_FRAME_BYTES  # the answer is over a request's limit
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert len(rows) == LESSONS


def test_an_answer_over_the_reply_limit_is_refused_at_the_hub_saying_what_to_do(
        tmp_path: Path) -> None:
    # Sent, a reply over the client's limit is dropped by libzmq unseen, and the client
    # would retry until its deadline: the hub refuses it instead (limit made small here).
    home = tmp_path / "home"
    _long_lessons(home, 20)
    query = wire.QueryRequest("catalogue", {"project": P, "everything": True})
    with Reader(str(home), read_only=True) as reader:
        full = answer_bytes(reader, Access("p"), query, 7)
        whole: object = wire.decode_body(wire.decode_frame(full, limit=wire.MAX_REPLY_BYTES))
        cut = wire.decode_frame(answer_bytes(reader, Access("p"), query, 7, limit=20_000))
    assert isinstance(whole, wire.Answer)
    refused: object = wire.decode_body(cut)
    assert cut.id == 7
    assert isinstance(refused, wire.Refused)
    assert "over the 20,000 a reply may be" in refused.message
    assert "--project" in refused.message
