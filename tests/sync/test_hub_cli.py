"""The CLI against a hub: ``publish --to``, ``--to`` on the queries, ``status``, ``serve``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hubtools import hub, lessonledger
from in_process import cli

P = "a" * 32
LINE = json.dumps({"command": "observe_outcome", "key": "cli-1", "project": P,
                   "passed": True, "operations": [
                       {"op": "pytest:tests/", "target": "tests", "ok": False,
                        "error": "no conftest"},
                       {"op": "pytest:root", "target": "tests", "ok": True, "order": 1}]})


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([lessonledger(), *args], input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_verbs_ask_a_hub_with_to(tmp_path: Path) -> None:
    # The verbs by main() in this process (in_process.cli), against the hub's process:
    # their talk with the hub over its socket is under test, not a process of their own.
    run = cli

    with hub(tmp_path / "h", tmp_path / "log") as server:
        to = ["--to", server.endpoint]
        published = run("publish", *to, stdin=LINE + "\n")
        assert published.returncode == 0, published.stderr
        receipt = json.loads(published.stdout)
        assert receipt["key"] == "cli-1"
        assert receipt["positions"] == [1]
        again = run("publish", *to, stdin=LINE + "\n")
        assert json.loads(again.stdout) == receipt
        listing = run("lessons", "list", *to, "--json")
        assert listing.returncode == 0, listing.stderr
        lesson = json.loads(listing.stdout.splitlines()[0])
        assert lesson["target"] == "tests"
        recall = run("recall", *to, "--project", P, "run the tests", "--json")
        assert "pytest:root" in json.loads(recall.stdout)["section"]
        check = run("check", *to, "--project", P, "pytest:tests/", "tests", "--json")
        assert json.loads(check.stdout)["supporting"] or json.loads(check.stdout)["opposing"]
        why = run("why", *to, lesson["lesson_id"][:12], "--json")
        assert why.returncode == 0, why.stderr
        assert json.loads(why.stdout)["lesson"]["lesson_id"] == lesson["lesson_id"]
        shown = run("lessons", "show", *to, lesson["lesson_id"], "--json")
        assert json.loads(shown.stdout)["lesson_id"] == lesson["lesson_id"]
        log = run("log", *to, "--json", "--limit", "2")
        assert [json.loads(line)["position"] for line in log.stdout.splitlines()] == [1, 2]
        status = run("status", *to, "--json")
        assert json.loads(status.stdout)["head"] >= 2
        human = run("status", *to)
        assert "batches" in human.stdout
        refused = run("recall", *to, "--project", "nope", "x")
        assert refused.returncode == 2
        assert len(refused.stderr.strip().splitlines()) == 1
        assert "digest" in refused.stderr
        assert server.terminate() == 0


def test_serve_refuses_a_non_loopback_bind_without_keys(tmp_path: Path) -> None:
    assert run("--home", str(tmp_path / "h"), "init").returncode == 0
    refused = run("--home", str(tmp_path / "h"), "serve", "--bind", "tcp://0.0.0.0:7999")
    assert refused.returncode == 2
    assert "without CURVE keys" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_serve_refuses_more_query_workers_than_it_may_start(tmp_path: Path) -> None:
    """Each worker is a process folding every event: a typo of 100000 starts none."""
    refused = run("--home", str(tmp_path / "h"), "serve", "--query-workers", "100000")
    assert refused.returncode == 2
    assert "--query-workers takes a count from 1 to" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "h").exists()


def test_a_hub_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    from hubtools import free_ports

    (port,) = free_ports(1)
    down = subprocess.run([lessonledger(), "status", "--to", f"tcp://127.0.0.1:{port}",
                           "--wait", "1"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin"})
    assert down.returncode == 2
    assert "no reply from the hub" in down.stderr
