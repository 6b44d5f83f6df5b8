"""The embedder and the USearch lesson index: determinism, persistence, rebuild equivalence."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.projections.embedder import (
    DEFAULT_DIM,
    Embedder,
    HashingEmbedder,
    default_embedder,
    normalise,
)
from lessonledger.projections.vector_index import (
    DELTA_LIMIT,
    VectorIndex,
    build,
    exact_search,
    usable,
    vectors_for,
)

TEXTS = [
    "Run pytest from the repository root; from tests/ it finds no conftest",
    "Run pytests from the repo root, not from tests/",
    "Prefer `uv pip install` over `pip install` for installing dependencies",
    "Avoid `docker compose up` without -d: it blocks the shell",
    "Set DATABASE_URL before `alembic upgrade head`, otherwise it fails",
    "",
    "   ",
    "héllo wörld — ünïcode ✓",
    "a",
]
SMALL = HashingEmbedder(dim=32)


def uid(n: int) -> UUID:
    return UUID(int=n + 1)


# -- embedder -------------------------------------------------------------------------


def test_embedder_gives_unit_float32_rows_of_its_dimension() -> None:
    embedder = default_embedder()
    assert isinstance(embedder, Embedder)
    assert embedder.dim == DEFAULT_DIM
    vectors = embedder.embed(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), DEFAULT_DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert embedder.embed([]).shape == (0, DEFAULT_DIM)


def test_embedder_is_deterministic_and_batch_independent() -> None:
    one, two = HashingEmbedder(), HashingEmbedder()
    batch = one.embed(TEXTS)
    assert np.array_equal(batch, two.embed(TEXTS))
    singles = np.vstack([two.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, singles, atol=1e-6)


def test_embedder_does_not_depend_on_the_process_hash_seed() -> None:
    code = ("import hashlib; from lessonledger.projections.embedder import HashingEmbedder; "
            f"print(hashlib.sha256(HashingEmbedder().embed({TEXTS!r}).tobytes()).hexdigest())")
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")
    }
    here = hashlib.sha256(HashingEmbedder().embed(TEXTS).tobytes()).hexdigest()
    assert digests == {here}


def test_similar_lessons_are_nearer_than_unrelated_ones() -> None:
    v = HashingEmbedder().embed(TEXTS[:3])
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_embedder_name_records_its_parameters() -> None:
    assert HashingEmbedder(dim=128).name != HashingEmbedder(dim=256).name
    assert "d128" in HashingEmbedder(dim=128).name
    assert HashingEmbedder(weights=(1, 0, 1)).name != HashingEmbedder().name
    with pytest.raises(ValueError, match="dimension"):
        HashingEmbedder(dim=1)


def test_normalise_checks_the_dimension_and_keeps_zero_rows() -> None:
    out = normalise([[3.0, 4.0], [0.0, 0.0]], 2)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(ValueError, match="dimension 3"):
        normalise([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="finite"):
        normalise([1.0, float("nan")], 2)


# -- exact search ---------------------------------------------------------------------


def test_exact_search_orders_by_similarity_then_row() -> None:
    matrix = normalise([[1, 0], [0, 1], [1, 0], [1, 1]], 2)
    rows, sims = exact_search(matrix, [1.0, 0.0], 3)
    assert rows.tolist() == [0, 2, 3]
    np.testing.assert_allclose(sims, [1.0, 1.0, np.sqrt(0.5)], rtol=1e-6)
    assert exact_search(matrix, [1.0, 0.0], 10)[0].tolist() == [0, 2, 3, 1]
    assert exact_search(matrix, [1.0, 0.0], 0)[0].size == 0


# -- the index ------------------------------------------------------------------------


def small_index(count: int = len(TEXTS)) -> tuple[VectorIndex, np.ndarray]:
    vectors = SMALL.embed(TEXTS[:count])
    index = VectorIndex(SMALL.name, SMALL.dim)
    for i, vector in enumerate(vectors):
        index.upsert(uid(i), vector)
    return index, vectors


def test_upsert_search_remove() -> None:
    index, vectors = small_index()
    assert len(index) == len(TEXTS)
    assert uid(0) in index
    top = index.search(vectors[0], 3)
    assert top[0][0] == uid(0)
    assert top[0][1] == pytest.approx(1.0, abs=1e-2)
    assert index.remove(uid(0))
    assert not index.remove(uid(0))
    assert uid(0) not in index
    assert len(index) == len(TEXTS) - 1
    assert uid(0) not in {i for i, _ in index.search(vectors[0], 100)}
    # Upserting again replaces the vector: the lesson now answers to another one.
    index.upsert(uid(1), vectors[2])
    assert len(index) == len(TEXTS) - 1
    assert index.search(vectors[2], 2, exact=True)[0][1] == pytest.approx(1.0, abs=1e-2)
    assert {i for i, _ in index.search(vectors[2], 2, exact=True)} == {uid(1), uid(2)}
    assert index.search(vectors[2], 0) == []


def test_upsert_checks_dimension() -> None:
    index = VectorIndex(SMALL.name, SMALL.dim)
    with pytest.raises(ValueError, match="dimension 32"):
        index.upsert(uid(0), np.ones(31))
    with pytest.raises(ValueError, match="2 lesson ids but 1 vectors"):
        index.upsert_many([uid(0), uid(1)], np.ones((1, 32)))


def test_search_on_an_empty_index_returns_nothing(tmp_path: Path) -> None:
    index = VectorIndex(SMALL.name, SMALL.dim)
    assert index.search(np.ones(32), 5) == []
    index.save(tmp_path, 0)
    opened = VectorIndex.open(tmp_path, SMALL)
    assert opened is not None
    assert opened[0].search(np.ones(32), 5) == []
    assert len(opened[0]) == 0


def test_similarities_are_aligned_with_the_ids_asked_for() -> None:
    index, vectors = small_index()
    sims = index.similarities(vectors[1], [uid(1), uid(99), uid(0)])
    assert sims.shape == (3,)
    assert sims[0] == pytest.approx(1.0, abs=1e-2)
    assert sims[1] == 0.0
    assert sims[2] == pytest.approx(float(vectors[0] @ vectors[1]), abs=2e-2)


def test_save_reopen_memory_mapped_gives_the_same_results(tmp_path: Path) -> None:
    index, vectors = small_index()
    before = [index.search(v, 4, exact=True) for v in vectors]
    meta = index.save(tmp_path / "vec", 42)
    assert meta.position == 42
    assert meta.embedder == SMALL.name
    opened = VectorIndex.open(tmp_path / "vec", SMALL)
    assert opened is not None
    again, position = opened
    assert position == 42
    assert again.viewed
    assert len(again) == len(index)
    assert [again.search(v, 4, exact=True) for v in vectors] == before
    assert set(again.lesson_ids()) == set(index.lesson_ids())


def test_writes_after_reopening_go_to_the_delta_and_survive_a_save(tmp_path: Path) -> None:
    index, vectors = small_index(6)
    index.save(tmp_path, 1)
    opened = VectorIndex.open(tmp_path, SMALL)
    assert opened is not None
    mapped = opened[0]
    extra = SMALL.embed(TEXTS[7:])  # TEXTS[6], whitespace, would tie with TEXTS[5]
    mapped.upsert(uid(6), extra[0])
    assert mapped.remove(uid(0))
    assert (mapped.viewed, mapped.pending) == (True, 2)
    assert mapped.search(extra[0], 1)[0][0] == uid(6)
    assert uid(0) not in {i for i, _ in mapped.search(vectors[0], 100)}
    assert mapped.similarities(extra[0], [uid(6)])[0] == pytest.approx(1.0, abs=1e-2)
    mapped.save(tmp_path, 2)
    assert not mapped.viewed
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "index-2.usearch", "meta.json", "slots-2.npy", "vectors-2.npy"]
    reopened = VectorIndex.open(tmp_path, SMALL)
    assert reopened is not None
    assert reopened[1] == 2
    assert set(reopened[0].lesson_ids()) == {uid(i) for i in range(1, 7)}
    assert reopened[0].search(extra[0], 1)[0][0] == uid(6)


def test_a_large_delta_is_folded_into_memory(tmp_path: Path) -> None:
    index, _ = small_index(2)
    index.save(tmp_path, 1)
    opened = VectorIndex.open(tmp_path, SMALL)
    assert opened is not None
    mapped = opened[0]
    vectors = np.random.default_rng(0).standard_normal((DELTA_LIMIT + 1, SMALL.dim))
    mapped.upsert_many([uid(10 + i) for i in range(DELTA_LIMIT + 1)], vectors)
    assert not mapped.viewed
    assert mapped.pending == 0
    assert len(mapped) == DELTA_LIMIT + 3
    assert mapped.search(vectors[5], 1, exact=True)[0][0] == uid(15)


@pytest.mark.parametrize("other", [HashingEmbedder(dim=64),
                                   HashingEmbedder(dim=32, weights=(1, 1, 1))])
def test_another_embedder_means_rebuild(tmp_path: Path, other: HashingEmbedder) -> None:
    small_index()[0].save(tmp_path, 3)
    assert VectorIndex.open(tmp_path, SMALL) is not None
    assert VectorIndex.open(tmp_path, other) is None


def test_missing_or_damaged_index_means_rebuild(tmp_path: Path) -> None:
    assert VectorIndex.open(tmp_path / "nothing", SMALL) is None
    small_index()[0].save(tmp_path, 3)
    (tmp_path / "meta.json").write_text("{not json")
    assert VectorIndex.open(tmp_path, SMALL) is None
    small_index()[0].save(tmp_path, 4)
    next(tmp_path.glob("slots-*.npy")).write_bytes(b"garbage")
    assert VectorIndex.open(tmp_path, SMALL) is None


def test_build_embeds_texts_and_uses_supplied_vectors_that_fit() -> None:
    supplied = np.zeros(SMALL.dim, dtype=np.float32)
    supplied[3] = 2.0
    nan = np.full(SMALL.dim, np.nan)
    items = [(uid(0), TEXTS[0], None), (uid(1), TEXTS[1], supplied),
             (uid(2), TEXTS[2], np.ones(7)), (uid(0), TEXTS[3], None),
             (uid(3), TEXTS[4], nan), (uid(4), TEXTS[0], np.zeros(SMALL.dim))]
    index = build(items, SMALL, batch=2)
    assert len(index) == 5
    # Unusable vectors (NaN, zero) are replaced by the embedded text.
    assert index.search(SMALL.embed([TEXTS[4]])[0], 1)[0][0] == uid(3)
    assert index.similarities(SMALL.embed([TEXTS[0]])[0], [uid(4)])[0] == pytest.approx(
        1.0, abs=1e-2)
    assert index.embedder == SMALL.name
    assert index.search(supplied, 1)[0][0] == uid(1)
    # A vector of the wrong size is ignored in favour of the text; the last entry wins.
    assert index.search(SMALL.embed([TEXTS[2]])[0], 1)[0][0] == uid(2)
    assert index.search(SMALL.embed([TEXTS[3]])[0], 1)[0][0] == uid(0)


def test_usable_and_vectors_for_decide_like_build() -> None:
    assert usable(None, 4) is None
    assert usable(np.ones(3), 4) is None
    assert usable(np.zeros(4), 4) is None
    assert usable([1.0, np.inf, 0.0, 0.0], 4) is None
    given = usable([3.0, 4.0, 0.0, 0.0], 4)
    assert given is not None
    np.testing.assert_allclose(given, np.array([0.6, 0.8, 0.0, 0.0]), rtol=1e-6)
    items = [(uid(0), TEXTS[0], None), (uid(1), TEXTS[1], np.ones(SMALL.dim)),
             (uid(2), TEXTS[2], np.zeros(SMALL.dim))]
    matrix = vectors_for(items, SMALL, batch=1)
    np.testing.assert_allclose(matrix[[0, 2]], SMALL.embed([TEXTS[0], TEXTS[2]]), atol=1e-6)
    np.testing.assert_allclose(matrix[1], np.full(SMALL.dim, SMALL.dim ** -0.5), rtol=1e-5)


# -- properties -----------------------------------------------------------------------

# Operations on lessons 0..7: upsert lesson i with pool vector j, remove lesson i, or save
# and reopen memory-mapped (so later writes exercise the delta).
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.integers(0, 7), st.integers(0, 11)),
        st.tuples(st.just("remove"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
    ),
    max_size=30,
)
_POOL = np.random.default_rng(7).integers(-3, 4, size=(12, SMALL.dim)).astype(np.float32)
_POOL[0] = _POOL[1]  # a duplicate: exact ties must be handled


def _top(index: VectorIndex, query: np.ndarray, k: int) -> tuple[list[float], set[UUID]]:
    """Top-k similarities, and the ids above the k-th: ties at the boundary may go either way."""
    found = index.search(query, k, exact=True)
    sims = [round(s, 5) for _, s in found]
    cut = sims[-1] if len(sims) == k else -2.0
    return sims, {i for i, s in found if round(s, 5) > cut}


@given(_OPS)
def test_rebuilt_index_answers_like_the_incremental_one(tmp_path_factory: pytest.TempPathFactory,
                                                        ops: list[tuple[str, int, int]]) -> None:
    folder = tmp_path_factory.mktemp("vec")
    index = VectorIndex(SMALL.name, SMALL.dim)
    state: dict[UUID, int] = {}
    for op, lesson, vector in ops:
        if op == "upsert":
            index.upsert(uid(lesson), _POOL[vector])
            state[uid(lesson)] = vector
        elif op == "remove":
            assert index.remove(uid(lesson)) == (uid(lesson) in state)
            state.pop(uid(lesson), None)
        else:
            index.save(folder, 0)
            opened = VectorIndex.open(folder, SMALL)
            assert opened is not None
            index = opened[0]
    rebuilt = build([(i, "", _POOL[v]) for i, v in state.items()], SMALL)
    assert set(index.lesson_ids()) == set(rebuilt.lesson_ids()) == set(state)
    assert len(index) == len(rebuilt) == len(state)
    for query in _POOL[:6]:
        for k in (1, 3, 8):
            assert _top(index, query, k) == _top(rebuilt, query, k)


@given(_OPS)
def test_a_removed_lesson_never_comes_back(tmp_path_factory: pytest.TempPathFactory,
                                           ops: list[tuple[str, int, int]]) -> None:
    folder = tmp_path_factory.mktemp("vec")
    index = VectorIndex(SMALL.name, SMALL.dim)
    live: set[UUID] = set()
    for op, lesson, vector in ops:
        if op == "upsert":
            index.upsert(uid(lesson), _POOL[vector])
            live.add(uid(lesson))
        elif op == "remove":
            index.remove(uid(lesson))
            live.discard(uid(lesson))
        else:
            index.save(folder, 0)
            opened = VectorIndex.open(folder, SMALL)
            assert opened is not None
            index = opened[0]
        for query in _POOL[:4]:
            for exact in (False, True):
                assert {i for i, _ in index.search(query, 20, exact=exact)} <= live
