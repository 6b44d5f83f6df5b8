"""Prometheus metrics, scraped from real processes while another process writes.

``lessonledger metrics`` serves a home while a writer process appends outcomes and
recalls; every scrape is parsed with ``prometheus_client.parser`` and its counts must
equal the log's own, counted here from the log up to the head the scrape reports.
``lessonledger mcp --metrics`` adds what only the serving process sees: requests,
refusals and latencies.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

import anyio
from in_process import cli
from lessonledger.commands import Operation, open_ledger
from lessonledger.commands.read_side import open_reader
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import EventLog
from lessonledger.ops.config import LOG_NAME
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from prometheus_client.parser import text_string_to_metric_families

CLI = str(Path(sys.executable).with_name("lessonledger"))
PROJECTS = ["1" * 32, "2" * 32, "3" * 32]
SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

WRITER = """
import sys, time
from pathlib import Path
from lessonledger.commands import Operation, open_ledger

home, stop = sys.argv[1], Path(sys.argv[2])
projects = ["1" * 32, "2" * 32, "3" * 32]
deadline = time.monotonic() + 60
with open_ledger(home, sync=False) as ledger:
    i = 0
    while not stop.exists() and time.monotonic() < deadline:
        project = projects[i % 3]
        ledger.recall(project, "run the tests", session=f"w-{i}", principal="bob")
        ledger.observe_outcome(key=f"w-{i}", project=project, session=f"w-{i}",
            principal="bob", passed=True, operations=[
                Operation(op=f"tool-{i % 7}:a", target=f"t{i % 5}", ok=False, error="bad"),
                Operation(op=f"tool-{i % 7}:b", target=f"t{i % 5}", ok=True, order=1)])
        i += 1
        if i == 1:
            print("writing", flush=True)
"""


def _seed(home: Path) -> None:
    """A home with alice's work erased, so erasures and erased bodies are not zero."""
    assert cli("--home", str(home), "init").returncode == 0  # main(), in this process
    with open_ledger(home, sync=False) as ledger:
        for i, who in enumerate(["alice", "alice", "carol"]):
            ledger.observe_outcome(key=f"seed-{i}", project=PROJECTS[0], session=f"s-{i}",
                                   principal=who, passed=True, operations=[
                                       Operation(op="pytest:tests/", target="tests", ok=False,
                                                 error="no conftest"),
                                       Operation(op="pytest:root", target="tests", ok=True,
                                                 order=1)])
        ledger.erase(key="erase-alice", what="principal", subject="alice", reason="request")


def _url(stream: IO[str]) -> str:
    line = stream.readline()
    found = re.search(r"http://\S+/metrics", line)
    assert found, line
    return found.group(0)


def _scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = collections.defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def _log_counts(home: Path, head: int) -> tuple[dict[str, int], int]:
    """Counts by type and erased bodies, from the log itself, up to ``head``."""
    lmdb_home = acquire(str(home))
    try:
        types: collections.Counter[str] = collections.Counter()
        erased = 0
        for record in EventLog(lmdb_home, LOG_NAME).scan(stop=head):
            types[record.envelope.type] += 1
            erased += record.payload is None
        return dict(types), erased
    finally:
        release(lmdb_home)


def _by_type(samples: dict[str, dict[tuple[tuple[str, str], ...], float]]) -> dict[str, int]:
    return {dict(labels)["type"]: int(value)
            for labels, value in samples["lessonledger_events_appended_total"].items()}


