"""The lesson vector index: USearch HNSW, kept as a projection of the log.

Like every projection it is saved with the log position it reflects and can be rebuilt
from position 0: a lesson's vector is a function of its text (which the log holds) and the
embedder, or is the vector its publisher supplied (which the log holds too). So a missing
index, or one built by another embedder, is simply rebuilt with :func:`build`.

**Keys.** USearch keys are integers; lessons are UUIDs. Keys are allocated in order and
the table of slots (key → the lesson's 16 UUID bytes, zeros once removed) is saved beside
the index as a ``.npy`` file, so reopening maps it rather than parsing 100k UUIDs. A key
is written once: re-embedding a lesson takes a fresh key and retires the old one, so a
key's vector never changes under a reader. Rebuilds renumber densely.

**Vectors by key.** Beside the slots, a second table holds each key's unit vector (f16, or
f32 for an f32 index). Plan-time recall scores a project's few hundred candidates exactly
(:meth:`VectorIndex.similarities`); gathering rows from this table takes tens of
microseconds where USearch's ``get`` of 400 keys took about 1 ms at 100k lessons.

**On disk**, in one directory: ``index-G.usearch``, ``slots-G.npy`` and
``vectors-G.npy`` for a generation ``G``, and ``meta.json`` (:class:`IndexMeta`: the
embedder's name and dimension, the log position, the USearch parameters, the generation).
``meta.json`` is replaced atomically last, so it is the commit point: a crash mid-save
leaves the previous generation in force, and the files of other generations are deleted
only after the switch.

**Reopened memory-mapped.** :meth:`VectorIndex.open` maps the saved index (USearch
``view``), which takes milliseconds at 100k lessons instead of a load. A mapped index is
immutable, so writes after reopening go to a small in-memory *delta*: new vectors go into
a second USearch index with the same parameters (searched exactly, so its distances are
computed the same way as the base's), removals of mapped vectors into a tombstone set that
search filters out (fetching as many extra results as there are tombstones). When the
delta outgrows :data:`DELTA_LIMIT`, or at :meth:`VectorIndex.save`, the mapped index is
copied into memory once and the delta folded into it (copy on write).

**Removal is not erasure.** USearch marks a removed vector deleted but its bytes stay in
the graph and in a saved file (checked: the removed vectors' bytes are still in the file;
the slot and vector tables zero removed rows when saved). Erasure must therefore rebuild
the index from the log with :func:`build` and save it, so the old generation, the last
file holding the vector, is deleted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, cast
from uuid import UUID

import msgspec
import numkong
import numpy as np
import numpy.typing as npt
from lessonledger.ledger.durable_files import fsync_path
from lessonledger.projections.embedder import F32, Embedder, normalise
from lessonledger.projections.errors import VectorShapeError
from usearch.index import Index

__all__ = [
    "DEFAULT_CONNECTIVITY",
    "DEFAULT_DTYPE",
    "DEFAULT_EXPANSION_ADD",
    "DEFAULT_EXPANSION_SEARCH",
    "DELTA_LIMIT",
    "FORMAT",
    "Dtype",
    "IndexMeta",
    "Item",
    "VectorIndex",
    "build",
    "exact_search",
    "usable",
    "vectors_for",
]

#: USearch's stored scalar types that this index supports.
Dtype = Literal["i8", "f16", "f32"]
#: A lesson to index: its id, its text, and the vector its publisher supplied, if any.
Item = tuple[UUID, str, npt.ArrayLike | None]

# The defaults were chosen with ``lessonledger bench recall`` and sweeps on the project's
# 2-core machines (100k generated lessons, 256-d hashing vectors, recall@10 against exact
# search on the same vectors); ops/bench/recall.py prints them with a reason each.
#: f16 halves f32's memory and costs ~35% less build CPU at the same recall; i8 is
#: cheaper still but its quantisation caps recall@10 near 0.96 at 100k (0.954 at ef 64).
DEFAULT_DTYPE: Dtype = "f16"
#: HNSW graph degree (the paper's M): 8 lost recall (0.955 at ef 64), 32 gained none
#: worth its bigger graph and slower build (0.990 against 0.989).
DEFAULT_CONNECTIVITY = 16
#: Search breadth while inserting (efConstruction): 64 builds twice as fast but drops
#: recall@10 at 100k to 0.963 at ef 64; 128 gives 0.989.
DEFAULT_EXPANSION_ADD = 128
#: Search breadth while querying (ef): 0.989 recall@10 at 100k; 96 adds only 0.002.
DEFAULT_EXPANSION_SEARCH = 64
#: Pending delta entries (new vectors plus tombstones) before a mapped index is copied
#: into memory: tombstones cost one extra fetched result per search each.
DELTA_LIMIT = 1024
FORMAT = 1
_META = "meta.json"


class IndexMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What ``meta.json`` records beside a saved index.

    Attributes:
        format: the layout version; another version is rebuilt, not read.
        embedder: the embedder's name; another embedder means a rebuild.
        dim: the vector dimension.
        position: the last log position the index reflects.
        metric: always ``cos``.
        dtype: the stored scalar type (``i8``, ``f16`` or ``f32``).
        connectivity: HNSW degree.
        expansion_add: insert-time breadth.
        expansion_search: query-time breadth.
        count: live vectors.
        slots: keys allocated (the slot table's length).
        generation: names this save's files: ``index-G.usearch``, ``slots-G.npy``,
            ``vectors-G.npy``.
    """

    format: int = FORMAT
    embedder: str
    dim: int
    position: int
    metric: str = "cos"
    dtype: str
    connectivity: int
    expansion_add: int
    expansion_search: int
    count: int
    slots: int
    generation: int


