"""Text embedders: the plug-in that turns lesson texts into vectors for the vector index.

An embedder is anything with a ``name``, a ``dim`` and ``embed(texts)``; the vector index
records the name and dimension it was built with, and a different embedder means a
rebuild from the log (re-embedding needs only the lesson texts, which the log holds).

The default, :class:`HashingEmbedder`, works offline with nothing to download: feature
hashing of lowercase word unigrams and bigrams and of character 3- to 5-grams taken
inside words (as scikit-learn's ``char_wb`` analyzer does), each feature hashed to a
signed coordinate. Character n-grams make ``pytest``/``pytests`` or ``conftest.py``/
``conftest`` near each other; word n-grams carry which tools and verbs a lesson names.
Each of the three groups is L2-normalised on its own before they are mixed (weights 1,
0.5 and 1 by default), so a long text's hundreds of character n-grams do not drown its
dozen words.

Hashes are fixed (BLAKE2b for words, a constant-base polynomial rolling hash with a
splitmix64 finaliser for character n-grams): never Python's ``hash()``, which is salted per process,
so the same text gives the same vector in every process and on every machine.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from lessonledger.projections.errors import VectorShapeError

__all__ = ["DEFAULT_DIM", "F32", "Embedder", "HashingEmbedder", "default_embedder", "normalise"]

#: Chosen by measurement (``lessonledger bench recall``): see :data:`HashingEmbedder`.
DEFAULT_DIM = 256

#: A float32 array: what embedders return and the vector index takes.
F32 = npt.NDArray[np.float32]
_U64 = npt.NDArray[np.uint64]


@runtime_checkable
class Embedder(Protocol):
    """What the vector index needs from an embedder.

    Attributes:
        name: identifies the embedder *and its parameters*; an index built by another
            name is rebuilt rather than mixed with new vectors.
        dim: the length of every vector.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> F32:
        """Embed texts.

        Args:
            texts: the texts, any number (zero included).

        Returns:
            float32 array of shape ``(len(texts), dim)``, each row of unit L2 norm.
        """
        ...


def normalise(vectors: npt.ArrayLike, dim: int) -> F32:
    """Return vectors as a C-contiguous float32 ``(n, dim)`` array of unit rows.

    Publisher-supplied vectors go through this so the index only ever holds unit
    vectors (cosine = inner product). A zero row stays zero: it has no direction.

    Raises:
        VectorShapeError: the shape does not fit ``dim``, or a value is NaN, infinite or
            beyond float32's range.
    """
    # A value beyond float32 (1e308) becomes infinite here, and is refused below: no
    # RuntimeWarning reaches the caller's stderr.
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.array(vectors, dtype=np.float32, copy=True, ndmin=2)
    if array.ndim != 2 or array.shape[1] != dim:
        msg = f"expected vectors of dimension {dim}, got shape {array.shape}"
        raise VectorShapeError(msg)
    if not np.isfinite(array).all():
        msg = "vectors must be finite (no NaN or infinity) and within float32's range"
        raise VectorShapeError(msg)
    # In float64, so that the squares of large float32 values do not overflow.
    norms = np.linalg.norm(array.astype(np.float64), axis=1, keepdims=True)
    array = np.divide(array, norms, out=np.zeros_like(array, dtype=np.float64),
                      where=norms > 0).astype(np.float32)
    return np.ascontiguousarray(array)


# -- hashing ------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_SPACE = ord(" ")
# Odd 64-bit constants: splitmix64's, and a polynomial base with good bit spread.
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_BASE = np.uint64(0x100000001B3)
_S30, _S27, _S31, _S63 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(63)
# Per-feature-kind salts keep a 3-gram, a word and a bigram that hash alike apart.
_SALT_CHAR = {n: np.uint64(0x9E3779B97F4A7C15 * n % 2**64) for n in range(1, 9)}
_SALT_BIGRAM = np.uint64(0xD6E8FEB86659FD93)
#: Texts embedded per numpy pass: bounds the temporaries (three ``chunk x 3 x dim`` arrays).
_CHUNK = 2048
#: Word hashes are memoised; the cache is dropped whole when it grows past this.
_WORD_CACHE_MAX = 1 << 20


def _mix(x: _U64) -> _U64:
    """Splitmix64's finaliser, in place: every input bit reaches every output bit."""
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x


