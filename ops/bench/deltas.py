"""Skill-delta benchmark: a synthetic corpus, the budget, resolution latency, the fold.

One seeded story, in one process:

- **Corpus.** 10 authored skills (five sections, 16 tools each) and 200 deltas on them,
  20 a skill: 6 tool hints, 13 prose deltas of 40 to 400 characters, and one
  consolidating proposal that supersedes three of the prose deltas. All are approved.
  Then ``sessions`` agent sessions each resolve two skills and report an outcome, so
  the log holds resolutions and attributed outcomes too (no fsync while building).
- **Budget.** Every skill is resolved in every scope: ``budget_held`` is ``yes`` when no
  learned block is over the budget, ``cut_items`` counts rendered items that are not
  exactly a whole item (must be 0), and the superseded deltas are checked to be still in
  the log (``superseded_kept``).
- **Resolve latency**, on the same home reopened durable (an fsync per commit):
  ``resolve_cold_*`` is the first resolution of a skill in a fresh session (the fold,
  the render and the ``SkillResolved`` commit), ``resolve_cached_*`` a repeat in the same
  session. Targets: p99 ≤ 20 ms cold, ≤ 2 ms cached.
- **Fold.** The delta view and the fact table rebuilt from position 0 through the
  runner, against a raw LMDB cursor walk of the same log decoding every body (the
  ceiling of any fold), taking turns, each the median of three.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from hashlib import sha256
from typing import Any

from lessonledger.commands.ledger import Ledger
from lessonledger.ledger.envelope import SALT_BYTES
from lessonledger.ledger.events import DELTA_PROPOSED, decode_event
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.projections.resolution import DEFAULT_BUDGET, HEADER, item_text
from lessonledger.projections.runner import Runner
from lessonledger.projections.views import DELTAS, FACTS, delta_view, registry

__all__ = ["run"]

_SEED = 20_261_201
_SKILLS = 10
_SECTIONS = ["overview", "inputs", "steps", "checks", "replies"]
_TOOLS = [f"tool_{i:02}" for i in range(16)]
_SCOPES = ["global", sha256(b"bench-project").hexdigest()[:32]]
_REPEATS = 3
Figures = dict[str, Any]


def _body(n: int) -> str:
    parts = [f"# Skill {n}\n\nWhat skill {n} does.\n"]
    parts += [f"\n## {name.title()}\n\nSection {name} of skill {n}.\n" for name in _SECTIONS]
    return "".join(parts)


def _corpus(ledger: Ledger, rng: random.Random) -> None:
    """Register the skills and propose, consolidate and approve 200 deltas."""
    words = ["prefer", "keep", "check", "always", "never", "quote", "thank", "mention",
             "rank", "draft"]
    for n in range(_SKILLS):
        skill = f"skill-{n}"
        ledger.skills.register(skill, _body(n), tools=_TOOLS, version="1.0")
        ids = [ledger.skills.propose(skill, tier=1, kind="tool_hint", payload=tool,
                                     provenance="extractor", scope=rng.choice(_SCOPES))
               .ids["delta_id"] for tool in rng.sample(_TOOLS, 6)]
        # A consolidation supersedes deltas of its own scope only: the first three prose
        # deltas share the scope it is proposed in.
        consolidated = rng.choice(_SCOPES)
        for i in range(13):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(6, 60)))
            ids.append(ledger.skills.propose(
                skill, tier=3, kind=rng.choice(["preference", "example", "caveat"]),
                anchor=rng.choice(_SECTIONS), payload=text.capitalize() + ".",
                provenance="user_instruction",
                scope=consolidated if i < 3 else rng.choice(_SCOPES)).ids["delta_id"])
        ledger.skills.approve(ids)
        merged = ledger.skills.propose(skill, tier=3, kind="preference", anchor="replies",
                                       payload="One consolidated preference.",
                                       provenance="user_instruction", scope=consolidated,
                                       supersedes=ids[6:9])
        ledger.skills.approve([merged.ids["delta_id"]])


def _traffic(ledger: Ledger, sessions: int, rng: random.Random) -> None:
    for s in range(sessions):
        session, scope = f"bench-{s}", rng.choice(_SCOPES)
        for n in rng.sample(range(_SKILLS), 2):
            ledger.skills.resolve(f"skill-{n}", _body(n), session=session, scope=scope)
        ledger.observe_outcome(key=f"bench-outcome-{s}", project=_SCOPES[1], session=session,
                               passed=rng.random() < 0.9)


def _budget(ledger: Ledger) -> Figures:
    rows = {r.delta_id: r for r in ledger.skills.deltas()}
    over = cut = retrieval = rendered = 0
    for n in range(_SKILLS):
        for scope in _SCOPES:
            result = ledger.skills.resolve(f"skill-{n}", _body(n), scope=scope)
            over += result.learned_tokens > DEFAULT_BUDGET
            block = result.text[len(_body(n)) + 1:] if result.learned_tokens else ""
            prose = [rows[i] for i in result.rendered if rows[i].tier == 3]
            cut += block != (HEADER + "".join(item_text(r) for r in prose) if prose else "")
            retrieval += len(result.retrieval_only)
            rendered += len(result.rendered)
    superseded = [r.delta_id for r in rows.values() if r.status == "superseded"]
    with _log(ledger) as log:
        kept = sum(1 for r in log.scan() if r.payload is not None
                   and r.envelope.type == DELTA_PROPOSED
                   and getattr(decode_event(r.payload), "delta_id", None) in superseded)
    return {"deltas": len(rows), "skills": _SKILLS, "budget_tokens": DEFAULT_BUDGET,
            "budget_held": "yes" if not over else "no", "cut_items": cut,
            "rendered_per_resolve": round(rendered / (2 * _SKILLS), 1),
            "retrieval_only_per_resolve": round(retrieval / (2 * _SKILLS), 1),
            "superseded": len(superseded),
            "superseded_kept": "yes" if kept == len(superseded) else "no"}


def _percentiles(label: str, samples: list[float]) -> Figures:
    ordered = sorted(samples)
    return {f"{label}_p50_ms": round(statistics.median(ordered) * 1000, 3),
            f"{label}_p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 3),
            f"{label}_calls": len(ordered)}


def _latency(home: str, sessions: int) -> Figures:
    cold: list[float] = []
    cached: list[float] = []
    with Ledger(home, sync=True) as ledger:
        for s in range(sessions):
            for n in range(_SKILLS):
                started = time.perf_counter()
                ledger.skills.resolve(f"skill-{n}", _body(n), session=f"lat-{s}")
                cold.append(time.perf_counter() - started)
                for _ in range(10):
                    started = time.perf_counter()
                    ledger.skills.resolve(f"skill-{n}", _body(n), session=f"lat-{s}")
                    cached.append(time.perf_counter() - started)
    return _percentiles("resolve_cold", cold) | _percentiles("resolve_cached", cached)


def _fold(log: EventLog) -> float:
    runner = Runner([r for r in registry() if r.name in (DELTAS, FACTS)])
    started = time.perf_counter()
    views = runner.fresh(log, None)
    elapsed = time.perf_counter() - started
    assert delta_view(views).position == log.head()
    return log.head() / elapsed


def _raw_replay(log: EventLog) -> float:
    tree = log.home.db(f"{LOG_NAME}.log")
    started = time.perf_counter()
    with log.home.env.begin(db=tree) as txn:
        for key, value in txn.cursor().iternext():
            if key[8]:  # position ‖ 1: the body, salt ‖ payload
                decode_event(value[SALT_BYTES:])
    return log.head() / (time.perf_counter() - started)


@contextmanager
def _log(ledger: Ledger) -> Iterator[EventLog]:
    """The ledger's log, opened beside it: the bench reads it raw, as a replay would."""
    home = acquire(ledger.home, sync=False)
    try:
        yield EventLog(home, LOG_NAME)
    finally:
        release(home)


