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

import numpy as np

from trishield.kb.indexes.dense import DenseIndex
from trishield.kb.screening import ReferenceSample, StoredNeighbour
from trishield.kb.screening.neighbour_cache import CachedNeighbours, NeighbourCache
from trishield.kb.screening.reference_draw import ReferenceDraws
from trishield.kb.screening.writer_chunks import WriterChunks
from trishield.kb.store import Store

BATCHED_WRITER_CHUNKS = 1024
"""How many rows more than asked the batched reference search reads (fewer when no reference
writer holds that many chunks), so that dropping a document's own writer's chunks after it
leaves enough. A search costs about the same at depth 5 as at 505 (flat, 50,000 chunks: 20
rows 75-80 ms either way, 2,000 rows 1.2-1.3 s), so a hundred writers of 500 chunks each
cost one search of the sample, not a hundred of 20 rows (9 s); a document whose neighbours
are mostly its own writer's past this depth is searched again with the writer excluded."""
BATCH_SEARCH_DEPTH = 16
"""Least depth of the batch's own search, kept for both of Ring 1's questions about the same
documents (``S_out`` reads 10 neighbours, the tampered-copy search 5 chunks): deeper costs
nothing measurable, and a second search of a flat index of 100,000 chunks costs 7-15 ms."""


def _by_writer(rows: list[int], writers: tuple[str, ...]) -> dict[str, list[int]]:
    """``rows`` of a reference sample grouped by their writer (one search per writer)."""
    grouped: dict[str, list[int]] = {}
    for row in rows:
        grouped.setdefault(writers[row], []).append(row)
    return grouped


def _first_kept(entries: list[CachedNeighbours], own: np.ndarray, k: int
                ) -> tuple[np.ndarray, list[int]]:
    """Each cached list with the batch's writer's chunks (``own``) dropped: a ``(len, k)``
    score matrix (NaN where a list holds fewer), and the rows left with fewer than ``k`` whose
    list is not exhausted (they must be searched). One membership test over all lists, not
    one per list (2,000 of them cost a tenth of a second)."""
    scores = np.full((len(entries), k), np.nan, dtype=np.float32)
    if not entries:
        return scores, []
    lengths = np.array([len(entry.ids) for entry in entries], dtype=np.int64)
    ids = np.concatenate([entry.ids for entry in entries])
    found = np.concatenate([entry.scores for entry in entries])
    keep = ~np.isin(ids, own) if len(own) else np.ones(len(ids), dtype=bool)
    rows = np.repeat(np.arange(len(entries)), lengths)[keep]
    counts = np.bincount(rows, minlength=len(entries))
    rank = np.arange(len(rows)) - (np.cumsum(counts) - counts)[rows]
    take = rank < k
    scores[rows[take], rank[take]] = found[keep][take]
    # CachedNeighbours.exhausted, without a property call per list
    exhausted = lengths < np.array([entry.depth for entry in entries], dtype=np.int64)
    return scores, np.flatnonzero((counts < k) & ~exhausted).tolist()


