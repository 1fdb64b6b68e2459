"""Which stored documents Ring 1's reference sample at ingest holds, redrawn only where needed.

The sample (``kb/neighbourhood.py``) takes up to :data:`REFERENCE_PER_WRITER` documents from
each writer other than the screened batch's (fewer when many writers share
:data:`REFERENCE_SIZE`), chosen with a seed that depends only on the writer's name and the
writer's own documents. So one writer's part of the sample changes only when that writer's
documents change or when the per-writer share does (a writer joining or leaving the KB moves
``REFERENCE_SIZE // writers``). Drawn afresh, every screened write read every stored
document's row id (about 50 ms at 50,000 documents) and the sample's 2,000 vectors, though one
write changes one writer's documents.

:class:`ReferenceDraws` keeps each writer's draw with the writer's document version
(:mod:`trishield.kb.writer_counts`, kept by triggers): a screen reads one row per writer and
redraws, with the same seed and the same ``rng.choice`` as a fresh draw, only the writers
whose version or share changed. The result is the fresh draw, document for document
(``tests/test_kb_reference_draw.py``). A handle of the KB owns one (with its neighbour cache)
and uses it under the KB's write lock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from trishield.kb.store import Store

REFERENCE_SIZE = 2000
"""At most this many documents in a reference sample."""
REFERENCE_PER_WRITER = 100
"""At most this many of one writer's documents in a reference sample (fewer when many writers
share :data:`REFERENCE_SIZE`): a writer that floods the KB weighs no more than one that
wrote 100 documents."""
REFERENCE_SEED = 0


def writer_seed(writer: str) -> int:
    """A stable per-writer seed: a writer's sample does not change when others write."""
    return int.from_bytes(hashlib.sha256(writer.encode()).digest()[:8], "big")


def share_per_writer(writers: int) -> int:
    """How many documents of each writer a sample takes when ``writers`` writers share it."""
    return min(REFERENCE_PER_WRITER, max(1, REFERENCE_SIZE // max(writers, 1)))


@dataclass
class WriterDraw:
    """One writer's part of the sample: at ``version`` of its documents, with ``share`` per
    writer, the chosen document row ids (oldest first) and their document vectors."""

    version: int
    documents: int
    share: int
    pks: list[int]
    vectors: np.ndarray

    def still_valid(self, version: int, share: int) -> bool:
        """The same documents, and the same choice among them: the share is unchanged, or
        both shares take all of them."""
        return version == self.version and (
            share == self.share or self.documents <= min(share, self.share))


@dataclass(frozen=True)
class Drawn:
    """A reference sample's documents: row ids, their writers and vectors, writer by writer
    in name order."""

    pks: list[int]
    writers: tuple[str, ...]
    vectors: np.ndarray


class ReferenceDraws:
    """Per-writer draws of one KB handle, kept between screened writes (module docstring)."""

    def __init__(self, seed: int = REFERENCE_SEED):
        self.seed = seed
        self.draws: dict[str, WriterDraw] = {}
        self.redrawn = 0
        """Writers drawn (again) so far: how much a screen had to read."""

    def draw(self, store: Store, dimension: int, *, excluding: str) -> Drawn:
        """The sample for a batch written by ``excluding``: the same documents as a fresh
        draw, redrawing only writers whose documents or share changed."""
        versions = {name: value for name, value in store.writer_versions().items()
                    if name != excluding}
        share = share_per_writer(len(versions))
        for name in [name for name in self.draws if name not in versions and name != excluding]:
            del self.draws[name]  # a writer left the KB; the writer screened keeps its draw
        stale = [name for name, (_, version) in versions.items()
                 if name not in self.draws or not self.draws[name].still_valid(version, share)]
        chosen = {name: self._choose(store, name, share) for name in sorted(stale)}
        vectors = store.document_vectors(
            [pk for pks in chosen.values() for pk in pks], dimension)
        start = 0
        for name, pks in chosen.items():
            self.draws[name] = WriterDraw(versions[name][1], versions[name][0], share, pks,
                                          vectors[start:start + len(pks)])
            start += len(pks)
        self.redrawn += len(chosen)
        names = sorted(versions)
        pks = [pk for name in names for pk in self.draws[name].pks]
        writers = tuple(name for name in names for _ in self.draws[name].pks)
        stacked = (np.concatenate([self.draws[name].vectors for name in names])
                   if names else np.zeros((0, dimension), dtype=np.float32))
        return Drawn(pks, writers, stacked.astype(np.float32, copy=False))

    def _choose(self, store: Store, writer: str, share: int) -> list[int]:
        """Up to ``share`` of ``writer``'s stored documents, seeded by the writer's name."""
        pks = store.document_pks_of_writer(writer)
        if len(pks) > share:
            rng = np.random.default_rng([self.seed, writer_seed(writer)])
            pks = [pks[i] for i in sorted(rng.choice(len(pks), share, replace=False))]
        return pks