class HashingEmbedder:
    """Signed feature hashing of word 1- and 2-grams and in-word character 3- to 5-grams.

    Deterministic across processes and machines; no model, no download. Embedding a
    short lesson takes tens of microseconds; batches are vectorised with numpy.

    The default dimension, 256, was chosen by measurement (see ops/bench/recall.py):
    against a near collision-free 8192-d hashing, the exact top 10 keeps 0.59 of its
    lessons at 128-d, 0.70 at 256-d, 0.75 at 384-d and 0.78 at 512-d. Past 256 each gain
    is small while index memory, HNSW build and query cost grow with the dimension
    (f16 HNSW at 100k lessons reaches recall@10 0.984 at 128-d and 0.989 at 256-d).

    Args:
        dim: vector length.
        weights: weight of the (word unigram, word bigram, character n-gram) groups,
            each group first normalised on its own.
    """

    def __init__(self, dim: int = DEFAULT_DIM,
                 weights: tuple[float, float, float] = (1.0, 0.5, 1.0)) -> None:
        if dim < 2:
            msg = f"an embedder's dimension must be at least 2, not {dim}"
            raise VectorShapeError(msg)
        self.dim = dim
        self.weights = weights
        w = "-".join(f"{x:g}" for x in weights)
        self.name = f"hashing-v1-d{dim}-w1_2-c3_5-g{w}"
        self._words: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"HashingEmbedder({self.name!r})"

    def embed(self, texts: Sequence[str]) -> F32:
        """Embed texts; see :meth:`Embedder.embed`."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), _CHUNK):
            out[start:start + _CHUNK] = self._embed_chunk(texts[start:start + _CHUNK])
        return out

    # -- internals ------------------------------------------------------------------

    def _word_hash(self, word: str) -> int:
        h = self._words.get(word)
        if h is None:
            if len(self._words) >= _WORD_CACHE_MAX:
                self._words.clear()
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            self._words[word] = h
        return h

    def _embed_chunk(self, texts: Sequence[str]) -> F32:
        n = len(texts)
        lowered = [t.lower() for t in texts]
        # One hash array for the three feature groups, each row tagged ``3·text + group``,
        # so a single bincount builds all of them: numpy call overhead, not arithmetic,
        # is what a one-text embed costs.
        uni_rows, uni, bi_rows, bi = self._words_of(lowered)
        char_rows, chars = self._char_grams(lowered)
        rows = np.concatenate((uni_rows * 3, bi_rows * 3 + 1, char_rows * 3 + 2))
        hashes = np.concatenate((uni, bi, chars))
        index = (hashes % np.uint64(self.dim)).astype(np.int64)
        sign = 1.0 - 2.0 * (hashes >> _S63).astype(np.float64)
        flat = np.bincount(rows * self.dim + index, weights=sign, minlength=n * 3 * self.dim)
        groups = flat.reshape(n, 3, self.dim)
        norms = np.sqrt(np.einsum("ngd,ngd->ng", groups, groups))
        scale = np.divide(np.array(self.weights), norms, out=np.zeros_like(norms),
                          where=norms > 0)
        out = np.einsum("ngd,ng->nd", groups, scale)
        total = np.sqrt(np.einsum("nd,nd->n", out, out))
        # A text with no features at all (empty, or only whitespace) still gets a unit
        # vector, the same for all of them, so cosine stays defined.
        empty = total == 0
        out[empty, 0] = 1.0
        total[empty] = 1.0
        out /= total[:, None]
        result: F32 = out.astype(np.float32)
        return result

    def _words_of(
        self, lowered: Sequence[str],
    ) -> tuple[npt.NDArray[np.int64], _U64, npt.NDArray[np.int64], _U64]:
        hashes: list[int] = []
        counts: list[int] = []
        for text in lowered:
            words = _WORD.findall(text)
            hashes.extend([self._word_hash(w) for w in words])
            counts.append(len(words))
        # Words' BLAKE2b hashes are already uniform; they are used as they are.
        uni = np.array(hashes, dtype=np.uint64)
        uni_rows = np.repeat(np.arange(len(lowered), dtype=np.int64), counts)
        # A bigram pairs each word with the next one of the same text.
        same = uni_rows[1:] == uni_rows[:-1]
        bi = _mix(uni[:-1][same] * _BASE + (uni[1:][same] ^ _SALT_BIGRAM))
        return uni_rows, uni, uni_rows[1:][same], bi

    @staticmethod
    def _char_grams(lowered: Sequence[str]) -> tuple[npt.NDArray[np.int64], _U64]:
        # Each text becomes " w1 w2 … " (whitespace collapsed, padded): an n-gram with no
        # space inside it (its ends may be spaces) lies within one word, and the double
        # space between two texts keeps every n-gram inside one text.
        padded = [(" " + " ".join(t.split()) + " ").encode() for t in lowered]
        data = np.frombuffer(b"".join(padded), dtype=np.uint8).astype(np.uint64)
        owner = np.repeat(np.arange(len(padded), dtype=np.int64), [len(p) for p in padded])
        spaces = np.concatenate(([0], np.cumsum(data == _SPACE)))
        rows: list[npt.NDArray[np.int64]] = []
        hashes: list[_U64] = []
        h = data
        for n in range(2, 6):
            # Rolling polynomial: h holds the (n-1)-gram hashes; extend each by one byte.
            h = h[:-1] * _BASE + data[n - 1:]
            if n < 3:
                continue
            count = h.size
            keep = spaces[n - 1:n - 1 + count] == spaces[1:1 + count]
            rows.append(owner[:count][keep])
            hashes.append(h[keep] ^ _SALT_CHAR[n])
        return np.concatenate(rows), _mix(np.concatenate(hashes))


def default_embedder() -> HashingEmbedder:
    """The embedder used when none is configured: offline, deterministic, 256-d."""
    return HashingEmbedder()
