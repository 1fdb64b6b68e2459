"""The dense index of a knowledge base (FAISS), updated in place one write at a time.

Dense indexes are *derived* data: SQLite holds every chunk's embedding, and an index can always
be rebuilt from it. A KB keeps one in memory, follows the database through the chunk change
log (:mod:`trishield.kb.store.change_log`) and now and then saves a snapshot file named after the
log position it reflects, written under a temporary name then renamed, so a reader never sees
a half-written file.

Over 500 lines on purpose: one class, :class:`DenseIndex`, whose three kinds share one search
path (the exclusion of rows, the half-precision scan, the IVF-PQ re-scoring with exact
vectors); split across modules, a reader would follow one search through three files.

Three kinds, chosen per KB (``KBSettings.dense_index``):

``flat``
    exact inner product; rows are added and removed in place. The reference for recall.
``hnsw``
    a graph (fast at a million rows). A graph node cannot be removed, so a removed row is
    *tombstoned*: its label becomes -1 and searches skip it (a FAISS selector applied during
    the search, so no over-fetching); the KB rebuilds the graph when tombstones pass
    :data:`TOMBSTONE_SHARE` of it, and on ``trishield compact``.
``ivfpq``
    inverted lists of product-quantised codes: about :data:`IVF_PQ_BYTES` bytes a row instead
    of 4 x dimension, so a million rows fit in tens of megabytes. It needs training, so it is
    exact (flat) until the KB holds :data:`IVF_MIN_TRAIN` rows and is rebuilt (on
    ``trishield compact``, or a snapshot when the KB has grown past it); with the KB's stored
    embeddings at hand the candidates are re-scored exactly (:meth:`DenseIndex.search`'s
    ``exact``), which is what brings its recall near flat's.

The lexical index is SQLite's FTS5 (:mod:`trishield.kb.store.fts`), re-exported here.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from trishield.errors import KnowledgeBaseError
from trishield.kb.indexes.half_scan import HalfScan, reading
from trishield.kb.indexes.lazy_faiss import faiss

DENSE_KINDS = ("flat", "hnsw", "ivfpq")
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 128
TOMBSTONE_SHARE = 0.2
"""An HNSW graph whose removed (tombstoned) nodes pass this share of it is rebuilt."""
IVF_MIN_TRAIN = 20_000
"""Below this many rows an ``ivfpq`` index is exact (flat): too few rows to train on."""
IVF_PQ_BYTES = 48
"""Bytes of product-quantised code per row (8 bits per sub-quantiser)."""
IVF_NPROBE = 32
"""Inverted lists searched per query."""
IVF_RERANK = 24
"""An ``ivfpq`` search with exact vectors at hand reads this many times the asked depth (at
least :data:`IVF_RERANK_MIN`) and re-scores them exactly: the codes' own ranking is what
limits recall (1M synthetic rows, k 20: recall@20 0.84 reading 8 x k, 0.956 at 16 x k, 0.989
at 24 x k, 0.998 at 32 x k; nprobe 32 or 64 made no difference; docs/scale.md)."""
IVF_RERANK_MIN = 200
IVF_SEED = 1234
OVERFETCH_MAX = 1024
"""The most ids an exclusion drops after the search (:meth:`DenseIndex.search_many`) rather
than as a FAISS selector during it: reading this many rows more costs less than a flat
index's scalar selector path at any size measured (a writer with more chunks than this is
excluded by selector)."""
SINGLE_QUERY_THREADS = 1
"""OpenMP threads for one query (:meth:`DenseIndex.search`) and for a small add (one write's
rows, up to :data:`SMALL_ADD_ROWS`): they gain nothing from more, and on a busy machine the
spin-waits of more cost tens of milliseconds (an IVF-PQ add of three rows: 42 ms on two
threads, 0.07 ms on one; docs/scale.md). OpenMP keeps the setting per calling thread, so a
search in one service worker does not change another's; batches keep the default."""
SMALL_ADD_ROWS = 1000
HALF_SCAN_MIN_ROWS = 10_000
"""An exact index of at least this many rows is scanned through a half-precision copy
(:mod:`trishield.kb.indexes.half_scan`). Smaller, its rows sit in the processor's caches and the
copy's re-scoring costs what it saves: at 10,000 rows a search of k=20 took 0.70 ms through
the copy and 0.89 ms flat, a screen's search (k=42, 399 ids excluded) 0.96 / 1.36 ms, three
of them at once 1.77 / 1.85 ms; at 100,000 rows 4.6 / 7.6, 4.4 / 8.1 and 10.6 / 19.3 ms
(``benchmarks/studies/half_scan.py``, p50; docs/scale.md)."""
HALF_SCAN_AFTER = 10
"""Exact scans an index serves before it builds its half-precision copy: building it costs
about ten scans (79 ms at 100,000 rows), so by then the scans have cost what the copy does
and a process that searches once or twice (a one-off command) never pays for it."""
_LIVE = (0, 2 ** 62)
"""Labels of live rows (chunk pks are positive; a tombstone is -1)."""

