"""Every registered view keeps the contracts of ``tests/contracts.py``."""

from __future__ import annotations

from pathlib import Path

import zmq
from contracts import ProjectionContract
from lessonledger.commands import Ledger, Operation, open_ledger
from lessonledger.commands.access import GrantAccess, RevokeAccess
from lessonledger.projections.views import object_view, view_names
from lessonledger.sync.snapshots import take_snapshot

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


class TestObjects(ProjectionContract):
    view = "objects"

    def workload(self, ledger: Ledger, principal: str, text: str) -> None:
        _outcome(ledger, principal, text)
        take_snapshot(ledger, "main", "test")

    def test_an_erased_body_leaves_no_trace_in_the_view_or_its_saved_copy(
            self, tmp_path: Path) -> None:
        # The view holds envelopes only, never a body: erasure leaves it as it was (the
        # segment ids, the snapshots, the refs), but for the tombstones it adds.
        home, (alices, bobs) = self._home(tmp_path)
        with open_ledger(home, sync=False) as ledger:
            view = object_view(ledger.runner)
            before = view.dump()
            assert alices not in before
            assert bobs not in before
            ids, snapshots, refs = view.segment_ids(), view.snapshots, view.refs
            assert snapshots
            assert refs
            erased = ledger.erase(key="erase-alice", what="principal", subject="alice",
                                  reason="r")
            view = object_view(ledger.runner)
            assert view.segment_ids()[: len(ids) - 1] == ids[:-1]
            assert view.snapshots == snapshots
            assert view.refs == refs
            assert view.tombstones == frozenset(erased.erased)
            assert alices not in view.dump()

    def test_an_erasure_of_bodies_it_never_read_keeps_it_as_a_fresh_fold_would_be(
            self, tmp_path: Path) -> None:
        # The runner keeps this view at an erasure instead of folding it from 0: what it
        # keeps must be byte for byte what a fold from 0 of the erased log gives.
        home, _ = self._home(tmp_path)
        with open_ledger(home, sync=False) as ledger:
            kept = object_view(ledger.runner)
            snapshot_at = kept.snapshots[0].position
            ledger.erase(key="erase-alice", what="principal", subject="alice", reason="r")
            assert object_view(ledger.runner) is kept
            fresh = ledger.runner.fresh(ledger.log, None, ["objects"])["objects"]
            assert fresh.dump() == kept.dump()
            assert not kept.survives_erasure([snapshot_at])  # a body it read: refolded


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
