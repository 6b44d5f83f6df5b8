"""``ledger.skills`` through a hub: RemoteSkills and ``--to`` on the skill verbs.

A real hub process on 127.0.0.1 (keyless, then with CURVE keys and grants); the answers
are compared with the local ``Ledger.skills`` on the hub's own home.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hubtools import HubProcess, curve_hub, hub
from in_process import cli
from lessonledger.commands import Ledger, open_ledger
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.sync import RemoteLedger

P, Q = "a" * 32, "b" * 32
BODY = "# Triage\n\n## Drafting replies\nBe kind.\n"


#: The skill verbs by main() in this process, against the hub's process: their talk with
#: the hub over its socket is under test, not a process of their own.
_cli = cli


def test_remote_skills_answer_as_the_local_skills_do(tmp_path: Path) -> None:
    home = tmp_path / "h"
    with hub(home, tmp_path / "log") as server, RemoteLedger(server.endpoint) as remote:
        skills = remote.skills
        skills.register("triage", BODY, tools=["search"])
        staged = skills.propose("triage", tier=3, kind="preference",
                                anchor="drafting-replies", provenance="user_instruction",
                                payload="Keep declines to two sentences.", key="p-1")
        delta = staged.ids["delta_id"]
        assert skills.propose("triage", tier=3, kind="preference",
                              anchor="drafting-replies", provenance="user_instruction",
                              payload="Keep declines to two sentences.",
                              key="p-1").positions == staged.positions
        assert skills.find_delta(str(delta)[:8]) == delta
        skills.approve([delta])
        skills.learn_fact("editor", "tabs", "4", key="f-1")
        skills.learn_fact("shell", "pager", "less", key="f-2")
        skills.declare_consumer("vim", "editor", key="c-1")
        first = skills.resolve("triage", BODY, session="s-1")
        assert "two sentences" in first.text
        head = remote.head()
        assert skills.resolve("triage", BODY, session="s-1") == first
        assert remote.head() == head, "a session's first resolution is recorded once"
        without, with_it = skills.diff("triage", BODY, delta)
        with open_ledger(home, sync=False) as local:
            mine = local.skills
            assert skills.deltas() == mine.deltas()
            assert skills.deltas("triage", "user", "active") == mine.deltas(
                "triage", "user", "active")
            assert skills.base("triage") == mine.base("triage")
            assert skills.base("nothing") is None
            assert skills.fact_list() == mine.fact_list()
            assert [f.fact.namespace for f in skills.fact_list(inert=True)] == ["shell"]
            assert skills.inert() == mine.inert()
            assert skills.learned("editor", None) == mine.learned("editor", None) == {
                "tabs": "4"}
            assert skills.learned("nothing", "none") == "none"
            assert (without, with_it) == mine.diff("triage", BODY, delta)
            # The session's record was written by the hub, once.
            assert mine.resolve("triage", BODY, session="s-1").rendered == first.rendered
        assert server.terminate() == 0


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, HubProcess]]:
    def prepare(ledger: Ledger) -> None:
        ledger.skills.register("triage", BODY)
        for scope, text in ((P, "mine"), (Q, "theirs"), ("global", "everyone's")):
            receipt = ledger.skills.propose(
                "triage", tier=3, kind="preference", anchor="drafting-replies",
                provenance="user_instruction", payload=f"Say {text}.", scope=scope)
            ledger.skills.approve([receipt.ids["delta_id"]])
        ledger.skills.learn_fact("editor", "tabs", "2", scope=Q)

    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "agent": ("ada", {"read": [P], "write": [P]}),
        "admin": ("root", {"admin": True, "read": [P, Q], "write": [P]})}
    env = {**os.environ, "LESSONLEDGER_KEYS": str(tmp_path / "keys")}
    with curve_hub(tmp_path, grants, admin="admin", prepare=prepare) as (server, keys):
        yield env, keys.dir, server


def test_a_key_sees_the_deltas_and_facts_of_what_it_may_read(
        keyed: tuple[dict[str, str], Path, HubProcess]) -> None:
    env, keys, server = keyed
    agent = RemoteLedger(server.endpoint, key=keys / "agent.key_secret",
                         server_key=keys / "hub.key", timeout=2.0, deadline=60)
    with agent:
        payloads = sorted(r.payload for r in agent.skills.deltas())
        assert payloads == ["Say everyone's.", "Say mine."]
        assert agent.skills.fact_list() == []
        with pytest.raises(AccessRefusedError):
            agent.skills.resolve("triage", BODY, scope=Q)
        with pytest.raises(AccessRefusedError):
            agent.skills.learned("editor", None, scope=Q)
        mine = agent.skills.resolve("triage", BODY, scope=P, session="s-1")
        assert "Say mine." in mine.text
        assert "theirs" not in mine.text
        # Its resolution is recorded under its own principal (a write grant on P).
        with open_ledger(server.home, sync=False) as local:
            assert local.skills.first_recorded("s-1", "triage", "user", P)
        with pytest.raises(AccessRefusedError):
            agent.skills.register("triage", BODY + "more\n")
    # The CLI's skill verbs take --to, with --key-file for the client's key.
    to = ["--to", server.endpoint, "--key-file", str(keys / "admin.key_secret"),
          "--server-key", str(keys / "hub.key")]
    skill = server.home.parent / "SKILL.md"
    skill.write_text(BODY)
    listed = _cli("deltas", "list", *to, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 3
    proposed = _cli("deltas", "propose", "triage", "--tier", "3", "--kind", "caveat",
                    "--payload", "Never promise dates.", "--scope", P,
                    "--anchor", "drafting-replies", "--key", "cli-p", *to, "--json",
                    env=env)
    assert proposed.returncode == 0, proposed.stderr
    delta = json.loads(proposed.stdout)["delta_id"]
    approved = _cli("deltas", "approve", delta[:8], *to, "--json", env=env)
    assert approved.returncode == 0, approved.stderr
    resolved = _cli("skill", "resolve", "triage", str(skill), "--scope", P, *to,
                    "--json", env=env)
    assert "Never promise dates." in json.loads(resolved.stdout)["text"]
    diff = _cli("skill", "diff", "triage", str(skill), delta[:8], "--scope", P, *to,
                env=env)
    assert diff.returncode == 0, diff.stderr
    learned = _cli("facts", "learn", "shell", "pager", "less", *to, env=env)
    assert learned.returncode == 0, learned.stderr
    facts = _cli("facts", "list", *to, "--json", env=env)
    assert {f["namespace"] for f in json.loads(facts.stdout)} == {"editor", "shell"}
    inert = _cli("facts", "inert", *to, "--json", env=env)
    assert len(json.loads(inert.stdout)) == 2
    here = _cli("--home", str(server.home), "deltas", "list", "--json", env=env)
    assert json.loads(here.stdout) == json.loads(
        _cli("deltas", "list", *to, "--json", env=env).stdout)
    refused = _cli("deltas", "list", "--to", server.endpoint, "--key-file",
                   str(keys / "agent.key_secret"), "--server-key", str(keys / "hub.key"),
                   "--json", env=env)
    assert {r["scope"] for r in json.loads(refused.stdout)} == {P, "global"}
    assert server.terminate() == 0
