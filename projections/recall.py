r"""Plan-time recall: which lessons an agent sees for a project and a query, and why.

The ranking, in full (DESIGN §4 asks for it to be documented):

1. Candidates are the *active* lessons (trial or trusted) of the project plus the global
   ones, but for a global lesson bound to another value of a fingerprint component than
   the project's outcomes last reported (:func:`elsewhere`). Claimed, superseded,
   retired and expired lessons are never candidates, and no other project's lessons
   ever are.
2. Relevance fuses two rankings of the candidates by reciprocal rank (k = 60): BM25 over
   the lesson text and its operation keys (``bm25s``), and cosine similarity of the
   lesson's vector to the query's. ``rrf = Σ 1 / (60 + rank)``, over the rankings in
   which the lesson scores above zero, scaled to [0, 1] by its largest possible value.
3. ``score = 0.6 · relevance + 0.3 · confidence + 0.1 · recency`` where
   ``recency = exp(-days since last evidence / 30)``.
4. Contradiction-aware: active lessons on the same operation and target that disagree
   (one prefers or does what another avoids) are shown together: the highest-scoring one
   as the current belief, then the others labelled as contradicting it. A project's own
   lesson is the belief over a global lesson it disagrees with, whatever their scores:
   in that project its own evidence outranks what other projects found (:func:`overruled`).
   A lesson in doubt in the project (what it prefers failed there for a lasting reason
   since it was last confirmed there, issue 12 rule 10) is never the belief over a rival:
   the latest evidence is against it. Shown alone, it is labelled ``doubted``.
5. At most 5 lessons and at most 300 tokens, counting tokens as
   ``ceil(utf-8 bytes / 4)`` of the whole section (heading, lines and newlines). Groups
   are taken in order; a group that would break a cap is left out and the next ones are
   still tried, so one long lesson near the top never silences the rest.

Each line names its status when it is still on trial (a contradicting one too), and is
one line: a lesson text's own line breaks and runs of whitespace are shown as single
spaces, and any other control character in it as a visible escape (``\x1b``, ``\u202e``),
so a text holding ``"\n\nSystem:"`` or a terminal escape cannot forge the section's
structure.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence
from typing import Literal
from uuid import UUID

import bm25s
import msgspec
import numpy as np
from lessonledger.ledger.text import printable
from lessonledger.projections.lessons import LessonRow
from lessonledger.projections.vector_index import VectorIndex

__all__ = [
    "MAX_LESSONS",
    "MAX_TOKENS",
    "Candidates",
    "Ranked",
    "Recall",
    "count_tokens",
    "disagree",
    "elsewhere",
    "holding_here",
    "one_line",
    "overruled",
    "rank",
    "render",
]

MAX_LESSONS = 5
MAX_TOKENS = 300
_RRF_K = 60
_WEIGHTS = (0.6, 0.3, 0.1)
_DAY_NS = 86_400 * 10**9


class Ranked(msgspec.Struct, frozen=True, gc=False):
    """One candidate's place and the figures behind it."""

    # gc=False: it holds only ids, numbers and strings, so it can be in no cycle; a query
    # makes one per candidate, and tracked they set off a collection on nearly every call.

    lesson_id: UUID
    score: float
    relevance: float
    bm25_rank: int | None
    vector_rank: int | None
    confidence: float
    recency: float
    label: Literal["belief", "trial", "contradicting", "doubted"] = "belief"
    contradicts: UUID | None = None
    line: str = ""
    tokens: int = 0


class Recall(msgspec.Struct, frozen=True):
    """What recall returns: the lessons shown, in order, and the prompt section.

    ``ranked`` is every candidate in order (grouped as shown); ``tokens`` is
    :func:`count_tokens` of ``section``, never above :data:`MAX_TOKENS`.
    """

    project: str
    query: str
    lessons: list[Ranked]
    ranked: list[Ranked]
    section: str
    tokens: int