def exact_search(matrix: F32, query: npt.ArrayLike, k: int) -> tuple[npt.NDArray[np.int64], F32]:
    """Exact top-k by inner product (cosine, for unit rows): the baseline for the index.

    Args:
        matrix: ``(n, dim)`` unit rows.
        query: one ``dim`` vector.
        k: how many to return.

    Returns:
        Row numbers and similarities, most similar first (ties by row number).
    """
    scores = matrix @ np.asarray(query, dtype=np.float32).reshape(-1)
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    top = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(k)
    order = np.lexsort((top, -scores[top]))
    rows = top[order].astype(np.int64)
    return rows, scores[rows].astype(np.float32)


def _as_f32(matrix: npt.NDArray[Any]) -> F32:
    """Stored rows as float32, exactly (every f16 and i8 value is a float32 value).

    numpy widens float16 one element at a time (measured: 0.7 ms for 400 x 256, most of a
    plan-time recall's vector scoring); NumKong, USearch's own kernels, does it with the
    CPU's conversion instructions in about 15 µs, bit for bit the same.
    """
    if matrix.dtype != np.float16:
        return matrix.astype(np.float32)
    out = np.empty(matrix.shape, dtype=np.float32)
    numkong.astype(matrix, "float32", out=out)
    return out


class _Rows:
    """Fixed-width rows by key: a saved base (perhaps a read-only mapping) plus appended rows.

    Appends go to a separate, geometrically grown array, so a mapped base is never copied.
    """

    def __init__(self, base: npt.NDArray[Any]) -> None:
        self.base = base
        self._extra: npt.NDArray[Any] = np.empty((0, *base.shape[1:]), dtype=base.dtype)
        self._used = 0

    def __len__(self) -> int:
        return int(self.base.shape[0]) + self._used

    def append(self, rows: npt.NDArray[Any]) -> None:
        need = self._used + rows.shape[0]
        if need > self._extra.shape[0]:
            grown = np.empty((max(need, 2 * self._extra.shape[0], 64), *self.base.shape[1:]),
                             dtype=self.base.dtype)
            grown[:self._used] = self._extra[:self._used]
            self._extra = grown
        self._extra[self._used:need] = rows
        self._used = need

    def take(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        split = self.base.shape[0]
        if not self._used:
            return np.asarray(self.base[keys])
        out = np.empty((keys.shape[0], *self.base.shape[1:]), dtype=self.base.dtype)
        low = keys < split
        out[low] = self.base[keys[low]]
        out[~low] = self._extra[keys[~low] - split]
        return out

    def table(self, zeroed: Iterable[int]) -> npt.NDArray[Any]:
        """All rows as one new array, with the given rows zeroed."""
        table = np.concatenate((self.base, self._extra[:self._used]))
        table[np.fromiter(zeroed, dtype=np.int64)] = 0
        return table


class VectorIndex:
    """Lesson vectors in a USearch HNSW index, keyed by lesson id.

    Vectors are L2-normalised on the way in; similarity is cosine. Searches are single
    threaded (one query is latency-bound; the caller's process may run several).

    Args:
        embedder: name of the embedder the vectors come from, recorded when saved.
        dim: vector dimension.
        dtype: stored scalar type.
        connectivity: HNSW degree.
        expansion_add: insert-time breadth.
        expansion_search: query-time breadth; can be changed later.
    """

    def __init__(self, embedder: str, dim: int, *, dtype: Dtype = DEFAULT_DTYPE,
                 connectivity: int = DEFAULT_CONNECTIVITY,
                 expansion_add: int = DEFAULT_EXPANSION_ADD,
                 expansion_search: int = DEFAULT_EXPANSION_SEARCH) -> None:
        self.embedder = embedder
        self.dim = dim
        self.dtype: Dtype = dtype
        self.connectivity = connectivity
        self.expansion_add = expansion_add
        self._index = self._new_index(expansion_search)
        # Key -> lesson UUID bytes and key -> unit vector; _removed holds retired keys
        # since the tables were last saved (their rows are zeroed when saved).
        self._slots = _Rows(np.zeros((0, 16), dtype=np.uint8))
        self._vectors = _Rows(np.zeros((0, dim), dtype=_store_dtype(dtype)))
        self._removed: set[int] = set()
        # Lesson UUID (as its 128-bit int: ``UUID.int`` is an attribute, ``.bytes`` is
        # computed on every access) -> key; built lazily after reopening.
        self._key_of: dict[int, int] | None = {}
        self._count = 0
        #: Moves whenever a lesson's key changes (added, replaced, removed): keys looked
        #: up with :meth:`keys_of` stay valid while it stands.
        self.revision = 0
        # Only while the base index is a read-only mapping: the delta (with the vectors as
        # given, so folding it in later does not quantise them twice) and the tombstones.
        self._viewed = False
        self._delta: Any = None
        self._delta_vectors: dict[int, F32] = {}
        self._dead: set[int] = set()

    def _new_index(self, expansion_search: int) -> Any:
        return Index(ndim=self.dim, metric="cos", dtype=self.dtype,
                     connectivity=self.connectivity, expansion_add=self.expansion_add,
                     expansion_search=expansion_search)

    # -- queries ----------------------------------------------------------------------

    @property
    def expansion_search(self) -> int:
        """Query-time breadth (ef): higher finds more true neighbours, more slowly."""
        return int(self._index.expansion_search)

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        self._index.expansion_search = value
        if self._delta is not None:
            self._delta.expansion_search = value

    @property
    def viewed(self) -> bool:
        """True while the base index is a read-only memory mapping of a saved file."""
        return self._viewed

    @property
    def pending(self) -> int:
        """Writes held in the delta of a mapped index (0 when not mapped)."""
        return len(self._delta_vectors) + len(self._dead)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, lesson_id: object) -> bool:
        return isinstance(lesson_id, UUID) and lesson_id.int in self._keys()

    def lesson_ids(self) -> list[UUID]:
        """Every indexed lesson, in key order."""
        return [UUID(int=u) for u, _ in sorted(self._keys().items(), key=lambda kv: kv[1])]

    def search(self, vector: npt.ArrayLike, k: int, *,
               exact: bool = False) -> list[tuple[UUID, float]]:
        """The k lessons most similar to a vector.

        Args:
            vector: the query, any norm.
            k: how many results at most.
            exact: scan every vector instead of walking the graph (slow; for tests and
                baselines).

        Returns:
            ``(lesson_id, cosine similarity)`` pairs, most similar first.
        """
        if k <= 0:
            return []
        query = normalise(vector, self.dim)[0]
        found: list[tuple[float, int]] = []
        if len(self._index):
            # Tombstoned keys are still in a mapped base: fetch enough to drop them all.
            matches = self._index.search(query, k + len(self._dead), threads=1, exact=exact)
            found += [(float(d), int(key)) for key, d in
                      zip(matches.keys, matches.distances, strict=True)
                      if int(key) not in self._dead]
        if self._delta_vectors:
            matches = self._delta.search(query, k, threads=1, exact=True)
            found += [(float(d), int(key)) for key, d in
                      zip(matches.keys, matches.distances, strict=True)]
        found.sort()
        found = found[:k]
        slots = self._slots.take(np.array([key for _, key in found], dtype=np.int64))
        return [(UUID(bytes=slot.tobytes()), 1.0 - distance)
                for slot, (distance, _) in zip(slots, found, strict=True)]

    def keys_of(self, lesson_ids: Sequence[UUID]) -> npt.NDArray[np.int64]:
        """Each lesson's key in the vector table, -1 for a lesson without a vector."""
        keys = self._keys()
        return np.fromiter((keys.get(lesson_id.int, -1) for lesson_id in lesson_ids),
                           dtype=np.int64, count=len(lesson_ids))

    def similarities(self, vector: npt.ArrayLike, lesson_ids: Sequence[UUID], *,
                     keys: npt.NDArray[np.int64] | None = None) -> F32:
        """Cosine similarity of a vector to each of the given lessons, in their order.

        What plan-time recall needs: a project's candidates are few, so they are scored
        exactly from the stored vectors rather than searched for. A lesson without a
        vector scores 0.

        Args:
            vector: the query, any norm.
            lesson_ids: the lessons to score.
            keys: :meth:`keys_of` the lessons, looked up at this :attr:`revision`; a
                caller scoring the same lessons again passes them to save the lookups.

        Returns:
            float32 array aligned with ``lesson_ids``.
        """
        query = normalise(vector, self.dim)[0]
        rows = self.keys_of(lesson_ids) if keys is None else keys
        out = np.zeros(len(lesson_ids), dtype=np.float32)
        known = rows >= 0
        if known.any():
            # einsum, not BLAS: OpenBLAS splits a 400 x 256 product over both cores, and on
            # a busy 2-core machine waiting for the second thread costs milliseconds.
            matrix = _as_f32(self._vectors.take(rows[known]))
            out[known] = np.einsum("ij,j->i", matrix, query)
        return out

    # -- writes -----------------------------------------------------------------------

    def upsert(self, lesson_id: UUID, vector: npt.ArrayLike) -> None:
        """Index a lesson's vector, replacing any it had.

        Raises:
            VectorShapeError: the vector's dimension is not the index's.
        """
        self.upsert_many([lesson_id], normalise(vector, self.dim))

    def upsert_many(self, lesson_ids: Sequence[UUID], vectors: npt.ArrayLike) -> None:
        """Index many lessons at once (multi-threaded in USearch); later ids win.

        Raises:
            VectorShapeError: the vectors' shape does not fit.
        """
        matrix = normalise(vectors, self.dim)
        if matrix.shape[0] != len(lesson_ids):
            msg = f"{len(lesson_ids)} lesson ids but {matrix.shape[0]} vectors"
            raise VectorShapeError(msg)
        last = {lesson_id: row for row, lesson_id in enumerate(lesson_ids)}
        if not last:
            return
        for lesson_id in last:
            self.remove(lesson_id)
        fresh = matrix[np.fromiter(last.values(), dtype=np.int64, count=len(last))]
        keys = self._allocate(list(last), fresh)
        target = self._index
        if self._viewed:
            if self._delta is None:
                self._delta = self._new_index(self.expansion_search)
            target = self._delta
            self._delta_vectors.update(zip(keys.tolist(), fresh, strict=True))
        # threads=0: all cores; bulk inserts are throughput-bound.
        try:
            target.add(keys, fresh, threads=0)
        except RuntimeError as e:
            # USearch stops a long insert on a signal (Ctrl-C) and says only this.
            if str(e) == "Operation has been terminated":
                raise KeyboardInterrupt from e
            raise
        self._count += len(keys)
        self._maybe_thaw()

    def remove(self, lesson_id: UUID) -> bool:
        """Drop a lesson's vector from search; True if it had one.

        The vector's bytes stay in the HNSW graph until a rebuild: see the module notes.
        """
        keys = self._keys()
        key = keys.pop(lesson_id.int, None)
        if key is None:
            return False
        self.revision += 1
        self._removed.add(key)
        self._count -= 1
        if key in self._delta_vectors:
            del self._delta_vectors[key]
            self._delta.remove(key)
        elif self._viewed:
            self._dead.add(key)
        else:
            self._index.remove(key)
        self._maybe_thaw()
        return True

    # -- persistence ------------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str], position: int) -> IndexMeta:
        """Write the index, its slot and vector tables, and ``meta.json`` (last, atomically).

        A mapped index is first copied into memory with its delta folded in.

        Args:
            directory: where; created if missing.
            position: the last log position the index reflects.

        Returns:
            The metadata written.
        """
        self._thaw()
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        generation = self._next_generation(folder)
        names = _names(generation)
        self._index.save(str(folder / names[0]))
        fsync_path(folder / names[0])
        slots = self._slots.table(self._removed)
        vectors = self._vectors.table(self._removed)
        for name, table in zip(names[1:], (slots, vectors), strict=True):
            with (folder / name).open("wb") as f:
                np.save(f, table, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
        meta = IndexMeta(embedder=self.embedder, dim=self.dim, position=position,
                         dtype=self.dtype, connectivity=self.connectivity,
                         expansion_add=self.expansion_add,
                         expansion_search=self.expansion_search, count=len(self),
                         slots=int(slots.shape[0]), generation=generation)
        tmp = folder / f"{_META}.tmp"
        with tmp.open("wb") as f:
            f.write(msgspec.json.encode(meta))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / _META)
        fsync_path(folder)
        for pattern in ("index-*.usearch", "slots-*.npy", "vectors-*.npy"):
            for stale in folder.glob(pattern):
                if stale.name not in names:
                    stale.unlink(missing_ok=True)
        # The written tables (removed rows zeroed) are now the base: the bookkeeping of
        # what happened since the last save starts afresh.
        self._slots, self._vectors, self._removed = _Rows(slots), _Rows(vectors), set()
        return meta

    @staticmethod
    def saved_position(directory: str | os.PathLike[str]) -> int | None:
        """The log position of the index saved in ``directory``, if any."""
        try:
            return msgspec.json.decode((Path(directory) / _META).read_bytes(),
                                       type=IndexMeta).position
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    @classmethod
    def open(cls, directory: str | os.PathLike[str],
             embedder: Embedder) -> tuple[VectorIndex, int] | None:
        """Reopen a saved index, memory-mapped, if it was built by this embedder.

        Args:
            directory: where :meth:`save` wrote it.
            embedder: the embedder in use now.

        Returns:
            The index and the log position it reflects, or None when there is nothing
            usable (missing, unreadable, another format, or another embedder's name or
            dimension): the caller then rebuilds from the log.
        """
        folder = Path(directory)
        try:
            meta = msgspec.json.decode((folder / _META).read_bytes(), type=IndexMeta)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if (meta.format != FORMAT or meta.embedder != embedder.name or meta.dim != embedder.dim
                or meta.metric != "cos" or meta.dtype not in ("i8", "f16", "f32")):
            return None
        dtype = cast(Dtype, meta.dtype)
        index_name, slots_name, vectors_name = _names(meta.generation)
        try:
            slots = np.load(folder / slots_name, mmap_mode="r", allow_pickle=False)
            vectors = np.load(folder / vectors_name, mmap_mode="r", allow_pickle=False)
            mapped = Index.restore(str(folder / index_name), view=True,
                                   connectivity=meta.connectivity,
                                   expansion_add=meta.expansion_add,
                                   expansion_search=meta.expansion_search)
        except (OSError, ValueError, RuntimeError):
            return None
        if (mapped is None or len(mapped) != meta.count or mapped.ndim != meta.dim
                or slots.dtype != np.uint8 or slots.shape != (meta.slots, 16)
                or vectors.dtype != _store_dtype(dtype)
                or vectors.shape != (meta.slots, meta.dim)):
            return None
        self = cls(meta.embedder, meta.dim, dtype=dtype, connectivity=meta.connectivity,
                   expansion_add=meta.expansion_add, expansion_search=meta.expansion_search)
        self._index, self._viewed = mapped, True
        self._slots, self._vectors = _Rows(slots), _Rows(vectors)
        # The key map is built on first use: reopening stays a mapping, not a parse.
        self._key_of = None
        self._count = meta.count
        return self, meta.position

    # -- internals --------------------------------------------------------------------

    def _keys(self) -> dict[int, int]:
        if self._key_of is None:
            # UUID.int is the 16 bytes read big-endian. About 30 ms for 100k lessons, paid
            # on the first lookup after reopening, not by the open itself.
            raw = self._slots.table(self._removed).tobytes()
            slots = (raw[i:i + 16] for i in range(0, len(raw), 16))
            key_of = dict(zip(map(int.from_bytes, slots), range(len(self._slots)), strict=True))
            key_of.pop(0, None)
            self._key_of = key_of
        return self._key_of

    def _allocate(self, lesson_ids: Sequence[UUID], vectors: F32) -> npt.NDArray[np.uint64]:
        keys = self._keys()
        self.revision += 1
        first = len(self._slots)
        raw = b"".join(lesson_id.bytes for lesson_id in lesson_ids)
        self._slots.append(np.frombuffer(raw, dtype=np.uint8).reshape(-1, 16))
        self._vectors.append(vectors)
        keys.update((lesson_id.int, first + i) for i, lesson_id in enumerate(lesson_ids))
        return np.arange(first, first + len(lesson_ids), dtype=np.uint64)

    def _maybe_thaw(self) -> None:
        if self._viewed and self.pending > DELTA_LIMIT:
            self._thaw()

    def _thaw(self) -> None:
        """Copy a mapped index into memory and fold the delta in (copy on write)."""
        if not self._viewed:
            return
        index = self._index.copy()
        if self._dead:
            index.remove(np.fromiter(self._dead, dtype=np.uint64))
        if self._delta_vectors:
            keys = np.fromiter(self._delta_vectors, dtype=np.uint64)
            index.add(keys, np.vstack(list(self._delta_vectors.values())), threads=0)
        self._index, self._delta, self._dead, self._viewed = index, None, set(), False
        self._delta_vectors = {}

    @staticmethod
    def _next_generation(folder: Path) -> int:
        taken = [0]
        for path in folder.glob("index-*.usearch"):
            with contextlib.suppress(ValueError):
                taken.append(int(path.stem.split("-", 1)[1]))
        return max(taken) + 1


