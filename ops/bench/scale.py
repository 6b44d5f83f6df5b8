"""Scale benchmark: a big home of agents' outcomes and lessons, and what it costs an agent.

A home is built the way agents build one: the lifecycle benchmark's fleet story (50
projects, a pool of shared traps, recalls, outcomes, proposals, a reconcile a day) runs
through :class:`Ledger` in one agent process until the log holds ``events`` events, in
group commits of :data:`BUILD_BATCH` calls (``execute_each``, as a hub writes; a
listing's record is submitted in its place in the batch) and without fsync: the build is
not what is measured, and one commit per call ran at 600-850 events/s. Then, each in a
fresh process:

- **open and first recall**: the time from opening a :class:`Ledger` on the home to the
  answer of its first recall (target 2 s), after the builder closed it (saved views);
- **steady state**: that process goes on with the story for ``steady`` calls, durable
  (an fsync per commit), and reports the bytes it handed to ``write`` calls against the
  stored size of the events those calls appended (envelope, body and index entries; target
  3x); then ``steady`` more with :data:`BATCH` commands per transaction, as a group
  commit makes them (queries recording nothing there), which separates what each
  commit costs LMDB (every page a transaction touches is written again, with the branch
  pages above it) from what the views cost;
- **peak RSS** of the builder and of that agent (``VmHWM``; target 400 MB), and at the
  end what of it is the process's own memory and what is ``data.mdb`` mapped in;
- **data.mdb** size over its live data (the pages its trees use);
- **pages per commit**: bytes written per commit over the page size, beside the depth of
  the log's trees. A commit rewrites, in each tree it changes, the leaf and every branch
  page above it, then the main tree (it holds the trees' roots), the free-page tree and a
  meta page: with the log, stream and id trees 3 deep that is 3 + 3 + 3 + 1 + 1 + 1 =
  12 pages, 48 KB, for one command of two or three events (about 5-7 KB stored), so one
  command per fsync'd commit cannot come near 3x (that needs 16 KB of events a commit);
  batched, each event's random stream and id keys still land on a page of their own.

Every figure is printed beside the baseline it is judged against, from the same run.

With ``home`` (``--keep-home DIR``) the home is built there once and kept, with the build's
figures beside it (``DIR.build.json``); a later run with the same ``DIR`` skips the
build and measures an agent on a fresh copy of it, so changes can be compared on one
home (a 2M-event build takes hours on a busy box).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import lmdb
from lessonledger.commands import ObserveOutcome, ProposeLesson, Reconcile
from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import AnyCommand, command_from
from lessonledger.commands.receipts import Receipt
from lessonledger.ledger.errors import LedgerConfigError
from lessonledger.ledger.events import LessonRecalled
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.submission import Submission
from lessonledger.ops.bench.lifecycle import call, story

__all__ = ["KeptHomeError", "run"]


class KeptHomeError(LedgerConfigError):
    """``--home`` names a directory that is not a home this bench built and kept.

    Attributes:
        path: the directory.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path} exists but has no {path}.build.json beside it: name a "
                         "directory that does not exist yet (the bench builds a home "
                         "there and keeps it) or one it built before")

#: Calls the steady-state agent makes after opening the home: about 20,000 events, so
#: the window holds whatever a ledger does only now and then (saving a view, say).
STEADY_CALLS = 14_000
#: Commands per write transaction in the batched phase (as a hub's group commit would).
BATCH = 50
#: The story's calls per group commit while building the home (no fsync there).
BUILD_BATCH = 200
_KINDS: dict[str, type[AnyCommand]] = {
    "outcome": ObserveOutcome, "proposal": ProposeLesson, "reconcile": Reconcile}


def _status(field: str) -> int:
    """A size from /proc/self/status, in bytes (0 where the kernel has no such line)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak_rss() -> int:
    """This process's peak resident set (VmHWM), in bytes."""
    return _status("VmHWM")


def _memory(prefix: str) -> dict[str, float]:
    """Peak RSS, and what is resident now: the process's own memory and mapped files.

    LMDB maps ``data.mdb``: every page a process reads counts in its RSS as a file page
    (the kernel may drop it at any time), so the peak reads as the sum of both.
    """
    return {f"{prefix}_peak_rss_mb": round(_peak_rss() / 1e6, 1),
            f"{prefix}_rss_anon_mb": round(_status("RssAnon") / 1e6, 1),
            f"{prefix}_rss_file_mb": round(_status("RssFile") / 1e6, 1)}


def _written() -> int:
    """Bytes this process has handed to write calls (``wchar`` of /proc/self/io)."""
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def _stored(path: str, start: int, stop: int) -> int:
    """The stored size of the events at positions ``start..stop``: keys and values.

    The envelope and body entries of the log tree, and each event's stream and id index
    entries (a key and an 8-byte position each).
    """
    home = acquire(path, sync=False)
    try:
        log = EventLog(home, LOG_NAME)
        total = 0
        for position, envelope, body, link in log.raw(start):
            if position > stop:
                break
            total += 9 + len(envelope) + len(link or b"") + (9 + len(body) if body else 0)
        for record in log.scan(start, stop):
            # The stream key (1 tag + 2 length + id + 8 version) and the id key, each
            # mapping to an 8-byte position.
            total += 11 + len(record.envelope.stream) + 8 + 8
            if record.envelope.event_id:
                total += len(record.envelope.event_id) + 8
        return total
    finally:
        release(home)