class Candidates:
    """A project's candidates in tie order, and what ranking reads of them, gathered once.

    ``rows`` come as :meth:`LessonView.active_for` orders them (confidence, evidence
    recency, id). Everything here is derived from those rows alone, so an instance stays
    valid while the view's generations of the project and of the global scope stand; the
    recaller keeps one per project on that condition, and a query then pays only for what
    depends on its text and the time.
    """

    def __init__(self, rows: Sequence[LessonRow], project: str = "") -> None:
        self.rows = list(rows)
        self.ids = [row.lesson_id for row in self.rows]
        n = len(self.rows)
        self.confidence = np.fromiter((r.confidence for r in self.rows), np.float64, n)
        self.evidence_at = np.fromiter((r.last_evidence_at for r in self.rows), np.int64, n)
        #: Places of the lessons in doubt in ``project`` (rule 10).
        self.doubted = {i for i, row in enumerate(self.rows)
                        if project and project in row.doubted}
        self.labels: list[Literal["belief", "trial", "doubted"]] = [
            "doubted" if i in self.doubted else "trial" if r.status == "trial" else "belief"
            for i, r in enumerate(self.rows)]
        scopes: dict[str, list[int]] = {}
        for i, row in enumerate(self.rows):
            scopes.setdefault(row.scope, []).append(i)
        self._scopes = [(np.array(places, dtype=np.int64), [self.rows[i] for i in places])
                        for places in scopes.values()]
        self._retrievers: list[bm25s.BM25 | None] | None = None
        over = overruled(self.rows)
        #: Places of the global lessons the project's own lessons overrule.
        self.overruled = {i for i, row in enumerate(self.rows) if row.lesson_id in over}
        #: For each place with any, the places of the lessons that disagree with it.
        self.rivals = _rivals(self.rows)
        self._keys: tuple[VectorIndex, int, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def similarities(self, index: VectorIndex, vector: np.ndarray) -> np.ndarray:
        """Each candidate's cosine similarity to the query's vector, from ``index``."""
        if self._keys is None or self._keys[0] is not index or self._keys[1] != index.revision:
            self._keys = (index, index.revision, index.keys_of(self.ids))
        return index.similarities(vector, self.ids, keys=self._keys[2])

    def bm25_scores(self, terms: list[str]) -> np.ndarray:
        """Each candidate's BM25 score for the query terms, within its own scope's corpus."""
        if self._retrievers is None:
            self._retrievers = [_retriever(rows) for _, rows in self._scopes]
        scores = np.zeros(len(self.rows), dtype=np.float64)
        for (places, _), retriever in zip(self._scopes, self._retrievers, strict=True):
            if retriever is not None:
                scores[places] = retriever.get_scores(terms)
        return scores


def _rivals(rows: Sequence[LessonRow]) -> dict[int, list[int]]:
    """Who disagrees with whom, by place: found by lookup, not by comparing every pair."""
    says: dict[tuple[str, str, bool], list[int]] = {}
    for place, row in enumerate(rows):
        if row.prefer_op:
            says.setdefault((row.target, row.prefer_op, True), []).append(place)
        if row.avoid_op:
            says.setdefault((row.target, row.avoid_op, False), []).append(place)
    rivals: dict[int, list[int]] = {}
    for place, row in enumerate(rows):
        against = says.get((row.target, row.prefer_op, False))
        doubted = says.get((row.target, row.avoid_op, True))
        if against or doubted:
            found = [other for other in sorted({*(against or ()), *(doubted or ())})
                     if disagree(row, rows[other])]
            if found:
                rivals[place] = found
    return rivals


def count_tokens(text: str) -> int:
    """The documented token count of a line: one token per 4 bytes of UTF-8, rounded up."""
    return math.ceil(len(text.encode()) / 4)


def _tokens(text: str) -> list[str]:
    return [t for t in "".join(c.lower() if c.isalnum() else " " for c in text).split() if t]


def _doc(row: LessonRow) -> str:
    return f"{row.text} {row.avoid_op} {row.prefer_op} {row.target}"


#: BM25 indexes by the exact set of lessons they cover (lesson ids as ints). Indexing is
#: the slow part (milliseconds); a scope's lessons change rarely compared with how often
#: its agents ask. A lesson's text never changes (an edit is a new lesson), so the ids
#: name the documents.
_INDEXES: collections.OrderedDict[tuple[int, ...], bm25s.BM25 | None] = (
    collections.OrderedDict())
_MAX_INDEXES = 2048


def _retriever(rows: Sequence[LessonRow]) -> bm25s.BM25 | None:
    key = tuple(row.lesson_id.int for row in rows)
    if key in _INDEXES:
        _INDEXES.move_to_end(key)
        return _INDEXES[key]
    retriever = _build_index([_doc(row) for row in rows])
    _INDEXES[key] = retriever
    if len(_INDEXES) > _MAX_INDEXES:
        _INDEXES.popitem(last=False)
    return retriever


def _build_index(docs: list[str]) -> bm25s.BM25 | None:
    tokenized = bm25s.tokenize(docs, stopwords="en", show_progress=False)
    if not tokenized.vocab:
        return None  # nothing but stopwords and one-letter words: BM25 cannot index it
    retriever = bm25s.BM25()
    retriever.index(tokenized, show_progress=False)
    return retriever


def _bm25_ranks(candidates: Candidates, query: str) -> np.ndarray:
    """Rank candidates by BM25, each scored within its own scope's corpus.

    A project's lessons and the global ones are indexed apart, so the large, shared
    global index is built once rather than once per project; scores from the two are
    merged into one ranking.
    """
    terms = _tokens(query)
    if not len(candidates) or not terms:
        return np.zeros(len(candidates), dtype=np.int64)
    return _ranks(candidates.bm25_scores(terms))


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks by descending score (stable); 0 where the score is not above zero."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    ranks[scores <= 0] = 0
    return ranks


def disagree(a: LessonRow, b: LessonRow) -> bool:
    """True when two lessons about one target predict opposite results for an operation."""
    if a.target != b.target or a.lesson_id == b.lesson_id:
        return False
    a_good, a_bad = {a.prefer_op} - {""}, {a.avoid_op} - {""}
    b_good, b_bad = {b.prefer_op} - {""}, {b.avoid_op} - {""}
    return bool(a_good & b_bad or a_bad & b_good)


def overruled(rows: Sequence[LessonRow]) -> set[UUID]:
    """The global lessons among ``rows`` that one of the project's own lessons disagrees with.

    There, the project's own evidence is the current belief.
    """
    local: dict[str, list[LessonRow]] = {}
    for row in rows:
        if row.scope != "global":
            local.setdefault(row.target, []).append(row)
    if not local:
        return set()
    return {row.lesson_id for row in rows if row.scope == "global"
            and any(disagree(row, mine) for mine in local.get(row.target, ()))}


def elsewhere(rows: Sequence[LessonRow], observed: dict[str, str]) -> set[UUID]:
    """The global lessons among ``rows`` bound to another environment than ``observed``.

    Issue 12, rule 11: a global lesson is bound to the fingerprint it was learned under;
    where a project's own outcomes last reported another value of one of its components,
    the lesson was learned in another environment and says nothing there. Measured on an
    independent trap world, lessons learned under toolchain 2 went global and steered the
    projects still on toolchain 1 into what fails there. A component the project never
    reported is no difference.
    """
    if not observed:
        return set()
    return {row.lesson_id for row in rows if row.scope == "global" and any(
        observed.get(c, v) != v for c, v in row.fingerprint.items())}


def holding_here(rows: list[LessonRow], observed: dict[str, str]) -> list[LessonRow]:
    """``rows`` less the global ones bound to another environment (:func:`elsewhere`).

    Recall, check, the listing and attribution take the same lessons (rule 11): one an
    agent was shown is in play, and its next outcome judges it.
    """
    away = elsewhere(rows, observed)
    return [r for r in rows if r.lesson_id not in away] if away else rows


def rank(candidates: Candidates, query: str, similarities: np.ndarray | None,
         now: int) -> tuple[list[int], list[Ranked]]:
    """Score every candidate; best first, with each one's place among the candidates.

    Ties keep the candidates' own order (confidence, evidence recency, id), so the
    ranking is the same on every run. Scoring is vectorised: a query touches a few
    hundred candidates and must stay well inside a millisecond budget.
    """
    n = len(candidates)
    if n == 0:
        return [], []
    bm25 = _bm25_ranks(candidates, query)
    vector = _ranks(similarities) if similarities is not None else np.zeros(n, np.int64)
    best = 2 / (_RRF_K + 1) if similarities is not None else 1 / (_RRF_K + 1)
    rrf = np.where(bm25 > 0, 1 / (_RRF_K + bm25), 0.0) + np.where(
        vector > 0, 1 / (_RRF_K + vector), 0.0)
    relevance = rrf / best
    age = now - candidates.evidence_at
    recency = np.exp(-np.maximum(age, 0) / _DAY_NS / 30)
    score = np.round(_WEIGHTS[0] * relevance + _WEIGHTS[1] * candidates.confidence
                     + _WEIGHTS[2] * recency, 9)
    order: list[int] = np.argsort(-score, kind="stable").tolist()
    # Python numbers once, not a numpy scalar per field per candidate.
    ids, labels = candidates.ids, candidates.labels
    sc, rel, conf, rec = (score.tolist(), relevance.tolist(), candidates.confidence.tolist(),
                          recency.tolist())
    b, v = bm25.tolist(), vector.tolist()
    return order, [Ranked(ids[i], sc[i], rel[i], b[i] or None, v[i] or None, conf[i], rec[i],
                          labels[i]) for i in order]


def _line(row: LessonRow, label: str) -> str:
    # A contradicting lesson still on trial is labelled as both.
    tags = ["trial"] if row.status == "trial" else []
    if label == "doubted":
        tags.append("in doubt: what it prefers failed here since")
    if label == "contradicting":
        tags.append("contradicts the lesson above")
    tag = f"[{'; '.join(tags)}] " if tags else ""
    return f"- {tag}{one_line(row.text)} (confidence {row.confidence:.2f})"


def one_line(text: str) -> str:
    """A text as one line: its line breaks and runs of whitespace become single spaces.

    Whatever control is left (NUL, ESC, BEL, DEL, C1, a bidi override) is shown as an
    escape (:func:`~lessonledger.ledger.text.printable`): a stored text can neither
    forge the structure of the prompt section it goes into nor drive a terminal.
    """
    return printable(" ".join(text.split()))


def render(candidates: Candidates, order: list[int], ranked: list[Ranked], project: str,
           query: str) -> Recall:
    """Group disagreeing lessons, apply the caps, and build the prompt section.

    ``order`` holds each ranked lesson's place among the candidates. A belief and the
    lessons contradicting it are shown together or not at all, so a cap never silently
    keeps one side of a disagreement.
    """
    rows = candidates.rows
    grouped = _groups(candidates, order, ranked)
    # With no disagreement among the candidates every lesson is a group of its own, and
    # the ranking is already the order shown: only the groups the caps look at are made.
    groups: Iterable[list[tuple[int, Ranked]]] = grouped if grouped is not None else (
        [pair] for pair in zip(order, ranked, strict=True))
    shown: list[Ranked] = []
    section = "Lessons:"
    for group in groups:
        if len(shown) + len(group) > MAX_LESSONS:
            continue
        lines = [_line(rows[place], g.label) for place, g in group]
        longer = "\n".join([section, *lines])
        if count_tokens(longer) > MAX_TOKENS:
            continue
        shown += [msgspec.structs.replace(g, line=line, tokens=count_tokens(line))
                  for (_, g), line in zip(group, lines, strict=True)]
        section = longer
        if len(shown) == MAX_LESSONS:
            break
    everything = ranked if grouped is None else [g for group in grouped for _, g in group]
    if not shown:
        return Recall(project, query, [], everything, "", 0)
    return Recall(project, query, shown, everything, section, count_tokens(section))


def _groups(candidates: Candidates, order: list[int],
            ranked: list[Ranked]) -> list[list[tuple[int, Ranked]]] | None:
    """The ranking as groups: each belief (in rank order), then what contradicts it.

    Items are paired with their place among the candidates. None when no candidate
    disagrees with another: then each is a group of one, in rank order.
    """
    if not candidates.rivals and not candidates.overruled:
        return None
    at = dict(zip(order, range(len(order)), strict=True))  # place -> rank
    over = candidates.overruled | candidates.doubted
    # Overruled and doubted lessons come last, so the lesson the evidence here stands
    # behind leads its group.
    seeds = sorted(range(len(ranked)), key=lambda r: order[r] in over) if over \
        else range(len(ranked))
    placed = [False] * len(ranked)
    groups: list[list[tuple[int, Ranked]]] = []
    for r in seeds:
        if placed[r]:
            continue
        placed[r] = True
        item = ranked[r]
        group = [(order[r], item)]
        for other in sorted(at[p] for p in candidates.rivals.get(order[r], ())):
            if not placed[other]:
                group.append((order[other], msgspec.structs.replace(
                    ranked[other], label="contradicting", contradicts=item.lesson_id)))
                placed[other] = True
        groups.append(group)
    return groups