def _names(generation: int) -> tuple[str, str, str]:
    return (f"index-{generation}.usearch", f"slots-{generation}.npy",
            f"vectors-{generation}.npy")


def _store_dtype(dtype: Dtype) -> type[np.floating[Any]]:
    # f16 keeps cosine to ~1e-3, plenty to rank candidates; an f32 index keeps f32.
    return np.float32 if dtype == "f32" else np.float16


def usable(vector: npt.ArrayLike | None, dim: int) -> F32 | None:
    """A publisher-supplied vector as the index takes it, or None to embed the text instead.

    Usable means the embedder's size, finite and not zero; it comes back normalised. The
    rebuild (:func:`build`) and any incremental path must both decide through this, so an
    index kept in step answers like one rebuilt from the log.
    """
    if vector is None:
        return None
    supplied = np.asarray(vector, dtype=np.float32).reshape(-1)
    if supplied.shape[0] != dim or not np.isfinite(supplied).all() or not supplied.any():
        return None
    row: F32 = normalise(supplied, dim)[0]
    return row


def vectors_for(items: Sequence[Item], embedder: Embedder, *, batch: int = 4096) -> F32:
    """Each item's vector: its usable supplied one (see :func:`usable`), else its embedded text.

    Args:
        items: ``(lesson_id, text, vector or None)`` for each lesson.
        embedder: embeds the texts, ``batch`` at a time.
        batch: texts per embedding call.

    Returns:
        float32 ``(len(items), embedder.dim)`` unit rows, aligned with ``items``.
    """
    matrix = np.empty((len(items), embedder.dim), dtype=np.float32)
    to_embed: list[int] = []
    for row, (_, _, vector) in enumerate(items):
        given = usable(vector, embedder.dim)
        if given is None:
            to_embed.append(row)
        else:
            matrix[row] = given
    for start in range(0, len(to_embed), batch):
        rows = to_embed[start:start + batch]
        matrix[rows] = embedder.embed([items[row][1] for row in rows])
    return matrix