def _live(path: str) -> int:
    """Bytes of the pages the home's trees use (branch, leaf and overflow pages)."""
    env = lmdb.open(path, readonly=True, lock=False, max_dbs=128, subdir=True)
    try:
        size = env.stat()["psize"]
        pages = 0
        with env.begin() as txn:
            names = [key for key, _ in txn.cursor()]
            for name in names:
                stat = txn.stat(env.open_db(name, txn=txn, create=False))
                pages += stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
        main = env.stat()
        pages += main["branch_pages"] + main["leaf_pages"] + main["overflow_pages"]
        return int(pages * size)
    finally:
        env.close()


def _pages(path: str) -> tuple[int, dict[str, int]]:
    """The page size and the depth of each of the log's trees (a commit rewrites a path).

    Every commit writes, for each tree it changes, the leaf it changes and each branch
    page above it, then the main tree (which holds the trees' roots), the free-page tree
    and a meta page: this is the floor of bytes written per commit.
    """
    env = lmdb.open(path, readonly=True, lock=False, max_dbs=128, subdir=True)
    try:
        depths: dict[str, int] = {}
        with env.begin() as txn:
            for tree in ("log", "streams", "ids"):
                db = env.open_db(f"{LOG_NAME}.{tree}".encode(), txn=txn, create=False)
                depths[tree] = int(txn.stat(db)["depth"])
            views = env.open_db(b"views", txn=txn, create=False)
            depths["views"] = int(txn.stat(views)["depth"])
        return int(env.stat()["psize"]), depths
    finally:
        env.close()


def build(path: str, events: int) -> dict[str, Any]:
    """Run the story through one ledger until the log holds ``events``; the agent's figures.

    The story's calls go in group commits of :data:`BUILD_BATCH` (``execute_each``, as a
    hub writes): each query reads the view as the last commit left it and its record
    (the ``LessonRecalled`` an agent's listing writes) is submitted in the same batch, in
    its place among the commands, so the log holds what one agent calling one at a time
    would have written, but for which lessons a listing inside a batch shows.
    """
    started = time.perf_counter()
    steps, calls = story(), 0
    ledger = Ledger(path, sync=False)
    try:
        while ledger.head() < events:
            batch: list[AnyCommand | Submission] = []
            for step in itertools.islice(steps, BUILD_BATCH):
                calls += 1
                if step.kind == "query":
                    shown = _listing(ledger, step)
                    if shown is not None:
                        batch.append(shown)
                else:
                    batch.append(command_from(dict(step.fields), _KINDS[step.kind]))
            refused = [r for r in ledger.execute_each(batch) if not isinstance(r, Receipt)]
            if refused:
                raise refused[0]
        head = ledger.head()
    finally:
        ledger.close()
    seconds = time.perf_counter() - started
    return {"events": head, "calls": calls, "build_s": round(seconds, 1),
            "build_events_per_s": round(head / seconds), "build_calls_per_commit": BUILD_BATCH,
            } | _memory("build")


def _listing(ledger: Ledger, step: Any) -> Submission | None:
    """A query's listing, read now, and the record of it a recording listing would write."""
    project, session = step.fields["project"], step.fields["session"]
    rows = ledger.lessons(project, session=session, record=False)
    if not rows:
        return None
    eid = uuid.uuid4()
    return Submission(event_id=eid, stream=eid, version=0, occurred_at=datetime.now(UTC),
                      actor="agent", session=session, event=LessonRecalled(
                          lesson_ids=[r.lesson_id for r in rows][:1000], project=project,
                          query=""))


def agent(path: str, skip: int, steady: int) -> dict[str, Any]:
    """Open the home, answer a first recall, then make ``steady`` durable calls."""
    steps = story()
    for _ in itertools.islice(steps, skip):  # past what the builder already did
        pass
    ahead = list(itertools.islice(steps, steady))
    asks = next(step for step in ahead if step.kind == "query")
    started = time.perf_counter()
    ledger = Ledger(path, sync=True)
    try:
        opened = time.perf_counter() - started
        ledger.recall(asks.fields["project"], "make build test", session="scale-first")
        first = time.perf_counter() - started
        before, written = ledger.head(), _written()
        for step in ahead:
            call(ledger, step)
        ledger.flush()
        written, after = _written() - written, ledger.head()
        commands = sum(step.kind != "query" for step in ahead)
        batched = _batched(ledger, list(itertools.islice(steps, steady)))
    finally:
        ledger.close()
    return {"open_s": round(opened, 3), "open_and_first_recall_s": round(first, 3),
            "steady_first": before + 1, "steady_last": after,
            "steady_written": written, "steady_commands": commands} | batched | _memory("agent")


