"""A command the replica's outbox accepts, and the hub accepts sent directly, wedges push.

The promise (issue 14, "push: commands made on a replica while the hub was unreachable
wait in the replica's outbox. `push` sends them as commands; the hub decides them";
README "Sync", Push: "the hub decides each (a refused one says why)").

``queue_commands`` checks a queued command's schema, bounds and credentials. A push
sends each queued command as its JSON line inside one sync frame, and the hub refuses any
frame over ``wire.MAX_FRAME_BYTES`` (1.06 MiB) as a whole. JSON spells a newline or a
quote in two bytes, a control character in six, where the command's msgpack (what
``RemoteLedger.execute`` sends, and what the event body holds) spells it in one: an
outcome with stack-trace-like error signatures is ~540 kB as a command or a body, well
inside every limit, yet ~1.5 MB as the JSON line a push carries. ``push`` then fails
whole, every time: the commands queued after it are never sent, and nothing tells which
line is at fault or offers a way past it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import _attack19_paths  # noqa: F401
from hubtools import hub, lessonledger
from lessonledger.commands import open_ledger
from lessonledger.commands.messages import decode_command
from lessonledger.sync import RemoteLedger

P = "3f9a0c1b2d4e5f60"


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([lessonledger(), *args], input=stdin, capture_output=True,
                          timeout=120)


def _outcome(key: str, task: str, **extra: object) -> bytes:
    return json.dumps({"command": "observe_outcome", "key": key, "session": "s-push",
                       "project": P, "passed": False, "signal": "verification",
                       "task": task, **extra}).encode() + b"\n"


def _traceback_outcome(key: str) -> bytes:
    # 500 failing operations, each with an error signature of 1,024 characters of a
    # terminal's colour codes (pytest's output as captured): legal, and ESC is one byte
    # in msgpack but six (\u001b) in JSON.
    trace = "\x1b[0m" * 256
    ops = [{"op": f"pytest:run{i}", "target": "tests", "ok": False, "error": trace,
            "order": i} for i in range(500)]
    return _outcome(key, "BIG-OUTCOME-TASK", operations=ops)


def test_a_valid_large_queued_command_does_not_wedge_the_outbox(tmp_path: Path) -> None:
    home, replica = tmp_path / "hub", tmp_path / "replica"
    big = _traceback_outcome("big")
    command = decode_command(big)
    with hub(home, tmp_path / "hub.log", "--query-workers", "1") as server:
        # The control: the same command sent straight to the hub is written.
        with RemoteLedger(server.endpoint, timeout=30.0) as direct:
            direct.execute(decode_command(_traceback_outcome("big-direct")))
        assert _cli("clone", server.endpoint, str(replica)).returncode == 0
        queued = _cli("--home", str(replica), "publish", "-", stdin=(
            _outcome("before", "BEFORE-TASK") + big + _outcome("after", "AFTER-TASK")))
        assert queued.returncode == 0, queued.stderr  # all three wait in the outbox
        pushed = _cli("--home", str(replica), "push", "--json")
        again = _cli("--home", str(replica), "push", "--json")
    with open_ledger(home, sync=False) as ledger:
        tasks = {(r.payload or b"").split(b"TASK")[0].rsplit(b"\xa4task", 1)[-1]
                 for r in ledger.log.scan() if b"-TASK" in (r.payload or b"")}
    assert command.key == "big"
    # Each queued command is decided by the hub (written, or refused and why), and the
    # one queued after the large one reaches the hub.
    assert any(b"AFTER" in t for t in tasks), (sorted(tasks), again.stderr.decode())
    assert pushed.returncode in (0, 1), pushed.stderr.decode()
    assert again.returncode in (0, 1), again.stderr.decode()


def test_a_command_over_any_frame_is_refused_by_the_replica_and_the_rest_pushed(
        tmp_path: Path) -> None:
    # 500 errors of 1,024 four-byte characters: within every bound a field counts in
    # characters, but 2 MB however encoded, over what one frame carries.
    ops = [{"op": f"pytest:run{i}", "target": "tests", "ok": False,
            "error": "\U0001f600" * 1024, "order": i} for i in range(500)]
    huge = _outcome("huge", "HUGE-TASK", operations=ops)
    home, replica = tmp_path / "hub", tmp_path / "replica"
    with hub(home, tmp_path / "hub.log", "--query-workers", "1") as server:
        assert _cli("clone", server.endpoint, str(replica)).returncode == 0
        queued = _cli("--home", str(replica), "publish", "-",
                      stdin=huge + _outcome("after", "AFTER-TASK"))
        assert queued.returncode == 0, queued.stderr
        pushed = _cli("--home", str(replica), "push", "--json")
        again = _cli("--home", str(replica), "push", "--json")
    assert pushed.returncode == 1, pushed.stderr.decode()  # one refused, said why
    assert b"a push carries" in pushed.stdout + pushed.stderr
    assert again.returncode == 0, again.stderr.decode()  # the outbox is empty now
    with open_ledger(home, sync=False) as ledger:
        payloads = [r.payload or b"" for r in ledger.log.scan()]
    assert any(b"AFTER-TASK" in p for p in payloads)
    assert not any(b"HUGE-TASK" in p for p in payloads)
