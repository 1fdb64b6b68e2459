"""Which stored documents Ring 1's reference sample at ingest holds, redrawn only where needed.

The sample (``kb/screening/neighbourhood.py``) takes up to :data:`REFERENCE_PER_WRITER` documents
from each writer other than the screened batch's (fewer when many writers share
:data:`REFERENCE_SIZE`): the writer's ``share`` documents with the smallest *draw keys*, a
seeded 64-bit hash of the writer's name and the document's row id (:func:`draw_keys`).

Why keys rather than ``rng.choice`` over the writer's documents: the sample must barely move
from one write to the next, because every document that enters it is searched over the whole
index (its neighbours by other writers). ``rng.choice(n + 1, share)`` and ``rng.choice(n,
share)`` pick different sets, so a writer's every write redrew its whole part (up to 100
documents: 300+ ms of flat search at 100,000 chunks). With keys a write changes at most one
of the writer's sampled documents (the new one, when its key is among the ``share``
smallest), a delete at most one, and a share that shrinks or grows takes a prefix of the same
order. The draw is still a uniform sample without replacement of the writer's documents.

:class:`ReferenceDraws` keeps each writer's draw with the writer's document version
(:mod:`trishield.kb.store.writer_counts`, kept by triggers): a screen reads one row per writer and
redraws only the writers whose version or share changed, reusing the vectors of documents
that stay in the sample when the writer only added documents since. The result is the fresh
draw, document for document (``tests/test_kb_reference_draw.py``). A handle of the KB owns one
(with its neighbour cache) and uses it under the KB's write lock.
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


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over unsigned 64-bit integers (wrapping arithmetic): a stable
    hash, the same on every platform and numpy version."""
    z = values + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def draw_keys(pks: np.ndarray, writer: str, seed: int = REFERENCE_SEED) -> np.ndarray:
    """Each document's draw key: a seeded hash of the writer and the row id. The keys of a
    document never change while it is stored, so which of a writer's documents have the
    smallest ones changes only where a document enters or leaves."""
    salt = _mix(np.array([writer_seed(writer) ^ (seed & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64))
    with np.errstate(over="ignore"):
        return _mix(np.asarray(pks, dtype=np.int64).astype(np.uint64) ^ salt[0])


def writer_sample(pks: np.ndarray, writer: str, share: int,
                  seed: int = REFERENCE_SEED) -> np.ndarray:
    """The ``share`` of ``writer``'s documents ``pks`` with the smallest draw keys (ties, which
    a 64-bit hash makes rare, by row id), oldest first; all of them when there are no more."""
    pks = np.asarray(pks, dtype=np.int64)
    if len(pks) <= share:
        return np.sort(pks)
    order = np.lexsort((pks, draw_keys(pks, writer, seed)))
    return np.sort(pks[order[:share]])


@dataclass
class WriterDraw:
    """One writer's part of the sample: at ``version`` of its ``documents``, with ``share``
    per writer, the chosen document row ids (oldest first) and their document vectors;
    ``newest`` is the row id of the writer's newest document then."""

    version: int
    documents: int
    share: int
    pks: list[int]
    vectors: np.ndarray
    newest: int

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
        self.read_every = 0
        """Of those, draws that read every document of the writer (the others read only
        the documents added since the writer's last draw, or none)."""

    def draw(self, store: Store, dimension: int, *, excluding: str,
             versions: dict[str, tuple[int, int]] | None = None) -> Drawn:
        """The sample for a batch written by ``excluding``: the same documents as a fresh
        draw, redrawing only writers whose documents or share changed. ``versions`` is
        :meth:`Store.writer_versions` when the caller read it already."""
        versions = {name: value for name, value in (
            store.writer_versions() if versions is None else versions).items()
                    if name != excluding}
        share = share_per_writer(len(versions))
        for name in [name for name in self.draws if name not in versions and name != excluding]:
            del self.draws[name]  # a writer left the KB; the writer screened keeps its draw
        stale = [name for name, (_, version) in versions.items()
                 if name not in self.draws or not self.draws[name].still_valid(version, share)]
        chosen = {name: self._choose(store, name, versions[name], share)
                  for name in sorted(stale)}
        missing = [pk for pks, _, known in chosen.values() for pk in pks if pk not in known]
        read = dict(zip(missing, store.document_vectors(missing, dimension), strict=True))
        for name, (pks, newest, known) in chosen.items():
            vectors = (np.stack([known[pk] if pk in known else read[pk] for pk in pks])
                       .astype(np.float32, copy=False)
                       if pks else np.zeros((0, dimension), dtype=np.float32))
            documents, version = versions[name]
            self.draws[name] = WriterDraw(version, documents, share, pks, vectors, newest)
        self.redrawn += len(stale)
        names = sorted(versions)
        pks = [pk for name in names for pk in self.draws[name].pks]
        writers = tuple(name for name in names for _ in self.draws[name].pks)
        stacked = (np.concatenate([self.draws[name].vectors for name in names])
                   if names else np.zeros((0, dimension), dtype=np.float32))
        return Drawn(pks, writers, stacked.astype(np.float32, copy=False))

    def _choose(self, store: Store, writer: str, state: tuple[int, int], share: int
                ) -> tuple[list[int], int, dict[int, np.ndarray]]:
        """``writer``'s part of the sample at ``state`` (stored documents, version): its
        ``share`` documents with the smallest draw keys, the row id of its newest document,
        and the vectors already known of them (the caller reads the rest, for every writer
        at once).

        When the writer only added documents since its last draw and the share did not grow
        past what that draw took, the new part lies within the last one and the added
        documents (those above its newest row id then: SQLite gives a new row an id above
        every row of the table, checked against the count), so only those are read; else
        every document of the writer is. Vectors of documents already drawn are reused on
        the same condition (no row id freed and taken again)."""
        last = self.draws.get(writer)
        new = None if last is None else store.documents_added(
            writer, (last.documents, last.version), last.newest, state)
        known = {} if last is None or new is None else dict(
            zip(last.pks, last.vectors, strict=True))
        if last is not None and new is not None and (
                share <= last.share or last.documents <= last.share):
            chosen = writer_sample(np.asarray(last.pks + new, dtype=np.int64), writer, share,
                                   self.seed).tolist()
            return chosen, new[-1] if new else last.newest, known
        self.read_every += 1
        every = store.document_pks_of_writer(writer)
        chosen = writer_sample(np.asarray(every, dtype=np.int64), writer, share,
                               self.seed).tolist()
        return chosen, every[-1] if every else 0, known
