"""The lesson rules' constants (DESIGN §4), as one configuration object with the defaults.

The view's arithmetic and the policies' thresholds both read these, so changing a
figure changes it everywhere, and a rebuilt view agrees with the policies that ran.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import msgspec
from lessonledger.ledger.events import Longevity

__all__ = ["DAY_NS", "RULES_VERSION", "Rules", "clamp", "figures_of", "looks_transient",
           "rules_from"]

DAY_NS = 86_400 * 10**9

#: The version of the rules' logic (what the policies decide, and how the view folds):
#: 1 is DESIGN §4's as first built, 2 issue 12's, 3 issue 12's on its independent world
#: (rule 10: a lesson whose preferred operation failed for good is in doubt there; and the
#: rules after it in the README). Recorded with the figures in force
#: (``RulesAdopted``), so ``why`` can say which rules a lesson's moves were made under.
RULES_VERSION = 3


class Rules(msgspec.Struct, frozen=True, kw_only=True):
    """The figures of the lesson lifecycle.

    Issue 12, rule 9: these were constructor configuration only, so a view rebuilt under
    other figures did not match what the policies had decided, and ``why`` could not say
    which rules were in force. Now the figures a ledger is opened with are recorded in the
    log (``RulesAdopted``) at its first write if they are not the ones in force, and the
    view folds every position under the rules in force there (the defaults before any
    adoption). A ledger opened without rules keeps whatever the log says is in force.

    Attributes:
        start_loop: starting confidence of a lesson the loop derived mechanically.
        start_extractor: of one an extractor (or a person) proposed with evidence.
        start_claim: of a claim: the model's own, or any lesson without evidence.
        start_avoid: of an ``avoid`` lesson the loop learned from a dead end (issue 12,
            rule 5): lower than a preference, so one contradiction (the operation
            working) takes it under the floor, and unused it decays away in 10 passes
            rather than 15 (seed 003: negative items age out faster).
        confirm: added per attributed confirmation.
        contradict: added per attributed contradiction (negative).
        decay: lost per reconcile pass in which the lesson was not in play.
        floor: below this a lesson is superseded by ``decayed``.
        no_decay: longevities that never decay at a reconcile pass (issue 12, rule 7):
            ``explicit``, what a person stated. Seed 001: explicit beliefs do not decay
            automatically; they leave only when contradicted or retired. Measured, a
            user's lesson went 0.4 to 0.18 in eleven unused weeks and was superseded as
            ``decayed``. Each pass records the longevities it spared, so a log written
            before this rule rebuilds to what it decided then.
        trusted_sessions: distinct confirming sessions that make a trial lesson trusted.
        cluster: contradictions among the last ``cluster_window`` attributions that
            send a trusted lesson back to trial.
        expiry_days: days without fresh evidence after which a lesson of that longevity
            expires; absent means never by age.
        cap: most active lessons per project scope, and in the global scope.
        recurring: sessions in a row in which an operation failed on a target of one
            project with one and the same transient-looking error, never working, after
            which that error counts as lasting there (issue 12, rule 12). A blip is
            luck, and luck does not repeat itself word for word session after session:
            measured on an independent trap world, a suite always over its time budget
            (``commands timed out after 600s``) was never evidence, and a trusted
            ``prefer tox`` stayed trusted after 12 such failures in 6 sessions. Three:
            a blip of 5-15% repeating identically three sessions running is rare, and
            a single success ends the run.
    """

    start_loop: float = 0.5
    start_extractor: float = 0.4
    start_claim: float = 0.3
    start_avoid: float = 0.4
    confirm: float = 0.15
    contradict: float = -0.25
    decay: float = 0.02
    floor: float = 0.2
    no_decay: tuple[Longevity, ...] = ("explicit",)
    trusted_sessions: int = 3
    cluster: int = 2
    cluster_window: int = 3
    expiry_days: dict[str, int] = msgspec.field(
        default_factory=lambda: {"tentative": 30, "ongoing": 90}
    )
    cap: int = 200
    recurring: int = 3


def figures_of(rules: Rules) -> dict[str, Any]:
    """Every figure of ``rules`` as builtins: what a ``RulesAdopted`` event records."""
    figures: dict[str, Any] = msgspec.to_builtins(rules)
    return figures


def rules_from(figures: dict[str, Any]) -> Rules:
    """The rules a ``RulesAdopted`` event recorded (figures it lacks keep their defaults)."""
    return msgspec.convert(figures, Rules, strict=False)


# Confidences move by the rules' few fixed steps, so they take few values, and round()
# to 9 places costs near a microsecond (decimal conversion): a fold of 100k events
# clamps some 80,000 times. Equal inputs clamp alike (0.0 and -0.0 too): kept by value.
@lru_cache(maxsize=1 << 16)
def clamp(confidence: float) -> float:
    """A confidence within [0, 1], rounded to 9 places.

    Rounding keeps repeated steps on the figures they add up to: fifteen decays of 0.02
    from 0.5 leave 0.2, which is at the floor, not the 0.19999999999999982 below it
    that float arithmetic alone would give.
    """
    return round(min(1.0, max(0.0, confidence)), 9)


# Timeouts, resets, refused connections, rate limits and 5xx: the world blinked, the
# operation may well be right.
_TRANSIENT = re.compile(
    r"time[d ]?\s?out|timeout|reset|refused|rate.?limit|too many requests|\b429\b|\b5\d\d\b"
    r"|temporar|unavailable|try again|econn|etimedout|eai_again|broken pipe",
    re.IGNORECASE,
)


def looks_transient(error: str) -> bool:
    """True when an error signature looks like a passing failure, not a wrong approach."""
    return bool(_TRANSIENT.search(error))
