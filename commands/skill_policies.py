"""The track-record policy: deltas earn ``active`` on measured outcomes, never on opinion.

Run after every ``OutcomeObserved`` is folded, for each delta in play for it (rendered
in its session; an outcome's ``in_play`` list does not count for deltas) in its
project. A delta's record is its
attempts and successes since its status last changed (:mod:`.deltas`):

- a **staged** delta proposed with ``auto_approve``, of trusted provenance (not
  ``untrusted``), with at least :data:`MIN_SAMPLES` attempts at a success rate of at
  least :data:`THRESHOLD` is approved, ``by="policy:track-record"``;
- an **active** delta with at least :data:`MIN_SAMPLES` attempts below that rate is
  staged again (``DeltaRestaged``), inert until approved once more (with a fresh record).

Pure, like :func:`lessonledger.commands.policies.react`; the ledger appends what it
decides under ids derived from the outcome's, so nothing is decided twice.
"""

from __future__ import annotations

from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.events import (
    OUTCOME_OBSERVED,
    AnyEvent,
    DeltaApproved,
    DeltaRestaged,
    OutcomeObserved,
)
from lessonledger.projections.capabilities import connector_only
from lessonledger.projections.deltas import DeltaRow, DeltaView

__all__ = ["BY_POLICY", "MIN_SAMPLES", "SKILL_TRIGGERS", "THRESHOLD", "react_skills"]

#: Event types the track-record policy reacts to.
SKILL_TRIGGERS = frozenset({OUTCOME_OBSERVED})
#: Attributed outcomes a record needs before it counts.
MIN_SAMPLES = 5
#: The success rate a record must hold.
THRESHOLD = 0.85
#: The ``by`` of an approval the policy decided.
BY_POLICY = "policy:track-record"


def _meets(row: DeltaRow) -> bool:
    return row.successes >= THRESHOLD * row.attempts


def react_skills(view: DeltaView, event: AnyEvent, envelope: Envelope) -> list[AnyEvent]:
    """What the track record decides after ``event`` (only outcomes decide anything)."""
    if not isinstance(event, OutcomeObserved):
        return []
    decided: list[AnyEvent] = []
    for delta_id in view.rendered_in(envelope.session):
        row = view.deltas.get(delta_id)
        if row is None or row.scope not in (event.project, "global") or (
                row.attempts < MIN_SAMPLES):
            continue
        if row.status == "active" and not _meets(row):
            decided.append(DeltaRestaged(delta_id=delta_id, attempts=row.attempts,
                                         successes=row.successes,
                                         outcome_id=event.outcome_id))
        elif (row.status == "staged" and row.auto_approve and row.provenance != "untrusted"
              and _meets(row)):
            base = view.base(row.skill, row.root)
            if (base is not None and base.body_digest == row.base_digest
                    and connector_only(base.permissions)):
                decided.append(DeltaApproved(delta_id=delta_id, by=BY_POLICY,
                                             base_digest=base.body_digest))
    return decided
