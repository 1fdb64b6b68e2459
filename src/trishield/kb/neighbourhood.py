"""The KB's side of outlier screening at ingest: what a batch may be compared with.

A screener (Ring 1) asks how far a new document lies from what the KB already holds. If the
batch were part of that yardstick, poisons written together would form their own
neighbourhood and the verdict would depend on how the batch was cut; if one writer's documents
counted without limit, a writer could flood the KB and move the yardstick for everyone. So the
neighbours are stored chunks by *other* writers (searched in the KB's dense index with the
writer's chunks excluded), and the reference sample is drawn across writers, capped per
writer, with a seed that depends only on the writer's name.
"""

from __future__ import annotations

import hashlib

import numpy as np

from trishield.kb.indexes import DenseIndex
from trishield.kb.screening import ReferenceSample, StoredNeighbour
from trishield.kb.store import Store

REFERENCE_SIZE = 2000
"""At most this many documents in a reference sample."""
REFERENCE_PER_WRITER = 100
"""At most this many of one writer's documents in a reference sample (fewer when many writers
share :data:`REFERENCE_SIZE`): a writer that floods the KB weighs no more than one that
wrote 100 documents."""
REFERENCE_SEED = 0


def _writer_seed(writer: str) -> int:
    """A stable per-writer seed: a writer's sample does not change when others write."""
    return int.from_bytes(hashlib.sha256(writer.encode()).digest()[:8], "big")


class StoredNeighbourhood:
    """:class:`~trishield.kb.screening.Neighbourhood` over a KB's committed documents.

    Built for one ingest, under the write lock, from the dense index of the current
    generation; it reads the store lazily and caches what it read.
    """

    def __init__(self, store: Store, dense: DenseIndex, dimension: int, writer: str, *,
                 seed: int = REFERENCE_SEED):
        self._store = store
        self._dense = dense
        self._dimension = dimension
        self._writer = writer
        self._seed = seed
        self._counts: dict[str, int] | None = None
        self._excluded: dict[str | None, np.ndarray] = {}

    @property
    def writer(self) -> str:
        return self._writer

    def _documents_per_writer(self) -> dict[str, int]:
        if self._counts is None:
            self._counts = {name: count for name, count in self._store.documents_per_writer()
                            .items() if name != self._writer}
        return self._counts

    def document_count(self, *, also_excluding: str | None = None) -> int:
        return sum(count for name, count in self._documents_per_writer().items()
                   if name != also_excluding)

    def nearest(self, vectors: np.ndarray, k: int, *,
                also_excluding: str | None = None) -> np.ndarray:
        scores, _ = self._dense.search_many(vectors, k, excluding=self._excluding(also_excluding))
        return scores

    def _excluding(self, also_excluding: str | None) -> np.ndarray:
        """Chunk row ids of the batch's writer (and ``also_excluding``), read once."""
        if also_excluding not in self._excluded:
            self._excluded[also_excluding] = self._store.chunk_pks_of(
                {self._writer} | ({also_excluding} if also_excluding is not None else set()))
        return self._excluded[also_excluding]

    def reference(self) -> ReferenceSample:
        counts = self._documents_per_writer()
        if not counts:
            return ReferenceSample(np.zeros((0, self._dimension), dtype=np.float32), ())
        per_writer = min(REFERENCE_PER_WRITER, max(1, REFERENCE_SIZE // len(counts)))
        by_writer = self._store.document_pks_by_writer(excluding=self._writer)
        chosen: list[int] = []
        writers: list[str] = []
        for name in sorted(by_writer):
            pks = by_writer[name]
            if len(pks) > per_writer:
                rng = np.random.default_rng([self._seed, _writer_seed(name)])
                pks = [pks[i] for i in sorted(rng.choice(len(pks), per_writer, replace=False))]
            chosen += pks
            writers += [name] * len(pks)
        return ReferenceSample(self._store.document_vectors(chosen, self._dimension),
                               tuple(writers))

    def nearest_documents(self, vectors: np.ndarray, k: int) -> list[list[StoredNeighbour]]:
        scores, ids = self._dense.search_many(vectors, k, excluding=self._excluding(None))
        chunks = self._store.chunks_by_pk(sorted({int(i) for i in ids.ravel() if i >= 0}))
        texts = self._store.document_texts({chunk.doc_id for chunk in chunks.values()})
        found: list[list[StoredNeighbour]] = []
        for row_scores, row_ids in zip(scores, ids, strict=True):
            row: dict[str, StoredNeighbour] = {}
            for score, pk in zip(row_scores, row_ids, strict=True):
                chunk = chunks.get(int(pk))
                if chunk is None or chunk.doc_id in row:
                    continue
                row[chunk.doc_id] = StoredNeighbour(
                    doc_id=chunk.doc_id, chunk_id=chunk.chunk_id, writer=chunk.writer,
                    tier=chunk.tier, text=texts[chunk.doc_id], similarity=float(score))
            found.append(list(row.values()))
        return found
