"""The read-only query opens, held recall records, the ``unswept`` tree of an erasure,
and ``LMDBHome.db``'s write transactions (attack16, round two). GUARDS: on fa283ce a
recall answered during an erasure committed its record after it, naming what it took;
two readers in a process lost the records of the first to close; threads opening
readers at once raced; a thread waiting in ``db`` held the lock another thread inside
its write transaction needed. The rest held then.

Real processes only: the CLI as ``sys.executable -m lessonledger.ops``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import _attack16_paths  # noqa: F401  (first: puts hubtools on the path)
import pytest
from lessonledger.commands import Operation, open_ledger

P = "3f9a0c1b2d4e5f60"
DEMO_P = "4499576bb8bc90a56755ece5d332abbe"

#: The CLI, paused (for argv[3] seconds) the moment it reaches ``module.name``.
PAUSE = textwrap.dedent('''
    import importlib, sys, time
    from lessonledger.ops.cli import main
    module = importlib.import_module(sys.argv[1])
    owner = module
    path = sys.argv[2].split(".")
    for part in path[:-1]:
        owner = getattr(owner, part)
    real = getattr(owner, path[-1])
    seconds = float(sys.argv[3])
    def paused(*a, **k):
        print("paused", flush=True)
        time.sleep(seconds)
        return real(*a, **k)
    setattr(owner, path[-1], paused)
    sys.exit(main(sys.argv[4:]))
''')

HOLDER = textwrap.dedent("""
    import sys, time, lmdb
    env = lmdb.open(sys.argv[1], max_dbs=128, map_size=64 << 30, max_readers=512)
    txn = env.begin(write=True)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    txn.abort()
    env.close()