class StoredNeighbourhood:
    """:class:`~trishield.kb.screening.Neighbourhood` over a KB's committed documents.

    Built for one ingest, under the write lock, from the dense index of the current
    generation; it reads the store lazily and caches what it read. ``cache`` is the KB
    handle's, kept between writes: its reference draws and its neighbour lists (on a trained
    IVF-PQ index, scored through the index's codes: :class:`NeighbourCache`).
    """

    def __init__(self, store: Store, dense: DenseIndex, dimension: int, writer: str, *,
                 cache: NeighbourCache | None = None):
        self._store = store
        self._dense = dense
        self._dimension = dimension
        self._writer = writer
        self._draws = cache.draws if cache is not None else ReferenceDraws()
        self._known_chunks = cache.chunks if cache is not None else WriterChunks()
        self._versions: dict[str, tuple[int, int]] | None = None
        self._cache = cache
        self._reference_pks: list[int] = []
        self._counts: dict[str, int] | None = None
        self._total: int | None = None
        self._chunks: dict[str, np.ndarray] = {}
        self._reference: ReferenceSample | None = None
        self._reference_members: dict[str, np.ndarray] = {}
        self._reference_scores: dict[int, np.ndarray] = {}
        self._batch_search: tuple[np.ndarray, int, np.ndarray, np.ndarray] | None = None
        self._batch_position = -1

    @property
    def writer(self) -> str:
        return self._writer

    def _documents_per_writer(self) -> dict[str, int]:
        if self._counts is None:
            self._counts = {name: count for name, (count, _) in self._writer_versions().items()
                            if name != self._writer}
        return self._counts

    def document_count(self, *, also_excluding: str | None = None) -> int:
        counts = self._documents_per_writer()
        if self._total is None:
            self._total = sum(counts.values())
        return self._total - counts.get(also_excluding, 0) if also_excluding else self._total

    def nearest(self, vectors: np.ndarray, k: int, *,
                also_excluding: str | None = None) -> np.ndarray:
        if also_excluding is not None:
            found = self._reference_rows(vectors, k, also_excluding)
            if found is not None:
                return found
            return self._dense.search_many(vectors, k,
                                           excluding=self._excluding(also_excluding))[0]
        return self._batch_nearest(vectors, k)[0]

    def _batch_nearest(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, ids)`` of the ``k`` nearest stored chunks of the batch's ``vectors`` by
        other writers. Ring 1 asks this twice of the same documents (``S_out``'s neighbours,
        then the tampered-copy search); at 100,000 chunks each flat search is most of a
        screen, so both read one search at depth :data:`BATCH_SEARCH_DEPTH` or more (the
        same rows as a shallower search of an exact index, ties aside)."""
        queries = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self._dimension)
        kept = self._batch_search
        if kept is None or kept[1] < k or not np.array_equal(kept[0], queries):
            depth = max(k, BATCH_SEARCH_DEPTH)
            cache = self._cache
            if cache is not None and cache.k is not None:
                depth = max(depth, cache.k + cache.spare)  # deep enough to hand over
            self._batch_position = self._store.index_position().current
            scores, ids = self._dense.search_many(queries, depth,
                                                  excluding=self._excluding(None))
            kept = self._batch_search = (queries.copy(), depth, scores, ids)
        return kept[2][:, :k], kept[3][:, :k]

    def hand_over(self, rows: list[int], chunks: list[np.ndarray]) -> int:
        """After the batch is stored: give the handle's cache the neighbour lists its own
        search found for the batch's ``rows`` (the documents stored; ``chunks``: each one's
        chunk row ids), so that a document later drawn into the reference sample is not
        searched again (at 100,000 chunks, a flat search of 6-7 ms a document). The batch's
        search is exactly what the cache would search: the nearest chunks by writers other
        than the document's own, at the position the cache stood at; the cache declines
        otherwise (:meth:`NeighbourCache.adopt`). How many lists it took."""
        kept, cache = self._batch_search, self._cache
        if kept is None or cache is None or not rows:
            return 0
        queries, _, scores, ids = kept
        return cache.adopt(self._store, self._batch_position, self._writer, queries[rows],
                           chunks, scores[rows], ids[rows], self._dense.codes)

    def _writer_chunks(self, writer: str) -> np.ndarray:
        """Chunk row ids of ``writer``'s stored documents, read once."""
        self._read_chunks([writer])
        return self._chunks[writer]

    def _writer_versions(self) -> dict[str, tuple[int, int]]:
        """Every writer's ``(documents, version)``, read once for this screen."""
        if self._versions is None:
            self._versions = self._store.writer_versions()
        return self._versions

    def _read_chunks(self, writers: list[str]) -> None:
        """Read the chunk row ids of those of ``writers`` not read yet (the handle keeps
        those of writers whose documents did not change: :class:`WriterChunks`)."""
        missing = sorted(set(writers) - set(self._chunks))
        if missing:
            self._chunks |= self._known_chunks.of(self._store, missing,
                                                  self._writer_versions())

    def _excluding(self, also_excluding: str | None) -> np.ndarray:
        """Chunk row ids of the batch's writer (and ``also_excluding``)."""
        own = self._writer_chunks(self._writer)
        if also_excluding is None:
            return own
        return np.union1d(own, self._writer_chunks(also_excluding))

    def _reference_rows(self, vectors: np.ndarray, k: int, writer: str) -> np.ndarray | None:
        """The neighbours of ``writer``'s documents in this neighbourhood's reference sample,
        from one batched search of the whole sample (:meth:`_reference_neighbours`); None
        when ``vectors`` are not exactly those documents (then the caller searches them).

        Why: a screener measures each reference writer's documents with that writer excluded
        (``rings/outlier.stored_outlier_scores``), so a sample drawn across 1,000 writers cost
        1,000 searches per screened ingest (23 s at 5,000 chunks); read in one search, the
        same neighbours cost one (``benchmarks/ingest_writers.py``)."""
        sample = self._reference
        if sample is None:
            return None
        rows = self._reference_members.get(writer, np.zeros(0, dtype=np.int64))
        queries = np.asarray(vectors, dtype=np.float32).reshape(-1, self._dimension)
        if not len(rows) or len(rows) != len(queries) or \
                not np.array_equal(sample.vectors[rows], queries):
            return None
        return self._reference_neighbours(k)[rows]

    def _reference_neighbours(self, k: int) -> np.ndarray:
        """Scores of the ``k`` nearest stored chunks of every reference document, by writers
        other than the batch's and the document's own: exactly what one search per reference
        writer with both excluded finds (an exact index; ties aside), read from the handle's
        cache when it has one, else by :meth:`_nearest_by_others` with the batch's writer
        excluded."""
        if k in self._reference_scores:
            return self._reference_scores[k]
        if self._cache is not None:
            self._reference_scores[k] = self._cached_neighbours(k)
            return self._reference_scores[k]
        sample = self._reference
        assert sample is not None
        scores = np.full((len(sample), k), np.nan, dtype=np.float32)
        lists = self._nearest_by_others(list(range(len(sample))), k,
                                        self._writer_chunks(self._writer))
        for row, (_, found) in lists.items():
            scores[row, :len(found)] = found
        self._reference_scores[k] = scores
        return scores

    def _cached_neighbours(self, k: int) -> np.ndarray:
        """:meth:`_reference_neighbours` from the handle's :class:`NeighbourCache`: the lists
        of the sample's documents brought up to date (documents not cached yet are searched
        in one batch, not excluding the batch's writer), then the batch's writer's chunks
        dropped from each; a document left with fewer than ``k`` is searched with both
        writers excluded, as without a cache."""
        cache, sample = self._cache, self._reference
        assert cache is not None and sample is not None
        cache.catch_up(self._store, self._dimension, k, self._dense.codes)
        missing = [row for row, pk in enumerate(self._reference_pks) if pk not in cache.entries]
        if missing:
            self._cache_documents(cache, missing, k + cache.spare)
        cache.trim(set(self._reference_pks))
        scores, again = _first_kept(
            [cache.entries[doc_pk] for doc_pk in self._reference_pks],
            self._writer_chunks(self._writer), k)
        for name, rows in _by_writer(again, sample.writers).items():
            scores[rows], _ = self._dense.search_many(sample.vectors[rows], k,
                                                      excluding=self._excluding(name))
        return scores

    def _cache_documents(self, cache: NeighbourCache, rows: list[int], depth: int) -> None:
        """Cache the sample's ``rows``: each one's ``depth`` nearest chunks by other writers
        (no batch's writer excluded, so that every writer's screen can use them)."""
        sample = self._reference
        assert sample is not None
        doc_pks = [self._reference_pks[row] for row in rows]
        own_chunks = self._store.chunk_pks_of_documents(doc_pks)
        lists = self._nearest_by_others(rows, depth, None)
        probes = cache.lists_for(self._dense.codes, sample.vectors[rows])
        for row, doc_pk, reached in zip(rows, doc_pks, probes, strict=True):
            row_ids, row_scores = lists[row]
            cache.put(doc_pk, CachedNeighbours(
                sample.writers[row], sample.vectors[row].copy(), own_chunks[doc_pk],
                row_ids.copy(), row_scores.astype(np.float32), depth, reached))

    def _nearest_by_others(self, rows: list[int], depth: int, excluding: np.ndarray | None
                           ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``row -> (ids, scores)``: the ``depth`` nearest stored chunks of each of the
        sample's ``rows`` by writers other than the document's own, never one of
        ``excluding``, best first (fewer only when the KB has no more).

        One search of all the rows reads (on an exact index) as many rows more as the largest
        of their writers holds chunks (at most :data:`BATCHED_WRITER_CHUNKS`), and each
        document's own writer's chunks are dropped after it; a document whose own writer's
        chunks filled the extra rows is searched again with its writer excluded, one search
        per writer.
        The same neighbours as one search per writer with both excluded (an exact index;
        ties aside)."""
        sample = self._reference
        assert sample is not None
        writers = [sample.writers[row] for row in rows]
        self._read_chunks(writers)
        # reading rows past is cheap on an exact index only: HNSW widens its beam to as many
        # (a cold screen at 100,000 chunks took 7.5 s), so there the rows a document's own
        # writer filled are searched again with the writer excluded by a selector, as below
        extra = min(max(len(self._chunks[name]) for name in writers),
                    BATCHED_WRITER_CHUNKS) if self._dense.exact else 0
        found, ids = self._dense.search_many(sample.vectors[rows], depth + extra,
                                             excluding=excluding)
        lists: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        again: list[int] = []
        # one membership test per writer (per row, 2,000 of them cost a tenth of a second)
        for name, at in _by_writer(list(range(len(rows))), tuple(writers)).items():
            kept = (ids[at] >= 0) & ~np.isin(ids[at], self._chunks[name])
            for position, keep in zip(at, kept, strict=True):
                columns = np.flatnonzero(keep)
                if len(columns) < depth and (ids[position] >= 0).all():
                    again.append(rows[position])  # its own writer's chunks filled the extra
                else:
                    lists[rows[position]] = (ids[position, columns][:depth],
                                             found[position, columns][:depth])
        for name, members in _by_writer(again, sample.writers).items():
            own = self._chunks[name]
            found_again, ids_again = self._dense.search_many(
                sample.vectors[members], depth,
                excluding=own if excluding is None else np.union1d(excluding, own))
            for row, row_ids, row_scores in zip(members, ids_again, found_again, strict=True):
                live = row_ids >= 0
                lists[row] = row_ids[live], row_scores[live]
        return lists

    def reference(self) -> ReferenceSample:
        self._reference = self._sample()
        self._reference_scores = {}
        writers = self._reference.writers
        self._reference_members = {
            name: np.asarray(rows, dtype=np.int64)
            for name, rows in _by_writer(list(range(len(writers))), writers).items()}
        return self._reference

    def _sample(self) -> ReferenceSample:
        """Up to :data:`~trishield.kb.screening.reference_draw.REFERENCE_PER_WRITER` documents of
        every other writer (:class:`~trishield.kb.screening.reference_draw.ReferenceDraws`: redrawn
        only for writers whose documents changed since the handle's last screen)."""
        drawn = self._draws.draw(self._store, self._dimension, excluding=self._writer,
                                 versions=self._writer_versions())
        self._reference_pks = drawn.pks
        return ReferenceSample(drawn.vectors, drawn.writers)

    def nearest_documents(self, vectors: np.ndarray, k: int) -> list[list[StoredNeighbour]]:
        scores, ids = self._batch_nearest(vectors, k)
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
