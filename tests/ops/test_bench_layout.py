"""The format-ceiling contender writes exactly the entries our log writes."""

from __future__ import annotations

from pathlib import Path

import lmdb
from lessonledger.ledger.ids import new_event_id
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog, NewEvent
from lessonledger.ops.bench.layout import layout, layout_entries


def _trees(path: str) -> list[list[tuple[bytes, bytes]]]:
    env = lmdb.open(path, max_dbs=3, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return [list(txn.cursor(db=env.open_db(f"n.{tree}".encode(), txn=txn)))
                    for tree in ("log", "ids", "streams")]
    finally:
        env.close()


def test_layout_puts_what_the_log_stores(tmp_path: Path) -> None:
    stream = new_event_id()
    events = [NewEvent(stream, v, "t", b"body %d" % v, event_id=new_event_id().bytes)
              for v in range(7)]
    entries = layout_entries(events, str(tmp_path), "n")
    (tmp_path / "ours").mkdir()
    home = acquire(str(tmp_path / "ours"), sync=False)
    try:
        EventLog(home, "n").append(events)
    finally:
        release(home)
    rate = layout(str(tmp_path / "layout"), entries, "n", batch=3)
    assert rate > 0
    ours, copied = _trees(str(tmp_path / "ours")), _trees(str(tmp_path / "layout"))
    assert [len(tree) for tree in copied] == [14, 7, 7]
    # The same keys and sizes; the bodies' salts and the clock differ from run to run.
    assert [[(k, len(v)) for k, v in tree] for tree in copied[1:]] == [
        [(k, len(v)) for k, v in tree] for tree in ours[1:]]
    assert [k for k, _ in copied[0]] == [k for k, _ in ours[0]]
