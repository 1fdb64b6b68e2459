"""The seam between a knowledge base and the engine that searches its chunks.

SQLite stays the truth; an :class:`IndexBackend` is what answers "nearest chunks to this
vector" and "best BM25 chunks for this query", keyed by chunk row id. The KB never rebuilds an
engine to take in a write: every write appends to the chunk change log
(:mod:`trishield.kb.store.change_log`) in its own transaction, and :func:`catch_up` hands the engine
the rows added and removed since the log position it reflects. That is all another engine
(Milvus, say) has to implement.

Lifecycle, for any backend:

* it is created for a KB at some log ``position`` (empty at 0, or loaded from a snapshot);
* :meth:`IndexBackend.sync` brings it to the store's current position (the KB calls it inside
  the read transaction that runs a search, so the rows it sees and the rows a search returns
  are the same); it returns ``False`` when the log no longer reaches back to its position,
  and the KB then starts it again from a snapshot or from the ``chunks`` table;
* :meth:`IndexBackend.close` releases what it holds; the KB does not use it afterwards.

Scores: ``dense`` returns cosine similarity (higher is better); ``lexical`` a BM25 score
(higher is better); both best first, ties in row-id order.

:class:`EmbeddedBackend` is the in-process engine: a FAISS :class:`DenseIndex` in memory and
the FTS5 :class:`LexicalIndex` inside ``kb.sqlite``. SQLite's triggers already maintain the
lexical half in the writing transaction, so its ``add``/``remove`` change the dense half only
and the ``texts`` they are given are for engines that index text themselves.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from trishield.kb.indexes.dense import DenseIndex, ExactVectors
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.store import Store


@runtime_checkable
class IndexBackend(Protocol):
    """A search engine over a KB's chunks that follows the chunk change log."""

    position: int
    """The change-log sequence number this backend reflects."""
    dimension: int
    """Length of the vectors it indexes (the KB's embedding dimension)."""

    def add(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str]) -> None:
        """Index rows: ``ids`` int64, ``vectors`` float32 ``(n, d)`` L2-normalised."""

    def remove(self, ids: np.ndarray) -> None:
        """Drop rows by id; ids it does not hold are ignored."""

    def dense(self, vector: np.ndarray, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` rows nearest ``vector``: ``(id, cosine)``, best first."""

    def lexical(self, query: str, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` best BM25 rows for ``query``: ``(id, score)``, best first."""

    def unknown_terms(self, text: str) -> list[str]:
        """The text's index terms that no row contains, in order, once each."""

    def __len__(self) -> int:
        """Rows it holds (what the store holds, once in step)."""

    def sync(self, store: Store) -> bool:
        """Catch up with ``store``'s change log (see the module docstring)."""

    def close(self) -> None:
        """Release what it holds."""


def catch_up(backend: IndexBackend, store: Store, upto: int | None = None) -> bool:
    """Apply the store's changes after ``backend.position`` (up to ``upto``, else the
    current position) to ``backend``: removals first, then additions, so a reused row id
    ends up with its new vector. ``False`` (nothing applied) when the log was pruned past
    the backend's position. Call it inside a read transaction of ``store``."""
    where = store.index_position()
    target = where.current if upto is None else upto
    if backend.position < where.pruned or backend.position > target:
        return False
    if backend.position == target:
        return True
    delta = store.index_delta(backend.position, target, backend.dimension)
    if len(delta.removed):
        backend.remove(delta.removed)
    if len(delta.added_ids):
        backend.add(delta.added_ids, delta.vectors, delta.texts)
    backend.position = target
    return True


class EmbeddedBackend:
    """FAISS in memory + FTS5 in ``kb.sqlite``: the KB's own engine."""

    def __init__(self, dense: DenseIndex, lexical: LexicalIndex, position: int, *,
                 exact: ExactVectors | None = None):
        self.dense_index = dense
        self.lexical_index = lexical
        self.position = position
        self.dimension = dense.dimension
        self._exact = exact

    def add(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str]) -> None:
        self.dense_index.add(np.asarray(ids, dtype=np.int64),
                             np.asarray(vectors, dtype=np.float32))

    def remove(self, ids: np.ndarray) -> None:
        self.dense_index.remove(np.asarray(ids, dtype=np.int64))

    def dense(self, vector: np.ndarray, depth: int) -> list[tuple[int, float]]:
        return self.dense_index.search(vector, depth, exact=self._exact)

    def lexical(self, query: str, depth: int) -> list[tuple[int, float]]:
        return self.lexical_index.search(query, depth)

    def unknown_terms(self, text: str) -> list[str]:
        return self.lexical_index.unknown_terms(text)

    def __len__(self) -> int:
        return len(self.dense_index)

    def sync(self, store: Store) -> bool:
        return catch_up(self, store)

    def close(self) -> None:
        self._exact = None