def build(items: Iterable[Item], embedder: Embedder, *, batch: int = 4096,
          dtype: Dtype = DEFAULT_DTYPE, connectivity: int = DEFAULT_CONNECTIVITY,
          expansion_add: int = DEFAULT_EXPANSION_ADD,
          expansion_search: int = DEFAULT_EXPANSION_SEARCH) -> VectorIndex:
    """Build an index from lessons, as a rebuild from the log does.

    Texts are embedded in batches; a publisher-supplied vector is used as given
    (normalised) when it is :func:`usable` (the embedder's size, finite, not zero);
    otherwise the text is embedded, since a vector of another size cannot share the index.
    A lesson listed twice keeps its last entry.

    Args:
        items: ``(lesson_id, text, vector or None)`` for each lesson.
        embedder: embeds the texts; its name is recorded with the index.
        batch: texts per embedding call.
        dtype: stored scalar type.
        connectivity: HNSW degree.
        expansion_add: insert-time breadth.
        expansion_search: query-time breadth.

    Returns:
        An in-memory index; :meth:`VectorIndex.save` it with the position it reflects.
    """
    index = VectorIndex(embedder.name, embedder.dim, dtype=dtype, connectivity=connectivity,
                        expansion_add=expansion_add, expansion_search=expansion_search)
    # A lesson listed twice keeps its last entry, as a run of upserts would.
    latest = list({item[0]: item for item in items}.values())
    if latest:
        index.upsert_many([item[0] for item in latest],
                          vectors_for(latest, embedder, batch=batch))
    return index
