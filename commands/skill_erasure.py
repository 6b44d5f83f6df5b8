"""What an erasure takes of the skill side: the deltas and facts derived from it.

Given the positions an erasure takes already (a principal's or session's events, an
outcome and what was decided from it), this adds:

- every delta and fact whose ``evidence`` cites an erased outcome;
- every event about an erased delta (its approval, rejection, archive or re-staging,
  whoever wrote it): once the delta's content is gone, its history goes with it.

Skill bases stay unless the erasure names them itself: they hold a digest and section
slugs of the caller's file, no delta content. Retirement (archive) deletes nothing;
only this does.
"""

from __future__ import annotations

from uuid import UUID

import msgspec
from lessonledger.ledger.events import (
    FACT_LEARNED,
    NAMES_A_DELTA,
    OUTCOME_OBSERVED,
    AnyEvent,
    DeltaProposed,
    FactLearned,
    OutcomeObserved,
    decode_event,
)
from lessonledger.ledger.log import Writing

__all__ = ["with_skill_derived"]

_ABOUT_A_DELTA = NAMES_A_DELTA
_READ = _ABOUT_A_DELTA | {OUTCOME_OBSERVED, FACT_LEARNED}


def _event(payload: bytes) -> AnyEvent | None:
    try:
        return decode_event(payload)
    except msgspec.DecodeError:
        return None


def with_skill_derived(log: Writing, positions: list[int]) -> list[int]:
    """``positions`` with the deltas and facts derived from them, and the deltas' events."""
    erased = set(positions)
    # An outcome counts only when it is erased itself: the others are not decoded (on a
    # log of outcomes that was most of an erasure's time).
    records = [(r.envelope.position, r.envelope.type, event) for r in log.scan()
               if r.payload is not None and r.envelope.type in _READ
               and (r.envelope.type != OUTCOME_OBSERVED or r.envelope.position in erased)
               and (event := _event(r.payload)) is not None]
    outcomes = {e.outcome_id for p, _, e in records
                if p in erased and isinstance(e, OutcomeObserved)}
    deltas: set[UUID] = set()
    for position, _, event in records:
        if isinstance(event, DeltaProposed | FactLearned) and (
                position in erased or outcomes.intersection(event.evidence)):
            erased.add(position)
            if isinstance(event, DeltaProposed):
                deltas.add(event.delta_id)
    erased.update(position for position, kind, event in records
                  if kind in _ABOUT_A_DELTA and getattr(event, "delta_id", None) in deltas)
    return sorted(erased)