""")


def cli(home: Path, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                           *argv], capture_output=True, text=True, timeout=timeout,
                          check=False)


def popen_cli(home: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                             *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def paused(module: str, name: str, seconds: float, home: Path,
           *argv: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", PAUSE, module, name, str(seconds),
                             "--home", str(home), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "paused\n", (line, proc.stderr.read() if proc.stderr else "")
    return proc


def demo(tmp_path: Path) -> Path:
    home = tmp_path / "demo"
    done = cli(home, "demo", timeout=120)
    assert done.returncode == 0, done.stderr
    return home


def count(home: Path, kind: str = "lesson.recalled") -> int:
    done = cli(home, "stats", "--json")
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["events_by_type"].get(kind, 0))


def holding(home: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def alice_home(home: Path, secret: str, bob: int = 50) -> None:
    with open_ledger(home, sync=False) as ledger:
        for who, n in (("alice", 3), ("bob", bob)):
            for i in range(n):
                target = f"{who}-{i}-" + (secret if who == "alice" else "repo")
                ledger.observe_outcome(
                    key=f"{who}-{i}", project=P, principal=who, session=f"{who}-s{i}",
                    passed=True,
                    operations=[Operation(op="pytest:tests/", target=target, ok=False,
                                          error="no conftest " + target),
                                Operation(op="pytest:root", target=target, ok=True,
                                          order=1)])


ERASE = ["erase", "--principal", "alice", "--reason", "request"]


def killed_erase(home: Path, module: str, name: str) -> None:
    proc = paused(module, name, 60, home, *ERASE)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()


def trees(home: Path) -> list[bytes]:
    import lmdb
    env = lmdb.open(str(home), readonly=True, lock=False, max_dbs=128, map_size=64 << 30)
    try:
        with env.begin() as txn:
            return [k for k, _ in txn.cursor()]
    finally:
        env.close()


def test_unswept_home_every_command_still_works(tmp_path: Path) -> None:
    home = tmp_path / "home"
    secret = f"alice-private-{uuid.uuid4().hex}"
    alice_home(home, secret)
    killed_erase(home, "lessonledger.ops.erasure_commands", "compact")
    assert b"unswept" in trees(home), "the kill left the tree"
    bad = {}
    for argv in (["verify"], ["verify", "--json"], ["stats", "--json"], ["log", "--json"],
                 ["lessons", "list", "--all", "--json"],
                 ["recall", "--project", P, "--session", "z", "run the tests"],
                 ["check", "--project", P, "pytest:tests/", "x"],
                 ["export", "--include-envelopes", "-o", str(tmp_path / "all.jsonl")],
                 ["import", str(tmp_path / "all.jsonl"), "--into", str(tmp_path / "imp")],
                 ["snapshot"], ["snapshots"], ["erasures"], ["reconcile"],
                 ["rebuild"]):
        done = cli(home, *argv)
        if done.returncode != 0:
            bad[" ".join(argv)] = done.stderr[-400:]
    assert not bad, bad
    assert b"unswept" not in trees(tmp_path / "imp")
    imp = cli(tmp_path / "imp", "verify")
    assert imp.returncode == 0, imp.stderr
    assert holding(tmp_path / "imp", secret.encode()) == []
    again = cli(home, *ERASE)
    assert again.returncode == 0, again.stderr
    assert "erased already" in again.stdout
    assert holding(home, secret.encode()) == []
    assert b"unswept" not in trees(home)
    assert cli(home, "verify").returncode == 0


def test_unswept_home_checkout_and_init(tmp_path: Path) -> None:
    home = tmp_path / "home"
    secret = f"alice-private-{uuid.uuid4().hex}"
    alice_home(home, secret)
    snap = cli(home, "snapshot", "--json")
    assert snap.returncode == 0, snap.stderr
    killed_erase(home, "lessonledger.ops.erasure_commands", "compact")
    listed = cli(home, "snapshots", "--json")
    assert listed.returncode == 0, listed.stderr
    first = json.loads(listed.stdout.splitlines()[0])
    ident = first.get("snapshot") or first.get("id") or first.get("digest")
    assert ident, first
    out = tmp_path / "co"
    done = cli(home, "checkout", str(ident), "--into", str(out))
    assert done.returncode == 0, done.stderr
    assert b"unswept" not in trees(out)
    assert holding(out, secret.encode()) == [], "a checkout applies later erasures"
    init = cli(home, "init")
    # init on an existing home: as on any other home (ready, or a refusal), never a crash
    assert "Traceback" not in init.stderr, init.stderr
    assert cli(home, "verify").returncode == 0


@pytest.mark.parametrize("where", ["Ledger.save_view", "Ledger.close"])
def test_erase_killed_before_views_saved_rerun_leaves_nothing(tmp_path: Path,
                                                              where: str) -> None:
    home = tmp_path / "home"
    secret = f"alice-private-{uuid.uuid4().hex}"
    alice_home(home, secret)
    killed_erase(home, "lessonledger.commands.ledger", where)
    assert count(home, "lesson.erased") + count(home, "erased") >= 0
    again = cli(home, *ERASE)
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert holding(home, secret.encode()) == []
    assert cli(home, "verify").returncode == 0


RECALL = ["recall", "--project", DEMO_P, "--session", "sx", "run the tests", "--json"]


def test_recall_records_land_and_answers_match_a_writable_open(tmp_path: Path) -> None:
    home = demo(tmp_path)
    head = json.loads(cli(home, "stats", "--json").stdout)["head"]
    before = count(home)
    asof = ["recall", "--project", DEMO_P, "--as-of", str(head), "run the tests", "--json"]
    a = cli(home, *asof)
    assert a.returncode == 0, a.stderr
    # the same query in a process that has the home open to write (Ledger)
    script = textwrap.dedent(f"""
        import sys
        from lessonledger.commands import open_ledger
        from lessonledger.ops.cli import main
        with open_ledger({str(home)!r}) as ledger:
            sys.exit(main(["--home", {str(home)!r}, *sys.argv[1:]]))
    """)
    b = subprocess.run([sys.executable, "-c", script, *asof], capture_output=True,
                       text=True, timeout=60, check=False)
    assert b.returncode == 0, b.stderr
    assert a.stdout == b.stdout
    n = 5
    for i in range(n):
        done = cli(home, "recall", "--project", DEMO_P, "--session", f"s{i}", "run the tests")
        assert done.returncode == 0, done.stderr
        assert "not written" not in done.stderr, done.stderr
    done = cli(home, "check", "--project", DEMO_P, "--session", "c", "pytest tests/", "tests")
    assert done.returncode == 0, done.stderr
    assert "not written" not in done.stderr, done.stderr
    # the as-of recalls record nothing? count what landed for the live ones at least
    assert count(home) == before + n + 1


def test_query_during_compaction_answers_after_and_records(tmp_path: Path) -> None:
    home = demo(tmp_path)
    before = count(home)
    comp = paused("lessonledger.ledger.compaction", "_write_live_values", 4, home, "compact")
    try:
        started = time.time()
        procs = [popen_cli(home, *RECALL), popen_cli(home, "stats", "--json"),
                 popen_cli(home, "verify"), popen_cli(home, "log", "--limit", "2")]
        results = [p.communicate(timeout=60) for p in procs]
        took = time.time() - started
    finally:
        _out, err = comp.communicate(timeout=60)
    assert comp.returncode == 0, err
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [r[1] for r in results]
    assert all(r[1] == "" for r in results), [r[1] for r in results]
    assert took < 30
    assert count(home) == before + 1
    assert cli(home, "verify").returncode == 0


def test_recall_sigkilled_while_holding_records_leaves_a_sound_home(tmp_path: Path) -> None:
    home = demo(tmp_path)
    before = count(home)
    proc = paused("lessonledger.commands.deferred", "HeldRecords.close", 60, home, *RECALL)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert count(home) == before  # lost, as a crash loses them
    comp = cli(home, "compact")
    assert comp.returncode == 0, comp.stderr
    done = cli(home, *RECALL)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert count(home) == before + 1
    assert cli(home, "verify").returncode == 0


def test_recall_sigkilled_inside_its_commit_transaction(tmp_path: Path) -> None:
    home = demo(tmp_path)
    before = count(home)
    proc = paused("lessonledger.ledger.log", "Writing.append", 60, home, *RECALL)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    started = time.time()
    done = cli(home, *RECALL)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert time.time() - started < 15
    assert count(home) == before + 1
    script = textwrap.dedent(f"""
        from lessonledger.commands import Operation, open_ledger
        with open_ledger({str(home)!r}, sync=False) as ledger:
            ledger.observe_outcome(key="after-kill", project={DEMO_P!r}, session="sx",
                passed=True, operations=[Operation(op="python -m pytest", target="tests",
                ok=True)])
    """)
    w = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60, check=False)
    assert w.returncode == 0, w.stderr
    assert cli(home, "verify").returncode == 0


def test_many_concurrent_queries_all_answer_and_all_records_land(tmp_path: Path) -> None:
    home = demo(tmp_path)
    before = count(home)
    n = 12
    procs = [popen_cli(home, "recall", "--project", DEMO_P, "--session", f"m{i}",
                       "run the tests", "--json") for i in range(n)]
    procs += [popen_cli(home, "lessons", "list", "--json") for _ in range(3)]
    procs += [popen_cli(home, "stats", "--json") for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), [r[1] for r in results]
    assert all(r[1] == "" for r in results), [r[1] for r in results]
    assert count(home) == before + n


WRITE_N = textwrap.dedent("""
    import sys
    from lessonledger.commands import Operation, open_ledger
    home, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open_ledger(home, sync=False) as ledger:
        for i in range(start, start + n):
            ledger.observe_outcome(key=f"w{i}", session=f"s{i}", project=sys.argv[4],
                passed=True, operations=[
                    Operation(op=f"op{i % 3}", target="t", ok=False, error="exit 2"),
                    Operation(op=f"op{i % 3}-b", target="t", ok=True, order=1)])
