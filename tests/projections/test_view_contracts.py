"""Every registered view keeps the contracts of ``tests/contracts.py``."""

from __future__ import annotations

import zmq
from contracts import ProjectionContract
from lessonledger.commands import Ledger, Operation
from lessonledger.commands.access import GrantAccess, RevokeAccess
from lessonledger.projections.views import view_names

P = "3f9a0c1b2d4e5f60"
BODY = "# Triage\n\nSort the inbox.\n\n## Replies\n\nDraft short replies.\n"


def _outcome(ledger: Ledger, principal: str, text: str) -> bytes:
    receipt = ledger.observe_outcome(
        key=f"{principal}-o", principal=principal, session=f"{principal}-s", project=P,
        passed=True, task=text, operations=[
            Operation(op=f"{principal}-build", target="t", ok=False, error=text[:100]),
            Operation(op=f"{principal}-build-fixed", target="t", ok=True, order=1)])
    return str(receipt.ids["outcome_id"]).encode()


class TestLessons(ProjectionContract):
    view = "lessons"

    def workload(self, ledger: Ledger, principal: str, text: str) -> None:
        _outcome(ledger, principal, text)
        ledger.recall(P, text, session=f"{principal}-s", principal=principal)
        ledger.flush()


class TestAudit(ProjectionContract):
    view = "audit"

    def workload(self, ledger: Ledger, principal: str, text: str) -> bytes:
        return _outcome(ledger, principal, text)  # the index holds the outcome's id


class TestOutcomes(ProjectionContract):
    view = "outcomes"

    def workload(self, ledger: Ledger, principal: str, text: str) -> None:
        _outcome(ledger, principal, text)


class TestDeltas(ProjectionContract):
    view = "deltas"

    def workload(self, ledger: Ledger, principal: str, text: str) -> None:
        if ledger.skills.base("triage") is None:
            ledger.skills.register("triage", BODY, tools=["search"], key="register")
        delta = ledger.skills.propose(
            "triage", tier=3, kind="preference", anchor="replies", payload=f"Say {text}.",
            provenance="user_instruction", principal=principal, key=f"{principal}-d")
        ledger.skills.approve([delta.ids["delta_id"]], principal=principal,
                              key=f"{principal}-a")


class TestFacts(ProjectionContract):
    view = "facts"

    def workload(self, ledger: Ledger, principal: str, text: str) -> None:
        ledger.skills.learn_fact("senders", principal, text, principal=principal)


def test_every_registered_view_has_its_contract_test() -> None:
    tested = {kind.view for kind in ProjectionContract.__subclasses__()}
    assert tested == set(view_names())


class TestAccess(ProjectionContract):
    view = "access"

    def workload(self, ledger: Ledger, principal: str, text: str) -> bytes:
        # Key names carry the text's unique part: a revoked key (its name stays in the
        # view as revoked) and a granted one (its grant). The revocation's envelope
        # names nobody: erasing the grantee takes it through the key it revoked.
        mark = text.removeprefix("SECRET<").removesuffix(">")
        for name in (f"old-{mark}", f"now-{mark}"):
            ledger.execute(GrantAccess(key=f"g-{name}", key_name=name, principal=principal,
                                       public_key=zmq.curve_keypair()[0].decode(),
                                       read=[P], write=[P]))
        ledger.execute(RevokeAccess(key=f"r-{mark}", key_name=f"old-{mark}"))
        return mark.encode()