def _batched(ledger: Ledger, steps: list[Any]) -> dict[str, int]:
    """The story's commands, :data:`BATCH` per transaction; the bytes written for them.

    Its queries record nothing here: each recall's record commits on its own (a query
    that reads usage clocks waits for the one before it), so recorded, they would keep
    one commit per query whatever the commands do.
    """
    before, written = ledger.head(), _written()
    pending: list[AnyCommand] = []
    for step in steps:
        if step.kind == "query":
            ledger.lessons(step.fields["project"], session=step.fields["session"],
                           record=False)
            continue
        pending.append(command_from(dict(step.fields), _KINDS[step.kind]))
        if len(pending) == BATCH:
            ledger.execute_all(pending)
            pending = []
    commits = -(-sum(step.kind != "query" for step in steps) // BATCH)
    if pending:
        ledger.execute_all(pending)
    ledger.flush()
    return {"batched_first": before + 1, "batched_last": ledger.head(),
            "batched_written": _written() - written, "batched_commits": commits}


def _child(role: str, *args: str) -> dict[str, Any]:
    """Run ``role`` of this module in a fresh Python process; its JSON result.

    Its standard error is the caller's: a 2M-event build that failed after 68 minutes
    said only "exit status 1" when it was captured.
    """
    done = subprocess.run([sys.executable, "-m", __name__, role, *args],
                          check=True, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _built(path: str, kept: str | None, events: int,
           say: Callable[[str], None]) -> dict[str, Any]:
    """Build the home at ``path`` (or copy the one kept at ``kept``); the build's figures."""
    if kept is not None and os.path.exists(kept):
        figures = f"{kept}.build.json"
        if not os.path.isfile(figures):
            raise KeptHomeError(kept)
        with open(figures) as f:
            built: dict[str, Any] = json.load(f)
        say(f"measuring on a copy of the home kept at {kept} ({built['events']:,} events)")
        shutil.copytree(kept, path)
        return built
    say(f"building a home of {events:,} events (one agent process, {BUILD_BATCH} calls "
        "a group commit, no fsync)")
    built = _child("build", kept or path, str(events))
    say(f"built {built['events']:,} events in {built['build_s']} s")
    if kept is not None:
        with open(f"{kept}.build.json", "w") as f:
            json.dump(built, f)
        shutil.copytree(kept, path)
    return built


def run(events: int = 2_000_000, steady: int = STEADY_CALLS, workdir: str | None = None,
        progress: Callable[[str], None] | None = None, home: str | None = None,
        ) -> dict[str, Any]:
    """Build a home of ``events`` events, then measure an agent on it; return flat figures.

    ``home``: build it there and keep it, or measure on a copy of the one kept there.
    """
    def say(line: str) -> None:
        if progress is not None:
            progress(line)

    tmp = tempfile.mkdtemp(prefix="ll-scale-", dir=workdir)
    try:
        path = os.path.join(tmp, "home")
        built = _built(path, home, events, say)
        measured = _child("agent", path, str(built["calls"]), str(steady))
        first, last = measured.pop("steady_first"), measured.pop("steady_last")
        appended = max(last - first + 1, 0)
        stored = _stored(path, first, last) if appended else 0
        written = measured.pop("steady_written")
        b_first, b_last = measured.pop("batched_first"), measured.pop("batched_last")
        b_events = max(b_last - b_first + 1, 0)
        b_stored = _stored(path, b_first, b_last) if b_events else 0
        b_written = measured.pop("batched_written")
        size = os.path.getsize(os.path.join(path, "data.mdb"))
        live, page, depth = _live(path), *_pages(path)
        commits = measured.pop("steady_commands")
        b_commits = measured.pop("batched_commits")
        per_event = written / appended if appended else 0.0
        own = stored / appended if appended else 0.0
        return built | measured | {
            "target_open_and_first_recall_s": 2.0,
            "target_peak_rss_mb": 400,
            "steady_calls": steady,
            "steady_events": appended,
            "steady_written_bytes_per_call": round(written / steady, 1),
            "steady_written_bytes_per_event": round(per_event, 1),
            "steady_stored_bytes_per_event": round(own, 1),
            "written_vs_stored": round(per_event / own, 2) if own else 0.0,
            "target_written_vs_stored": 3.0,
            "batched_commands_per_commit": BATCH,
            "batched_events": b_events,
            "batched_written_vs_stored": round(b_written / b_stored, 2) if b_stored else 0.0,
            # What a commit costs LMDB, in pages: the floor of written bytes per commit.
            "page_bytes": page, "log_tree_depths": depth,
            "steady_commits": commits,
            "steady_pages_per_commit": round(written / commits / page, 1) if commits else 0.0,
            "steady_events_per_commit": round(appended / commits, 2) if commits else 0.0,
            "batched_commits": b_commits,
            "batched_pages_per_commit": round(b_written / b_commits / page, 1)
            if b_commits else 0.0,
            "batched_events_per_commit": round(b_events / b_commits, 1) if b_commits else 0.0,
            "data_mdb_bytes": size, "live_bytes": live,
            "data_mdb_vs_live": round(size / live, 2) if live else 0.0,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "build":
        print(json.dumps(build(rest[0], int(rest[1]))))
    else:
        print(json.dumps(agent(rest[0], int(rest[1]), int(rest[2]))))