ExactVectors = Callable[[np.ndarray], np.ndarray]
"""``ids -> their exact embeddings`` (rows in the order given), to re-score candidates."""


def ivf_lists(rows: int) -> int:
    """Inverted lists for ``rows`` rows: about 4 sqrt(rows), a power of two."""
    return int(2 ** round(math.log2(max(16.0, 4 * math.sqrt(max(rows, 1))))))


class DenseIndex:
    """Inner-product search over L2-normalised embeddings (cosine), keyed by chunk row id."""

    def __init__(self, kind: str, dimension: int, index: faiss.Index | None = None):
        if kind not in DENSE_KINDS:
            raise KnowledgeBaseError(f"unknown dense index kind {kind!r}; known: "
                                     f"{', '.join(DENSE_KINDS)}")
        self.kind = kind
        self.dimension = dimension
        self.index = index if index is not None else self._empty()
        self.tombstones = self._count_tombstones()
        self._codes: IVFCodes | None = None
        self.use_half_scan = True
        """Whether this index may build and scan a half-precision copy of its rows (exact
        kinds; see :meth:`_half_for`). Off before the copy is built, the index scans its flat
        rows only and saves the copy's memory; off after, the copy is kept in step unread
        (how ``benchmarks/studies/half_scan.py`` compares the two on one KB)."""
        self._half: HalfScan | None = None
        self._half_refused = False
        self._full_scans = 0

    def _empty(self) -> faiss.Index:
        if self.kind == "hnsw":
            base = faiss.IndexHNSWFlat(self.dimension, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            base.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            return faiss.IndexIDMap(base)
        return faiss.IndexIDMap(faiss.IndexFlatIP(self.dimension))

    @classmethod
    def build(cls, kind: str, dimension: int, ids: np.ndarray,
              vectors: np.ndarray) -> DenseIndex:
        """A new index of ``kind`` holding ``vectors`` under ``ids``; an ``ivfpq`` index with
        enough rows is trained on them (a seeded sample)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dimension)
        if kind == "ivfpq" and len(vectors) >= IVF_MIN_TRAIN:
            index = cls(kind, dimension, _trained_ivfpq(vectors, dimension))
        else:
            index = cls(kind, dimension)
        index.add(ids, vectors)
        return index

    @property
    def trained(self) -> bool:
        """Whether this is a real IVF-PQ index (an untrained ``ivfpq`` is exact)."""
        return isinstance(self.index, faiss.IndexIVFPQ)

    @property
    def codes(self) -> IVFCodes | None:
        """How a trained IVF-PQ index scores (None for an exact or HNSW index), read once
        per index object: its codebooks do not change until it is trained anew, which builds
        a new one."""
        if not self.trained:
            return None
        if self._codes is None:
            self._codes = IVFCodes(self.index)
        return self._codes

    def _labels(self) -> np.ndarray | None:
        """A writable view of the id map (row -> chunk pk), for HNSW's tombstones."""
        if not isinstance(self.index, faiss.IndexIDMap) or self.index.ntotal == 0:
            return None
        return faiss.rev_swig_ptr(self.index.id_map.data(), self.index.ntotal)

    def _count_tombstones(self) -> int:
        if self.kind != "hnsw":
            return 0
        labels = self._labels()
        return 0 if labels is None else int(np.count_nonzero(labels < 0))

    def __len__(self) -> int:
        return int(self.index.ntotal) - self.tombstones

    @property
    def tombstone_share(self) -> float:
        total = int(self.index.ntotal)
        return self.tombstones / total if total else 0.0

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add rows (their ids must not be in the index: remove a reused id first)."""
        if not len(ids):
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dimension)
        with _threads(_threads_for(len(ids))):
            self.index.add_with_ids(vectors, np.ascontiguousarray(ids, dtype=np.int64))
            if self._half is not None:
                self._half.add(vectors)
                self._keep_half_in_step()

    def remove(self, ids: np.ndarray) -> int:
        """Remove rows by id (ids not in the index are ignored); returns how many went.
        HNSW tombstones them instead (see the module docstring)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if not len(ids) or self.index.ntotal == 0:
            return 0
        if self.kind == "hnsw":
            labels = self._labels()
            hit = np.isin(labels, ids)
            labels[hit] = -1
            removed = int(np.count_nonzero(hit))
            self.tombstones += removed
            return removed
        positions = None if self._half is None else np.flatnonzero(np.isin(self._labels(), ids))
        removed = int(self.index.remove_ids(faiss.IDSelectorBatch(ids)))
        if self._half is not None and positions is not None:
            self._half.remove(positions)
            self._keep_half_in_step()
        return removed

    def _keep_half_in_step(self) -> None:
        """Drop the half-precision copy unless it still holds the flat rows one for one (a
        row too large for a half float refuses it for good)."""
        half = self._half
        if half is not None and not half.usable:
            self._half, self._half_refused = None, True
        elif half is not None and len(half) != self.index.ntotal:
            self._half = None

    def _flat_rows(self) -> np.ndarray:
        """The exact index's rows in storage order (a view: valid until the next write)."""
        storage = faiss.downcast_index(self.index.index)
        flat = faiss.rev_swig_ptr(storage.get_xb(), self.index.ntotal * self.dimension)
        return flat.reshape(-1, self.dimension)

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, vectors)`` of the live rows (exact kinds only: HNSW and flat keep them)."""
        if self.trained:
            raise KnowledgeBaseError("an IVF-PQ index keeps codes, not vectors")
        labels = faiss.vector_to_array(self.index.id_map) if self.index.ntotal else \
            np.zeros(0, dtype=np.int64)
        storage = faiss.downcast_index(self.index.index)
        if self.kind == "hnsw":
            storage = faiss.downcast_index(storage.storage)
        flat = faiss.rev_swig_ptr(storage.get_xb(), self.index.ntotal * self.dimension)
        vectors = np.array(flat, dtype=np.float32).reshape(-1, self.dimension)
        live = labels >= 0
        return labels[live], vectors[live]

    def search(self, vector: np.ndarray, depth: int, *,
               exact: ExactVectors | None = None) -> list[tuple[int, float]]:
        """The ``depth`` nearest rows, best first; an IVF-PQ index given ``exact`` reads more
        candidates and re-scores them with their exact vectors."""
        if len(self) == 0 or depth < 1:
            return []
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, self.dimension)
        read = depth
        if self.trained and exact is not None:
            read = max(depth * IVF_RERANK, IVF_RERANK_MIN)
        with _threads(SINGLE_QUERY_THREADS):
            scores, ids = self.search_many(query, min(read, len(self)))
        found = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        if self.trained and exact is not None and found:
            candidates = np.array([i for i, _ in found], dtype=np.int64)
            rescored = exact(candidates) @ query[0]
            order = np.lexsort((candidates, -rescored))[:depth]
            return [(int(candidates[i]), float(rescored[i])) for i in order]
        return found[:depth]

    def search_many(self, vectors: np.ndarray, depth: int, *,
                    excluding: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``depth`` best ``(scores, ids)`` of each row of ``vectors``, best first, never
        one of the ids in ``excluding`` nor a tombstone; a row that finds fewer is padded with
        id -1 and a NaN score.

        On an exact index (no tombstones) an exclusion is applied by reading ``depth +
        len(excluding)`` rows (at most :data:`OVERFETCH_MAX` more) and dropping the excluded
        ones: the same rows, at BLAS speed, where a FAISS selector is served one scalar
        comparison at a time (about 25 ms for 20 rows over 5,000 chunks; a hundred writers'
        worth made one screened ingest take 2.5 s, ``benchmarks/ingest_writers.py``). A row
        the exclusion left short (a writer of more than ``OVERFETCH_MAX`` chunks) is searched
        again with the selector. An HNSW or trained IVF-PQ index applies the selector during
        the search: reading ``len(excluding)`` rows past would widen HNSW's beam to as many
        (30,000 rows, 1,000 excluded: 4.5 ms against 0.7 with the selector, the same recall;
        equal at 40 excluded); a very large exclusion can cost HNSW recall either way."""
        queries = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dimension)
        if len(self) == 0 or depth < 1 or len(queries) == 0:
            return (np.full((len(queries), max(depth, 0)), np.nan, dtype=np.float32),
                    np.full((len(queries), max(depth, 0)), -1, dtype=np.int64))
        # FAISS parallelises over the queries: for one, a second thread only spin-waits
        # (a screened ingest's search at 100,000 chunks: 15 ms on two threads, 7 on one)
        with _threads(SINGLE_QUERY_THREADS if len(queries) == 1 else None):
            if excluding is not None and len(excluding) and not self.tombstones and \
                    self.exact:
                return self._search_dropping(queries, depth,
                                             np.asarray(excluding, dtype=np.int64))
            return self._search_selected(queries, depth, excluding)

    @property
    def exact(self) -> bool:
        """Whether searches rank every row by its exact score (flat, or IVF-PQ untrained)."""
        return self.kind != "hnsw" and not self.trained

    def _search_selected(self, queries: np.ndarray, depth: int, excluding: np.ndarray | None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search_many` with the exclusion (and tombstones) as a FAISS selector."""
        selector, keep = None, []  # every selector must outlive the search
        if excluding is not None and len(excluding):
            keep.append(faiss.IDSelectorBatch(np.ascontiguousarray(excluding, dtype=np.int64)))
            selector = faiss.IDSelectorNot(keep[-1])
        if self.tombstones:
            keep += [selector, faiss.IDSelectorRange(*_LIVE)]
            selector = keep[-1] if selector is None else faiss.IDSelectorAnd(keep[-1], selector)
        if self.kind == "hnsw":
            params = faiss.SearchParametersHNSW(efSearch=max(HNSW_EF_SEARCH, depth))
        elif self.trained:
            params = faiss.SearchParametersIVF(nprobe=IVF_NPROBE)
        elif selector is None:
            return self._exact_scan(queries, depth)
        else:
            params = faiss.SearchParameters()
        if selector is not None:
            params.sel = selector
        scores, ids = self.index.search(queries, depth, params=params)
        scores = scores.astype(np.float32)
        scores[ids < 0] = np.nan
        return scores, ids.astype(np.int64)

    def _exact_scan(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """An exact index's search with no selector: through the half-precision copy when
        there is one (or it is due), the same rows and scores as scanning the flat rows."""
        half = self._half_for(len(queries), depth)
        if half is None:
            return self._scan(queries, depth)
        return self._through_half(half, queries, depth, self._scan)

    def _through_half(self, half: HalfScan, queries: np.ndarray, depth: int,
                      flat: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]], *,
                      past: int = 0, dropped: Callable[[np.ndarray], np.ndarray] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """``half``'s answer as ``(scores, ids)``; the queries it could not answer exactly
        are answered by ``flat`` (the same search on the flat rows)."""
        labels = self._labels()
        scores, positions, unanswered = half.search(queries, depth, self._flat_rows(),
                                                    past=past, dropped=dropped)
        ids = np.where(positions >= 0, labels[np.maximum(positions, 0)], -1)
        if unanswered:
            scores[unanswered], ids[unanswered] = flat(queries[unanswered], depth)
        return scores, ids

    def _scan(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        scores, ids = self.index.search(queries, depth)
        scores = scores.astype(np.float32)
        scores[ids < 0] = np.nan
        return scores, ids.astype(np.int64)

    def _half_for(self, queries: int, depth: int, past: int = 0) -> HalfScan | None:
        """The half-precision copy for a scan of ``queries`` rows to ``depth``, built once
        :data:`HALF_SCAN_AFTER` scans of a large enough index have run without it (a batch of
        queries counts as so many scans); None when the flat rows serve better: a small
        index, a depth near its size, or a batch FAISS scores by matrix product.

        FAISS scans a batch row by row while queries x dimension stays under its
        ``distance_compute_blas_threshold`` (128,000: 333 queries of 384 dimensions), each
        query reading every row, so the copy halves the reads (100,000 rows: 3.1-5.0 against
        6.0-8.1 ms a query for 2 to 333 queries). From there on FAISS multiplies matrices,
        reading each row once for many queries, and the copy would be twice as slow (1.5-2.2
        against 3.1-3.4 ms a query). A batch through the copy is answered query by query, each
        as it would be alone (FAISS's row-by-row scan of a batch may round a score's last bit
        differently from a lone query's)."""
        rows = int(self.index.ntotal)
        if not self.use_half_scan or self._half_refused or rows < HALF_SCAN_MIN_ROWS or \
                reading(depth, past) > rows or \
                queries * self.dimension >= faiss.cvar.distance_compute_blas_threshold or \
                not isinstance(self.index, faiss.IndexIDMap):
            return None
        if self._half is not None and len(self._half) != rows:
            self._half = None  # out of step (never, through add and remove): built anew
        if self._half is None:
            self._full_scans += queries
            if self._full_scans < HALF_SCAN_AFTER:
                return None
            half = HalfScan(self.dimension)
            half.add(self._flat_rows())
            self._half = half
            self._keep_half_in_step()
        return self._half

    def _search_dropping(self, queries: np.ndarray, depth: int,
                         excluding: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search_many` dropping the exclusion after the search: ``depth`` rows more
        than the exclusion holds (at most :data:`OVERFETCH_MAX` more) read without a
        selector, the excluded ones dropped, the first ``depth`` kept in order; a row left
        with fewer although the index held more is searched again with the selector.
        Through the half-precision copy the exclusion is dropped from its approximate
        ranking, so only the rows kept are re-scored (42 of about 1,100 for a screen's search
        that excludes a writer's 1,000 chunks)."""
        extra = min(len(excluding), OVERFETCH_MAX)
        half = self._half_for(len(queries), depth, extra)
        if half is None:
            return self._scan_dropping(queries, depth, excluding)
        labels, excluded = self._labels(), np.sort(excluding)

        def dropped(found: np.ndarray) -> np.ndarray:
            """Whether each row found is excluded (a sorted lookup: the exclusion can hold a
            writer's 10,000 chunks, to be looked up for each query's rows)."""
            found_ids = labels[found]
            at = np.minimum(np.searchsorted(excluded, found_ids), len(excluded) - 1)
            return excluded[at] == found_ids

        return self._through_half(
            half, queries, depth, lambda rest, _: self._scan_dropping(rest, depth, excluding),
            past=extra, dropped=dropped)

    def _scan_dropping(self, queries: np.ndarray, depth: int,
                       excluding: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_search_dropping` on the flat rows themselves."""
        extra = min(len(excluding), OVERFETCH_MAX)
        scores, ids = self._scan(queries, depth + extra)
        kept_scores = np.full((len(queries), depth), np.nan, dtype=np.float32)
        kept_ids = np.full((len(queries), depth), -1, dtype=np.int64)
        wanted = (ids >= 0) & ~np.isin(ids, excluding)
        short: list[int] = []
        for row in range(len(queries)):
            columns = np.flatnonzero(wanted[row])[:depth]
            if len(columns) < depth and extra < len(excluding) and (ids[row] >= 0).all():
                short.append(row)  # the exclusion filled the rows read: more may follow
                continue
            kept_scores[row, :len(columns)] = scores[row, columns]
            kept_ids[row, :len(columns)] = ids[row, columns]
        if short:
            kept_scores[short], kept_ids[short] = self._search_selected(
                queries[short], depth, excluding)
        return kept_scores, kept_ids

    def memory_bytes(self) -> int:
        """Size of the serialised index, plus its half-precision copy when it has built one:
        about what it holds in memory."""
        extra = 0 if self._half is None else self._half.memory_bytes()
        return int(faiss.serialize_index(self.index).nbytes) + extra

    def save(self, path: Path) -> None:
        # serialised in memory and written by Python, so that a failed write (a full disk) is
        # an OSError with its errno, not FAISS's generic RuntimeError
        data = faiss.serialize_index(self.index)
        _atomic_write(path, lambda temporary: temporary.write_bytes(data.tobytes()))

    @classmethod
    def load(cls, path: Path, kind: str, dimension: int) -> DenseIndex:
        index = faiss.read_index(str(path))
        if index.d != dimension:
            raise KnowledgeBaseError(f"{path}: index dimension {index.d} != model's {dimension}")
        inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap) \
            else index
        expected = {"flat": (faiss.IndexFlatIP,), "hnsw": (faiss.IndexHNSWFlat,),
                    "ivfpq": (faiss.IndexFlatIP, faiss.IndexIVFPQ)}[kind]
        if not isinstance(inner, expected):
            raise KnowledgeBaseError(f"{path} holds a {type(inner).__name__}, not a {kind} "
                                     "index")
        return cls(kind, dimension, index)


class IVFCodes:
    """What a trained IVF-PQ index's searches score, computed outside a search: the inverted
    lists a query probes, and the vector a row's code decodes to (its list's centroid plus the
    quantised residual). A search ranks the rows of the probed lists by the query's inner
    product with their decoded vectors, so a list of neighbours kept between writes
    (:mod:`trishield.kb.screening.neighbour_cache`) can take in an added row exactly as a fresh
    search would rank it, or leave it out when the search would never reach it.

    ``fingerprint`` names the codebooks (coarse centroids and product quantiser): a list
    found under other codebooks ranks by other scores and must not be merged into."""

    def __init__(self, index: faiss.IndexIVFPQ):
        self.index = index
        quantiser = faiss.downcast_index(index.quantizer)
        digest = hashlib.sha256(f"ivfpq:{index.d}:{index.nlist}:{IVF_NPROBE}:"
                                f"{index.pq.M}:{index.pq.nbits}:{index.by_residual}"
                                .encode())
        digest.update(faiss.rev_swig_ptr(quantiser.get_xb(),
                                         quantiser.ntotal * index.d).tobytes())
        digest.update(faiss.vector_to_array(index.pq.centroids).tobytes())
        self.fingerprint = digest.hexdigest()

    def probes(self, queries: np.ndarray) -> np.ndarray:
        """``(n, IVF_NPROBE)`` ids of the lists a search of each query reads, sorted (-1
        pads when the index has fewer lists)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.index.d)
        with _threads(_threads_for(len(queries))):
            _, lists = self.index.quantizer.search(queries, IVF_NPROBE)
        return np.sort(lists.astype(np.int64), axis=1)

    def decoded(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lists, decoded)``: the list each row of ``vectors`` is stored in, and the
        vector its code decodes to (the index's own encoding: the same as ``add``)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.index.d)
        if not len(vectors):
            return np.zeros(0, np.int64), vectors
        with _threads(_threads_for(len(vectors))):
            lists = self.index.quantizer.assign(vectors, 1).reshape(-1).astype(np.int64)
            return lists, self.index.sa_decode(self.index.sa_encode(vectors))


def _threads_for(rows: int) -> int | None:
    """OpenMP threads for work on ``rows`` rows: one for a write's worth (see
    :data:`SINGLE_QUERY_THREADS`: decoding one row's code took 12 ms on two threads of a busy
    machine), the default for more."""
    return SINGLE_QUERY_THREADS if rows <= SMALL_ADD_ROWS else None


@contextmanager
def _threads(count: int | None) -> Iterator[None]:
    """FAISS's OpenMP threads for this calling thread set to ``count`` meanwhile (``None``:
    unchanged)."""
    if count is None:
        yield
        return
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(count)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def _trained_ivfpq(vectors: np.ndarray, dimension: int) -> faiss.IndexIVFPQ:
    """An empty IVF-PQ index trained on a seeded sample of ``vectors``."""
    lists = ivf_lists(len(vectors))
    sample_size = min(len(vectors), 64 * lists)
    rng = np.random.default_rng(IVF_SEED)
    sample = vectors[np.sort(rng.choice(len(vectors), sample_size, replace=False))]
    subquantisers = IVF_PQ_BYTES if dimension % IVF_PQ_BYTES == 0 else math.gcd(dimension, 64)
    quantiser = faiss.IndexFlatIP(dimension)
    index = faiss.IndexIVFPQ(quantiser, dimension, lists, subquantisers, 8,
                             faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = IVF_SEED
    index.pq.cp.seed = IVF_SEED
    index.train(sample)
    index.own_fields = True
    quantiser.this.disown()
    return index


def _atomic_write(path: Path, write) -> None:
    """Write ``path`` (file or folder) via a temporary sibling and an atomic rename.

    Index paths are named by KB generation, so one that already exists was completely written
    for the same database content and is kept as it is.
    """
    if path.exists():
        return
    temporary = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.")) / "payload"
    try:
        write(temporary)
        if temporary.is_file():
            with temporary.open("rb") as handle:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        shutil.rmtree(temporary.parent, ignore_errors=True)


def file_digests(paths: Sequence[Path], root: Path) -> dict[str, str]:
    """sha256 of every file in ``paths`` (files, or folders walked in sorted order), keyed by
    the path relative to ``root``: what a saved index is checked against before it is loaded,
    so that a truncated or emptied file is rebuilt instead of crashing the library reading it.
    A path that does not exist is simply absent from the result."""
    digests: dict[str, str] = {}
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if not file.is_file():
                continue
            digest = hashlib.sha256()
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            digests[file.relative_to(root).as_posix()] = digest.hexdigest()
    return digests
