"""Seed 002, end to end: an approved tool hint cuts the steps of a skill's task, and
archiving it restores the baseline figures exactly.

The agent is a few lines of Python, not a model. Each session it resolves the authored
``deploy-service`` skill (once: resolution is cached for the session), then works
through the task's three subgoals (find the config, deploy, verify). For each it calls
tools until one works: the tool hints first, in the order resolution gives them, then
the skill's other tools in the order the skill declares them. Every call is a step. It
records the session's outcome with the calls it made; the hint it resolved is in play
for that outcome, so the hint's track record comes from these sessions.

The world is a fixed map from subgoal to the one tool that does it: the skill lists its
tools in an order that makes the deploy subgoal the slowest to find.

- **never**: no delta at all: the baseline steps per session.
- **staged**: after the first session the loop proposes a tool hint for the tool that
  deployed (provenance ``outcome``, the session's outcome as evidence); staged, it is
  inert: the steps are the baseline's.
- **active**: a person approves it: fewer steps, every session.
- **archived**: reverted: the steps, the effective text and its SHA-256 are exactly the
  baseline's again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from uuid import UUID

from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.projections.anchors import body_digest

SKILL = "deploy-service"
BODY = """---
name: deploy-service
---
# Deploy a service

## Find the configuration

Locate the service's configuration first.

## Deploy

Roll the new version out.

## Verify

Check the service is healthy.
"""
TOOLS = ["read_docs", "list_services", "status", "grep_logs", "deploy_cli"]
WORKS = {"find_config": "read_docs", "deploy": "deploy_cli", "verify": "status"}
PROJECT = hashlib.sha256(b"git@example.com:acme/infra.git").hexdigest()[:32]


@dataclass
class Session:
    """What one session did: its steps, its calls, what it resolved."""

    steps: int
    calls: list[tuple[str, str, bool]]
    text_digest: str
    tools: list[str]
    outcome_id: UUID | None = None


@dataclass
class Agent:
    ledger: Ledger
    sessions: list[Session] = field(default_factory=list)

    def run(self) -> Session:
        name = f"s{len(self.sessions)}"
        skill = self.ledger.skills.resolve(SKILL, BODY, session=name, scope=PROJECT)
        assert self.ledger.skills.resolve(SKILL, BODY, session=name, scope=PROJECT) is skill
        order = [*skill.tools, *(t for t in TOOLS if t not in skill.tools)]
        calls = []
        for subgoal, tool in WORKS.items():
            for candidate in order:
                calls.append((candidate, subgoal, candidate == tool))
                if candidate == tool:
                    break
        receipt = self.ledger.observe_outcome(
            key=f"outcome:{name}", project=PROJECT, passed=True, session=name,
            task="deploy the service", operations=[
                Operation(op=f"tool:{op}", target=target, ok=ok, order=i)
                for i, (op, target, ok) in enumerate(calls)])
        done = Session(len(calls), calls, skill.text_digest, skill.tools,
                       receipt.ids["outcome_id"])
        self.sessions.append(done)
        return done


def _propose_from(ledger: Ledger, session: Session) -> UUID:
    """The loop: the tool that did the slowest subgoal becomes a hint."""
    slowest = max(WORKS, key=lambda g: sum(1 for _, target, _ in session.calls
                                            if target == g))
    receipt = ledger.skills.propose(
        SKILL, tier=1, kind="tool_hint", payload=WORKS[slowest], provenance="outcome",
        scope=PROJECT, evidence=[session.outcome_id], key="hint-from-s0")
    return receipt.ids["delta_id"]


def test_an_approved_hint_cuts_steps_and_archiving_restores_the_baseline(home: str) -> None:
    with open_ledger(home, sync=False) as ledger:
        ledger.skills.register(SKILL, BODY, tools=TOOLS, version="1.0")
        agent = Agent(ledger)
        never = [agent.run() for _ in range(3)]
        hint = _propose_from(ledger, never[0])
        staged = [agent.run() for _ in range(2)]
        ledger.skills.approve([hint], actor="reviewer")
        active = [agent.run() for _ in range(6)]
        ledger.skills.archive([hint], actor="reviewer", reason="compare with the baseline")
        archived = [agent.run() for _ in range(3)]

        baseline = {(s.steps, tuple(s.calls), s.text_digest) for s in never}
        assert len(baseline) == 1
        [(base_steps, _, base_digest)] = baseline
        assert base_digest == body_digest(BODY)
        assert {(s.steps, tuple(s.calls), s.text_digest) for s in staged} == baseline
        assert all(s.tools == ["deploy_cli"] for s in active)
        assert {s.steps for s in active} == {7}
        assert base_steps == 9
        # Archiving gives back the baseline exactly: steps, calls, text and its digest.
        assert {(s.steps, tuple(s.calls), s.text_digest) for s in archived} == baseline
        # The hint's track record came from the sessions it was rendered in.
        [row] = ledger.skills.deltas()
        assert (row.status, row.total_attempts, row.total_successes) == ("archived", 6, 6)
        print(f"steps per session: never {base_steps}, staged {staged[0].steps}, "
              f"active {active[0].steps}, archived {archived[0].steps}")