""")


def write_n(home: Path, start: int, n: int, project: str = P) -> None:
    done = subprocess.run([sys.executable, "-c", WRITE_N, str(home), str(start), str(n),
                           project], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr


def scrape(port: int) -> dict[str, float]:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def test_metrics_follows_writers_on_a_home_opened_fresh(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert cli(home, "init").returncode == 0
    proc = popen_cli(home, "metrics", "--port", "0", "--verify-every", "1")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "metrics at" in line, line + (proc.stderr.read() if proc.poll() else "")
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        first = scrape(port)
        write_n(home, 0, 30)
        stats = json.loads(cli(home, "stats", "--json").stdout)
        time.sleep(2.5)
        second = scrape(port)
        events = {k: v for k, v in second.items() if "events" in k and "type=" in k}
        heads = {k: v for k, v in second.items() if "head" in k}
        assert any(v == stats["head"] for v in heads.values()), (heads, stats["head"])
        total = sum(stats["events_by_type"].values())
        assert sum(v for k, v in events.items() if "total" in k) in (total, 0), events
        lessons = {k: v for k, v in second.items() if k.startswith("lessonledger_lessons")}
        assert sum(lessons.values()) > 0, (lessons, first)
        ok = {k: v for k, v in second.items() if "verify_ok" in k}
        assert all(v == 1 for v in ok.values()), ok
        # an erasure by another process while metrics runs
        er = cli(home, "erase", "--session", "s1", "--reason", "r", "--no-compact")
        assert er.returncode == 0, er.stderr
        write_n(home, 100, 5)
        time.sleep(2.5)
        third = scrape(port)
        ok = {k: v for k, v in third.items() if "verify_ok" in k}
        assert all(v == 1 for v in ok.values()), ok
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err


def test_queries_beside_a_long_publish_answer_without_waiting(tmp_path: Path) -> None:
    home = demo(tmp_path)
    lines = [json.dumps({"command": "observe_outcome", "key": f"pub{i}", "session": f"p{i}",
                         "project": DEMO_P, "passed": True, "operations": [
                             {"op": f"pop{i % 50}", "target": "tests", "ok": False,
                              "error": f"boom {i % 50}", "order": 0},
                             {"op": f"pop{i % 50}-fix", "target": "tests", "ok": True,
                              "order": 1}]}) for i in range(4000)]
    feed = tmp_path / "feed.jsonl"
    feed.write_text("\n".join(lines) + "\n")
    before = count(home)
    head = json.loads(cli(home, "stats", "--json").stdout)["head"]
    alone = cli(home, "log", "--limit", "3", "--json").stdout
    pub = popen_cli(home, "publish", str(feed))
    time.sleep(1.5)  # inside its transaction by now
    assert pub.poll() is None, "publish already finished: make it longer"
    timed = []
    for argv in (["lessons", "list", "--json"], ["log", "--limit", "3", "--json"],
                 ["stats", "--json"], ["verify"], ["export", "--to", str(head)],
                 RECALL, ["check", "--project", DEMO_P, "--session", "c", "--json",
                          "pytest tests/", "tests"]):
        started = time.time()
        done = cli(home, *argv)
        timed.append((argv[0], round(time.time() - started, 2), done.returncode,
                      done.stderr[-300:]))
    running = pub.poll() is None
    print('TIMED', timed, running)
    _out, err = pub.communicate(timeout=300)
    assert pub.returncode == 0, err
    assert all(code == 0 for _, _, code, _ in timed), timed
    assert cli(home, "log", "--limit", "3", "--json").stdout == alone
    # every answer before the publish let go; a record at most 5 s later
    assert all(took < 9 for _, took, _, _ in timed), (timed, running)
    lost = sum("not written" in e for *_, e in timed)
    assert count(home) == before + 2 - lost, timed


def _hubtools() -> Any:
    import hubtools

    return hubtools


def pack_entries(home: Path) -> int:
    """How many pack files the home holds (see lessonledger.ledger.packs)."""
    packs = home / "ledger.packs"
    return len([p for p in packs.iterdir() if not p.name.endswith(".partial")]) \
        if packs.is_dir() else 0


def _rows(out: str) -> list[dict]:  # type: ignore[type-arg]
    rows = [json.loads(line) for line in out.splitlines()]
    for r in rows:
        r.pop("last_used_at", None)
    return rows


@pytest.mark.parametrize("kill_fold", [True, False])
def test_queries_on_a_fresh_background_clone(tmp_path: Path, kill_fold: bool) -> None:
    hubtools = _hubtools()
    home = demo(tmp_path)
    write_n(home, 0, 300, DEMO_P)
    hub_rows = _rows(cli(home, "lessons", "list", "--all", "--json").stdout)
    with hubtools.hub(home, tmp_path / "hub.log") as server:
        replica = tmp_path / "replica"
        # kill_fold: the background fold never starts (as if killed at once)
        script = ("import sys; import lessonledger.ops.sync_commands as s; "
                  + ("s._fold_in_background = lambda d: 0; " if kill_fold else "")
                  + "from lessonledger.ops.cli import main; sys.exit(main(sys.argv[1:]))")
        done = subprocess.run([sys.executable, "-c", script, "clone",
                               server.endpoint, str(replica), "--fold", "background",
                               "--json"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        info = json.loads(done.stdout)
        pid = info.get("folding")
        if kill_fold and pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        if kill_fold:
            assert pack_entries(replica) > 0, "packs pending, as the scenario needs"
        procs = [popen_cli(replica, "lessons", "list", "--all", "--json"),
                 popen_cli(replica, "stats", "--json"), popen_cli(replica, "verify"),
                 popen_cli(replica, "log", "--limit", "2", "--json"),
                 popen_cli(replica, *RECALL)]
        results = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * len(procs), [r[1] for r in results]
        assert _rows(results[0][0]) == hub_rows
        hub_head = json.loads(cli(home, "stats", "--json").stdout)["head"]
        assert json.loads(results[1][0])["head"] == hub_head
        assert "Traceback" not in "".join(r[1] for r in results)
        if not kill_fold and pid:
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
        again = cli(replica, "lessons", "list", "--all", "--json")
        assert again.returncode == 0, again.stderr
        assert _rows(again.stdout) == hub_rows


@pytest.mark.parametrize("what", ["lesson", "session"])
def test_recall_during_an_erasure_records_erased_things_after_it(tmp_path: Path,
                                                                 what: str) -> None:
    home = demo(tmp_path)
    query = f"run the tests {uuid.uuid4().hex[:12]}"
    shown = json.loads(cli(home, "recall", "--project", DEMO_P, "--no-record", "--json",
                           query).stdout)["lessons"][0]["lesson_id"]
    first = cli(home, "recall", "--project", DEMO_P, "--session", "victim", "--json",
                "the session's first recall")
    assert first.returncode == 0, first.stderr
    subject = shown if what == "lesson" else "victim"
    # the erase, inside its write transaction for 3 s (a big erasure takes that long)
    er = paused("lessonledger.commands.ledger", "erased_positions", 3, home,
                "erase", f"--{what}", subject, "--reason", "request", "--json")
    rec = cli(home, "recall", "--project", DEMO_P, "--session", "victim", "--json", query)
    _er_out, er_err = er.communicate(timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert er.returncode in (0, 3), er_err
    answered = [x["lesson_id"] for x in json.loads(rec.stdout)["lessons"]]
    log = [json.loads(line) for line in cli(home, "log", "--json").stdout.splitlines()]
    erased_at = max(r["position"] for r in log if r["type"] == "erasure.erased")
    after = [r for r in log if r["position"] > erased_at]
    leftovers = [(r["position"], r["type"], r.get("session"), r["body"])
                 for r in after if r["type"] == "lesson.recalled"
                 and (r.get("session") == "victim" or shown in json.dumps(r))]
    assert cli(home, "verify").returncode == 0
    assert cli(home, "lessons", "list", "--all", "--json").returncode == 0
    assert not leftovers, (
        f"erase --{what} {subject} recorded at {erased_at}; a recall that answered during "
        f"it (showing {(shown in answered and 'the erased lesson') or answered}) committed "
        f"its record after: {leftovers}; query text still in "
        f"{holding(home, query.split()[-1].encode())}")


DB_IN_TXN = textwrap.dedent("""
    import sys, threading, time
    from lessonledger.ledger.lmdb_env import acquire, release
    from lessonledger.ledger.log import EventLog, LOG_NAME
    home = acquire(sys.argv[1])
    log = EventLog(home, LOG_NAME)
    mode = sys.argv[2]
    if mode == "same-thread":
        with log.writing() as w:
            home.db("fresh-tree")   # documented: call before beginning a transaction
        print("done", flush=True)
    elif mode == "other-thread":
        # thread B opens a new tree while A holds the write txn, then A opens another
        with log.writing() as w:
            b = threading.Thread(target=lambda: home.db("b-tree"), daemon=True)
            b.start()
            time.sleep(0.5)
            t = threading.Thread(target=lambda: home.db("a-tree"), daemon=True)
            t.start(); t.join(3)
            print("a-tree opened by a third thread:", not t.is_alive(), flush=True)
            home.listen("x", threading.Event())
            print("listen returned", flush=True)
        b.join(5)
        print("done", flush=True)
    elif mode == "other-thread-db":
        # B waits in db() (holding LMDBHome._lock) for A's write lock; A, in its txn,
        # opens a tree: alone that raises LMDB's "would deadlock" error
        with log.writing() as w:
            threading.Thread(target=lambda: home.db("b-tree"), daemon=True).start()
            time.sleep(0.5)
            try:
                home.db("a-tree")
            except Exception as e:
                print("raised", type(e).__name__, flush=True)
        print("done", flush=True)
    release(home)
