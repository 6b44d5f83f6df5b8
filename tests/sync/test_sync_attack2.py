"""Attacks on serve-sync by a key granted one project (wave 2, attack2).

A real hub process serving with its CURVE key; replicas clone and push through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

from lessonledger.commands import Operation, open_ledger
from sync_workload import PROJECTS
from test_sync_access import Setup, raw, run, setup

__all__ = ["setup"]  # the fixture, shared

NOTE = "retired after the confidential merger with ZetaCorp"


def test_a_retirement_note_of_an_unread_project_is_withheld_from_a_clone(
        setup: Setup, tmp_path: Path) -> None:
    env, hub, keys, url = setup
    with open_ledger(hub, sync=False) as ledger:
        outcome = ledger.observe_outcome(
            key="secret-o", principal="pat", project=PROJECTS[1], passed=True, operations=[
                Operation(op="deploy-old", target="prod", ok=False, error="refused", order=0),
                Operation(op="deploy-new", target="prod", ok=True, order=1)])
        ledger.propose_lesson(
            key="secret-l", principal="pat", project=PROJECTS[1], kind="prefer",
            text="deploy with the new pipeline", avoid_op="deploy-old",
            prefer_op="deploy-new", target="prod", source="user",
            evidence=[outcome.ids["outcome_id"]])
        lesson = next(row for row in ledger.catalogue(PROJECTS[1], everything=True)
                      if row.target == "prod" and row.status != "superseded")
        assert lesson.scope == PROJECTS[1]
        ledger.retire_lesson(key="retire-secret", lesson_id=lesson.lesson_id, reason=NOTE)
    replica = tmp_path / "r"
    run(env, "clone", url, str(replica), "--key", str(keys / "reader.key_secret"),
        "--hub-key", str(keys / "hub.key"), "--json")
    hub_bodies = [body for _, _, body, _ in raw(hub) if body]
    assert any(NOTE.encode() in body for body in hub_bodies)
    for _, _, body, _ in raw(replica):
        assert body is None or NOTE.encode() not in body, "a note on a lesson of a project " \
            "the key may not read reached its replica"
        assert body is None or str(lesson.lesson_id).encode() not in body
    verified = json.loads(run(env, "--home", str(replica), "verify", "--json").stdout)
    assert verified["ok"]
