"""Ring 1 at ingest, as one KB handle runs it: the neighbourhood, and what it keeps between writes.

A screened batch is measured against what the KB already stores from *other* writers
(:class:`~trishield.kb.screening.neighbourhood.StoredNeighbourhood`, searched in the dense
index). The handle keeps the reference sample's neighbour lists, draws and writers' chunk ids
between writes (:class:`~trishield.kb.screening.neighbour_cache.NeighbourCache`), hands a
screened batch's own search to them after the commit, saves them when it closes and reads them
back at the next handle's first screen
(:class:`~trishield.kb.screening.neighbour_cache_file.SavedNeighbours`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from trishield.kb.documents import Chunk, Document
from trishield.kb.indexes.dense import DenseIndex
from trishield.kb.screening import Screener, ScreeningVerdict
from trishield.kb.screening.neighbour_cache import NeighbourCache
from trishield.kb.screening.neighbour_cache_file import SavedNeighbours
from trishield.kb.screening.neighbourhood import StoredNeighbourhood
from trishield.kb.store import Store


def document_vectors(chunks: Sequence[Sequence[Chunk]], embeddings: np.ndarray) -> np.ndarray:
    """One unit vector per document: the normalised mean of its chunks' embeddings (rows of
    ``embeddings`` in chunk order)."""
    vectors, start = [], 0
    for per_document in chunks:
        mean = embeddings[start:start + len(per_document)].mean(axis=0)
        vectors.append(mean / (np.linalg.norm(mean) or 1.0))
        start += len(per_document)
    return np.asarray(vectors, dtype=np.float32)


class IngestScreening:
    """What one KB handle keeps for Ring 1's screens: ``cache`` (the neighbour lists between
    writes) and its saved copy in the KB directory, which belongs to the KB ``identity``
    names (its creation time and embedding model)."""

    def __init__(self, directory: Path, store: Store, dimension: int, embedding_model: str,
                 dense: Callable[[], DenseIndex]):
        self.store = store
        self.dimension = dimension
        self.embedding_model = embedding_model
        self._dense = dense
        self.cache = NeighbourCache()
        self.saved = SavedNeighbours(directory, self.identity, dimension)

    def identity(self) -> dict[str, str]:
        """Which KB the saved neighbour lists belong to (kb/screening/neighbour_cache_file.py)."""
        meta = self.store.meta()
        return {"created_at": meta.get("created_at", ""),
                "embedding_model": self.embedding_model}

    def screen(self, guard: Screener, documents: Sequence[Document],
               chunks: Sequence[Sequence[Chunk]], embeddings: np.ndarray,
               tiers: Sequence[str], writer: str
               ) -> tuple[Sequence[ScreeningVerdict], StoredNeighbourhood]:
        """Ring 1 at ingest: each document alone, plus its distance from what the KB already
        stores from *other* writers (never the batch itself, never the writer's own earlier
        documents), so a verdict does not depend on how the batch was cut. The neighbourhood
        comes back so that the documents stored can hand their neighbours to the handle's
        cache (:meth:`StoredNeighbourhood.hand_over`)."""
        vectors = document_vectors(chunks, embeddings)
        dense = self._dense()
        self.cache = self.saved.restore(self.cache)
        neighbourhood = StoredNeighbourhood(self.store, dense, self.dimension, writer,
                                            cache=self.cache)
        verdicts = guard.screen([d.id for d in documents], [d.text for d in documents],
                                tiers=list(tiers), embeddings=vectors,
                                neighbourhood=neighbourhood)
        return verdicts, neighbourhood

    def save(self) -> None:
        """Save the lists for the next handle (at close; a writable KB only)."""
        self.saved.save(self.cache)

    def discard(self) -> None:
        """Forget the lists, kept and saved (``repair``)."""
        self.saved.discard()
        self.cache = NeighbourCache()