""")


@pytest.mark.parametrize("mode", ["same-thread", "other-thread", "other-thread-db"])
def test_db_opened_while_a_write_transaction_is_held(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    assert cli(home, "init").returncode == 0
    try:
        done = subprocess.run([sys.executable, "-c", DB_IN_TXN, str(home), mode],
                              capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{mode}: the process hung (deadlock); output so far: {e.stdout!r}")
    if mode == "same-thread":  # LMDB refuses it: an error, not a hang, is fine
        assert "done" in done.stdout or "LedgerStorageError" in done.stderr, done.stderr
        return
    assert "done" in done.stdout, (done.stdout, done.stderr[-800:])


def test_mcp_server_beside_cli_queries_and_metrics(tmp_path: Path) -> None:
    home = demo(tmp_path)
    before = count(home)
    mcp = subprocess.Popen([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                            "mcp", "--project", DEMO_P, "--metrics", "127.0.0.1:0"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert mcp.stdin is not None
    assert mcp.stdout is not None

    def call(i: int, method: str, params: dict) -> dict:  # type: ignore[type-arg]
        assert mcp.stdin is not None
        assert mcp.stdout is not None
        mcp.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                    "params": params}) + "\n")
        mcp.stdin.flush()
        while True:
            line = mcp.stdout.readline()
            assert line, mcp.stderr.read() if mcp.stderr else ""
            msg: dict[Any, Any] = json.loads(line)
            if msg.get("id") == i:
                return msg

    try:
        init = call(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                      "clientInfo": {"name": "t", "version": "1"}})
        assert "result" in init, init
        mcp.stdin.write(json.dumps({"jsonrpc": "2.0",
                                    "method": "notifications/initialized"}) + "\n")
        mcp.stdin.flush()
        r = call(2, "tools/call", {"name": "recall", "arguments": {
            "query": "run the tests", "session": "mcp-s"}})
        assert "result" in r, r
        assert not r["result"].get("isError"), r
        # CLI queries beside the server's open home
        side = [popen_cli(home, *RECALL), popen_cli(home, "stats", "--json"),
                popen_cli(home, "lessons", "list", "--json"), popen_cli(home, "verify")]
        res = [p.communicate(timeout=60) for p in side]
        assert [p.returncode for p in side] == [0] * 4, [x[1] for x in res]
        r = call(3, "tools/call", {"name": "recall", "arguments": {
            "query": "run the tests", "session": "mcp-s2"}})
        assert "result" in r, r
        assert not r["result"].get("isError"), r
    finally:
        _out, err = mcp.communicate(timeout=60)
    assert mcp.returncode == 0, err
    assert count(home) == before + 3


GROW = textwrap.dedent("""
    import os, sys
    from lessonledger.ledger.lmdb_env import acquire, release
    from lessonledger.ledger.log import EventLog, NewEvent, LOG_NAME
    home = acquire(sys.argv[1], sync=False)
    log = EventLog(home, LOG_NAME)
    for batch in range(int(sys.argv[2])):
        log.append([NewEvent(stream=f"blob-{batch}-{i}", version=0, type="app.blob",
                             payload=os.urandom(1000 * 1000)) for i in range(20)])
    release(home)
