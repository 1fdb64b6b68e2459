"""The read path of a KB handle: searches, and what higher layers read without SQL.

A search reads the indexes and the rows in one database snapshot
(:func:`~trishield.kb.indexes.snapshots.reading`), so a write committed by another process
meanwhile is either wholly in the answer or wholly absent; on a Milvus engine it is
:meth:`~trishield.kb.indexes.engine_link.EngineLink.search`. The ranking is a registered
function of :mod:`trishield.kb.indexes.retrieval`. The other reads are what the rings, the
API and the benchmarks need from the store (so that nothing outside kb/ runs SQL on it):
each writer's track record (kept until the change log moves), ids, hashes and embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from trishield.errors import InputError, KnowledgeBaseError
from trishield.kb.indexes.dense import DenseIndex
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.indexes.retrieval import BACKENDS, RETRIEVAL_BACKENDS, Candidate, Searchers
from trishield.kb.indexes.snapshots import reading

if TYPE_CHECKING:
    from trishield.kb.knowledge_base import KnowledgeBase

MAX_K = 1000
OUTLIER_REFERENCE_SIZE = 2000


class Reads:
    """The read path of one KB handle (``KnowledgeBase`` delegates its methods of the same
    names here; their docstrings there say what each does)."""

    def __init__(self, kb: KnowledgeBase):
        self.kb = kb
        self.store = kb.store
        self._writer_records: tuple[int, dict[str, int], dict[str, float]] | None = None

    def search(self, query: str, *, backend: str = "dense", k: int = 5,
               depth: int | None = None) -> list[Candidate]:
        """The top ``k`` chunks for ``query`` (see :meth:`KnowledgeBase.search`)."""
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty")
        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
        if not 1 <= k <= MAX_K:
            raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
        if not self.kb.settings.engine.embedded:
            return self.kb._engines.search(query, backend, k, depth)
        with reading(self.store):
            _, dense, lexical = self.kb._refresh_indexes(persist=False)
            searchers = Searchers(lambda text, n: self._dense(dense, text, n), lexical.search)
            scored = RETRIEVAL_BACKENDS.get(backend)(searchers, query, k, depth)
            chunks = self.store.chunks_by_pk([item for item, _, _ in scored])
        return [Candidate(chunks[item], score, rank, backend, parts)
                for rank, (item, score, parts) in enumerate(scored, start=1)]

    def _dense(self, index: DenseIndex, query: str, depth: int) -> list[tuple[int, float]]:
        vector = self.kb.embedder.encode_query(query)
        return index.search(vector, depth, exact=self.kb._dense_indexes.exact_vectors)

    def unknown_terms(self, text: str) -> list[str]:
        """Stemmed content words of ``text`` that no chunk of this KB contains."""
        return LexicalIndex(self.store.connection).unknown_terms(text)

    def writer_records(self) -> tuple[dict[str, int], dict[str, float]]:
        """:meth:`documents_per_writer` and :meth:`writers_since` from one look at the
        change log (Ring 2 reads both on every question), read again from the store only
        when the log has moved since they were last read; copies, so the cache stays as
        read."""
        position = self.store.index_position().current
        cached = self._writer_records
        if cached is None or cached[0] != position:
            cached = (position, self.store.documents_per_writer(), self.store.writers_since())
            self._writer_records = cached
        return dict(cached[1]), dict(cached[2])

    def documents_per_writer(self) -> dict[str, int]:
        """``writer -> stored documents``, kept until the change log moves."""
        return self.writer_records()[0]

    def writers_since(self) -> dict[str, float]:
        """``writer -> when its first stored document entered the KB``."""
        return self.writer_records()[1]

    def document_ids(self) -> list[str]:
        """Ids of every stored document (not the quarantined or deleted ones), oldest first."""
        rows = self.store.connection.execute("SELECT doc_id FROM documents ORDER BY pk")
        return [doc_id for (doc_id,) in rows]

    def content_hash_of(self, doc_id: str) -> str | None:
        """The stored document's content hash (what a publisher signs), or None if absent."""
        row = self.store.connection.execute(
            "SELECT content_hash FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        return None if row is None else row[0]

    def documents_with_embeddings(self) -> list[tuple[str, str, np.ndarray]]:
        """Every stored document, oldest first, as ``(id, text, chunk embeddings)``: one row
        per chunk, in chunk order (to screen stored documents as if they were written now)."""
        rows = self.store.connection.execute(
            "SELECT d.doc_id, d.text, c.embedding FROM documents d JOIN chunks c "
            "ON c.doc_pk = d.pk ORDER BY d.pk, c.chunk_index").fetchall()
        grouped: dict[str, tuple[str, list[bytes]]] = {}
        for doc_id, text, blob in rows:
            grouped.setdefault(doc_id, (text, []))[1].append(blob)
        return [(doc_id, text, np.frombuffer(b"".join(blobs), dtype=np.float32)
                 .reshape(len(blobs), self.kb.dimension))
                for doc_id, (text, blobs) in grouped.items()]

    def embedding_sample(self, limit: int = OUTLIER_REFERENCE_SIZE, seed: int = 0) -> np.ndarray:
        """Up to ``limit`` stored chunk embeddings (a seeded sample when there are more)."""
        return self.store.sample_embeddings(self.kb.dimension, limit, seed)

    def embeddings_for(self, candidates: Sequence[Candidate]) -> dict[int, np.ndarray]:
        """The stored embedding of each candidate's chunk, by chunk primary key."""
        carried = [c.chunk for c in candidates if c.chunk.embedding is not None]
        found: dict[int, np.ndarray] = {}
        if carried:
            width = 4 * self.kb.dimension
            sizes = {len(chunk.embedding) for chunk in carried}
            if sizes != {width}:
                raise KnowledgeBaseError(f"stored embeddings of {sorted(sizes)} bytes, not "
                                         f"{width} (dimension {self.kb.dimension})")
            vectors = np.frombuffer(b"".join(chunk.embedding for chunk in carried),
                                    dtype=np.float32).reshape(len(carried), self.kb.dimension)
            found = dict(zip((chunk.pk for chunk in carried), vectors, strict=True))
        if len(found) < len(candidates):
            found.update(self.store.embeddings_of(
                [c.chunk.pk for c in candidates if c.chunk.pk not in found], self.kb.dimension))
        return found