def _folds(ledger: Ledger) -> Figures:
    samples: dict[str, list[float]] = {"fold": [], "raw_replay": []}
    for _ in range(_REPEATS):
        with _log(ledger) as log:
            samples["fold"].append(_fold(log))
            samples["raw_replay"].append(_raw_replay(log))
    rates = {f"{k}_eps": round(statistics.median(v), 1) for k, v in samples.items()}
    return rates | {"fold_vs_raw_replay": round(rates["fold_eps"] / rates["raw_replay_eps"], 3),
                    "log_events": ledger.head()}


def run(sessions: int = 2_000, latency_sessions: int = 100, workdir: str | None = None,
        progress: Callable[[str], None] | None = None) -> Figures:
    """Build the corpus and measure; return one flat, JSON-able dict of figures."""
    say = progress or (lambda line: None)
    rng = random.Random(_SEED)
    tmp = tempfile.mkdtemp(prefix="ll-bench-deltas-", dir=workdir)
    try:
        with Ledger(tmp, sync=False) as ledger:
            _corpus(ledger, rng)
            result = _budget(ledger)
            say(f"corpus: {result['deltas']} deltas on {_SKILLS} skills")
            _traffic(ledger, sessions, rng)
            say(f"traffic: {sessions} sessions, log at {ledger.head():,} events")
            result |= _folds(ledger)
            say(f"fold {result['fold_eps']:,.0f} ev/s vs raw {result['raw_replay_eps']:,.0f}")
        result |= _latency(tmp, latency_sessions)
        say(f"resolve p99: cold {result['resolve_cold_p99_ms']} ms, cached "
            f"{result['resolve_cached_p99_ms']} ms")
        return result | {"targets": "resolve p99 <= 20 ms cold, <= 2 ms cached",
                         "met": "yes" if result["resolve_cold_p99_ms"] <= 20
                         and result["resolve_cached_p99_ms"] <= 2 else "no"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