def test_a_scrape_during_load_counts_what_the_log_holds(tmp_path: Path) -> None:
    home, stop = tmp_path / "home", tmp_path / "stop"
    _seed(home)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(home), str(stop)],
                              stdout=subprocess.PIPE, text=True)
    server = subprocess.Popen([CLI, "--home", str(home), "metrics", "--port", "0",
                               "--verify-every", "0.2"], stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "writing\n"
        assert server.stderr is not None
        url = _url(server.stderr)
        heads = []
        for _ in range(5):
            samples = _scrape(url)
            head = int(samples["lessonledger_log_head"][()])
            heads.append(head)
            types, erased = _log_counts(home, head)
            assert _by_type(samples) == types
            assert samples["lessonledger_erased_bodies"][()] == erased > 0
            assert samples["lessonledger_erasures_total"] == {(("what", "principal"),): 1.0}
            time.sleep(0.3)
        assert writer.poll() is None, "the writer was still appending"
        assert heads == sorted(heads)
        assert heads[-1] > heads[0], f"the scrapes saw the log grow: {heads}"
        stop.touch()
        assert writer.wait(timeout=60) == 0
        final = _scrape(url)
        stats = cli("--home", str(home), "stats", "--json")  # main(), in this process
        assert stats.returncode == 0, stats.stderr
        counted = json.loads(stats.stdout)
        assert final["lessonledger_log_head"][()] == counted["head"]
        assert _by_type(final) == counted["events_by_type"]
        assert final["lessonledger_erased_bodies"][()] == counted["erased_bodies"]
        with open_reader(home) as reader:
            rows = reader.catalogue(everything=True)
        tally = collections.Counter(
            (("scope", "global" if r.scope == "global" else "project"), ("status", r.status))
            for r in rows)
        assert {k: int(v) for k, v in final["lessonledger_lessons"].items()} == dict(tally)
        assert sum(tally.values()) > 3
        deadline = time.monotonic() + 30
        while "lessonledger_verify_ok" not in final and time.monotonic() < deadline:
            final = _scrape(url)
        assert final["lessonledger_verify_ok"][()] == 1.0
        assert final["lessonledger_verify_problems"][()] == 0.0
    finally:
        stop.touch()
        writer.wait(timeout=60)
        server.terminate()
        code = server.wait(timeout=30)
        for stream in (writer.stdout, server.stderr):
            if stream is not None:
                stream.close()
    assert code == 0, "SIGTERM stops the server cleanly"


def test_the_mcp_server_counts_and_times_what_it_serves(tmp_path: Path) -> None:
    home, errors = tmp_path / "home", tmp_path / "stderr"
    assert cli("--home", str(home), "init").returncode == 0  # main(), in this process
    params = StdioServerParameters(command=CLI, args=[
        "--home", str(home), "mcp", "--project", PROJECTS[0], "--metrics", "127.0.0.1:0"])
    trap = [{"op": "make", "target": "build", "ok": False, "error": "no rule"},
            {"op": "ninja", "target": "build", "ok": True, "order": 1}]

    async def body() -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        with errors.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(2):
                    assert not (await session.call_tool("recall", {"query": "build"})).is_error
                assert not (await session.call_tool("observe_outcome", {
                    "key": "t-1", "passed": True, "operations": trap})).is_error
                assert (await session.call_tool("observe_outcome", {
                    "key": "t-2", "passed": False, "operations": [
                        {"op": "deploy", "target": "prod", "ok": False, "error": SECRET}]})
                        ).is_error
                assert (await session.call_tool("why", {"lesson": "ffff"})).is_error
                with errors.open() as written:
                    url = _url(written)
                return _scrape(url)

    samples = anyio.run(body)
    commands = {dict(k)["kind"]: v for k, v in samples["lessonledger_commands_total"].items()}
    assert commands == {"recall": 2, "observe_outcome": 2, "why": 1}
    refusals = {tuple(sorted(dict(k).values())): v
                for k, v in samples["lessonledger_refusals_total"].items()}
    assert refusals == {("CredentialError", "observe_outcome"): 1,
                        ("LessonNotFoundError", "why"): 1}
    assert samples["lessonledger_recall_seconds_count"][()] == 2
    assert samples["lessonledger_commit_seconds_count"][()] == 1
    assert samples["lessonledger_commit_seconds_sum"][()] > 0
    assert samples["lessonledger_commit_batch_size_sum"][()] == 1
    # The log's own counts are there too, from the same process.
    assert samples["lessonledger_log_head"][()] >= 2
    assert os.path.getsize(errors) > 0