""")


def test_a_long_lived_reader_after_the_file_grows_a_lot(tmp_path: Path) -> None:
    home = demo(tmp_path)
    proc = popen_cli(home, "metrics", "--port", "0", "--verify-every", "0")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "metrics at" in line, line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        scrape(port)
        size0 = (home / "data.mdb").stat().st_size
        done = subprocess.run([sys.executable, "-c", GROW, str(home), "10"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert (home / "data.mdb").stat().st_size > size0 + 150_000_000
        stats = json.loads(cli(home, "stats", "--json").stdout)
        after = scrape(port)
        heads = {k: v for k, v in after.items() if "head" in k}
        assert any(v == stats["head"] for v in heads.values()), (heads, stats["head"])
        for argv in (["log", "--from", str(stats["head"] - 2), "--json"], ["verify"],
                     RECALL, ["lessons", "list", "--json"]):
            got = cli(home, *argv)
            assert got.returncode == 0, (argv, got.stderr[-500:])
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


def test_recall_then_outcome_in_another_process_is_in_play(tmp_path: Path) -> None:
    home = demo(tmp_path)
    rec = cli(home, "recall", "--project", DEMO_P, "--session", "play", "--json",
              "run the tests")
    assert rec.returncode == 0, rec.stderr
    shown = [x["lesson_id"] for x in json.loads(rec.stdout)["lessons"]]
    line = json.dumps({"command": "observe_outcome", "key": "play-1", "session": "play",
                       "project": DEMO_P, "passed": True, "operations": [
                           {"op": "python -m pytest", "target": "tests", "ok": True,
                            "order": 0}]})
    pub = subprocess.run([sys.executable, "-m", "lessonledger.ops", "--home", str(home),
                          "publish", "-"], input=line + "\n", capture_output=True,
                         text=True, timeout=60, check=False)
    assert pub.returncode == 0, pub.stderr
    log = [json.loads(x) for x in cli(home, "log", "--json").stdout.splitlines()]
    moved = [r for r in log if r.get("session") == "play"
             and r["type"] in ("lesson.confirmed", "lesson.contradicted")]
    assert moved, [(r["position"], r["type"]) for r in log if r.get("session") == "play"]
    assert all(r["body"]["lesson_id"] in shown for r in moved)


@pytest.mark.parametrize("hold", [4.9, 5.2, 5.6])
def test_recall_record_given_up_at_the_5s_boundary(tmp_path: Path, hold: float) -> None:
    home = demo(tmp_path)
    before = count(home)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home), str(hold)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    rec = cli(home, *RECALL)
    holder.communicate(timeout=30)
    assert rec.returncode == 0, rec.stderr
    assert "Fatal" not in rec.stderr, rec.stderr
    assert "Traceback" not in rec.stderr, rec.stderr
    lost = "not written" in rec.stderr
    time.sleep(0.5)
    assert count(home) == before + (0 if lost else 1), (lost, rec.stderr)
    assert cli(home, "verify").returncode == 0


TWO_READERS = textwrap.dedent("""
    import sys
    from lessonledger.commands.read_side import Reader
    home, p = sys.argv[1], sys.argv[2]
    a = Reader(home, one_shot=True)
    b = Reader(home, one_shot=True)
    b.recall(p, "run the tests", session="seq")
    b.close()
    a.close()
    print("closed", b.unrecorded)
