"""What the knowledge base asks of a screener at ingest, and nothing more.

The KB sits below the defense rings, yet it must hold back what Ring 1 blocks, in the same
transaction as the rest of the batch. So the KB defines the contract here and the screener
(``trishield.rings.ingest_guard.IngestGuard``, or any other object with the same shape)
implements it: kb/ never imports rings/, and a higher layer chooses which screener guards a KB.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


class ScreeningVerdict(Protocol):
    """One document's verdict, as the KB uses it: whether to hold the document back, and the
    record that the quarantine table and the ingest report keep for it."""

    @property
    def subject(self) -> str:
        """The id of the document judged."""
        ...

    @property
    def blocked(self) -> bool:
        """True: the document goes to the quarantine instead of into the indexes."""
        ...

    def as_dict(self) -> dict[str, object]:
        """Every score and reason, JSON-ready; stored with a quarantined document."""
        ...


@dataclass(frozen=True)
class ReferenceSample:
    """Stored documents a screener may calibrate on: one unit vector per document (the
    normalised mean of its chunks) and the writer of each, drawn across writers with a cap
    per writer, so that no single writer, however much it writes, dominates the sample."""

    vectors: np.ndarray
    writers: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.writers)


@dataclass(frozen=True)
class StoredNeighbour:
    """A stored document near a new one, written by another writer: what a screener needs to
    tell whether the new document copies it, and whose text it would be copying."""

    doc_id: str
    chunk_id: str
    """The document's chunk nearest to the new document."""
    writer: str
    tier: str
    text: str
    """The whole stored document, as written."""
    similarity: float
    """Cosine similarity of the new document's vector to :attr:`chunk_id`."""


@dataclass(frozen=True)
class Contradiction:
    """What a screener found a new document contradicts: another writer's stored document
    that it copies with facts changed (Ring 1's tampered copy). A verdict may carry one as
    ``contradiction`` (optional: the KB reads it with ``getattr``); the KB then records the
    conflict as a dispute in the ingest's transaction (:mod:`trishield.kb.store.disputes`)."""

    original: StoredNeighbour
    changes: tuple[tuple[str, str], ...]
    """Each changed fact: the stored words and the new document's words."""
    copied: float
    """Share of the texts copied word for word."""


class Neighbourhood(Protocol):
    """What a batch may be compared with: the documents the KB stored *before* the batch, by
    writers other than the batch's writer.

    The batch is not stored yet, so no document is its own or a batch mate's neighbour; and
    the writer's earlier documents are left out too, so a writer cannot make its own
    documents look ordinary by writing many of them, and the same documents get the same
    neighbours whether they arrive as one batch or one at a time.
    """

    @property
    def writer(self) -> str:
        """The writer of the batch being screened (whose documents are never neighbours)."""
        ...

    def document_count(self, *, also_excluding: str | None = None) -> int:
        """Stored documents by writers other than :attr:`writer` (and ``also_excluding``)."""
        ...

    def nearest(self, vectors: np.ndarray, k: int, *,
                also_excluding: str | None = None) -> np.ndarray:
        """Cosine similarities of each row of ``vectors`` to its ``k`` nearest stored chunks
        by writers other than :attr:`writer` (and ``also_excluding``), best first; an
        ``(n, k)`` array, NaN where fewer than ``k`` were found."""
        ...

    def reference(self) -> ReferenceSample:
        """A deterministic sample of stored documents by writers other than :attr:`writer`,
        capped per writer."""
        ...

    def nearest_documents(self, vectors: np.ndarray, k: int) -> list[list[StoredNeighbour]]:
        """For each row of ``vectors``, the stored documents by writers other than
        :attr:`writer` that own its ``k`` nearest chunks: one entry per document (its
        nearest chunk), best first."""
        ...


@runtime_checkable
class Screener(Protocol):
    """Judges a batch of new documents before they are committed.

    ``embeddings`` holds one unit vector per document (the normalised mean of its chunks);
    ``neighbourhood`` is what the KB already stores from other writers, so a screener can tell
    an outlier without the batch (or its writer) being its own yardstick. Returns one verdict
    per document, in order.
    """

    def screen(self, ids: Sequence[str], texts: Sequence[str], *, tiers: Sequence[str],
               embeddings: np.ndarray,
               neighbourhood: Neighbourhood) -> Sequence[ScreeningVerdict]: ...
