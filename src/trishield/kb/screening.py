"""What the knowledge base asks of a screener at ingest, and nothing more.

The KB sits below the defense rings, yet it must hold back what Ring 1 blocks, in the same
transaction as the rest of the batch. So the KB defines the contract here and the screener
(``trishield.rings.ingest_guard.IngestGuard``, or any other object with the same shape)
implements it: kb/ never imports rings/, and a higher layer chooses which screener guards a KB.
"""

from __future__ import annotations

from collections.abc import Sequence
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


@runtime_checkable
class Screener(Protocol):
    """Judges a batch of new documents before they are committed.

    ``embeddings`` holds one unit vector per document (the normalised mean of its chunks);
    ``neighbourhood`` holds unit vectors of what the KB already stores (a sample, plus the
    batch itself while the KB is still small), so a screener can tell an outlier. Returns one
    verdict per document, in order.
    """

    def screen(self, ids: Sequence[str], texts: Sequence[str], *, tiers: Sequence[str],
               embeddings: np.ndarray,
               neighbourhood: np.ndarray) -> Sequence[ScreeningVerdict]: ...