""")

THREADED_READERS = textwrap.dedent("""
    import sys, threading
    from lessonledger.commands.read_side import Reader
    home, p = sys.argv[1], sys.argv[2]
    barrier = threading.Barrier(8)
    errors, readers = [], []
    def go():
        try:
            barrier.wait()
            r = Reader(home, one_shot=True)
            readers.append(r)
            r.lessons(p)
        except Exception as e:
            errors.append(repr(e))
    ts = [threading.Thread(target=go) for _ in range(8)]
    [t.start() for t in ts]; [t.join() for t in ts]
    for r in readers:
        try:
            r.close()
        except Exception as e:
            errors.append("close: " + repr(e))
    print("errors", errors)
""")


def test_two_one_shot_readers_in_one_process_close_with_records(tmp_path: Path) -> None:
    home = demo(tmp_path)
    before = count(home)
    done = subprocess.run([sys.executable, "-c", TWO_READERS, str(home), DEMO_P],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-600:]
    assert count(home) == before + 1


def test_one_shot_readers_opened_by_threads_at_once(tmp_path: Path) -> None:
    home = demo(tmp_path)
    done = subprocess.run([sys.executable, "-c", THREADED_READERS, str(home), DEMO_P],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-600:]
    assert "errors []" in done.stdout, done.stdout[-1500:]


def test_erase_rerun_on_a_served_hub_home_and_its_replica(tmp_path: Path) -> None:
    hubtools = _hubtools()
    home = tmp_path / "home"
    secret = f"alice-private-{uuid.uuid4().hex}"
    alice_home(home, secret, bob=20)
    with hubtools.hub(home, tmp_path / "hub.log") as server:
        rep = tmp_path / "rep"
        done = subprocess.run([sys.executable, "-m", "lessonledger.ops", "clone",
                               server.endpoint, str(rep)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        first = cli(home, *ERASE)
        assert first.returncode == 3, first.stderr  # the hub holds the home: pending
        again = cli(home, *ERASE)
        assert again.returncode == 3, (again.stdout, again.stderr)
        assert b"unswept" in trees(home)
        on_rep = cli(rep, *ERASE)
        assert on_rep.returncode == 2, on_rep.stderr
        assert "replica" in on_rep.stderr, on_rep.stderr
        pulled = cli(rep, "pull")
        assert pulled.returncode == 0, pulled.stderr
        assert holding(rep, secret.encode()) == []
        assert b"unswept" not in trees(rep)
        assert cli(rep, "verify").returncode == 0
    last = cli(home, *ERASE)
    assert last.returncode == 0, last.stderr
    assert "erased already" in last.stdout
    assert holding(home, secret.encode()) == []
    assert b"unswept" not in trees(home)
