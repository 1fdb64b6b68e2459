"""The nearest stored chunks of Ring 1's reference documents, kept between screened writes.

Ring 1's ``S_out`` at ingest calibrates a new document on a reference sample of up to 2,000
stored documents, each measured against its nearest stored chunks by other writers
(:mod:`trishield.kb.screening.neighbourhood`). Searched afresh on every write that is about 2,000 x
n dot products with a flat index (0.35-0.5 s at 50,000 chunks on two idle cores), though between
two writes the sample and its neighbours barely change. This cache keeps, per reference document,
its ``k + spare`` nearest chunks by writers other than its own (not excluding any batch's
writer, so every writer's ingest can use it) and brings them up to date from the chunk change
log, exactly:

- a list is the exact best-first prefix of the document's ranking (or all of it, when the KB
  held fewer eligible chunks: *exhausted*);
- an added chunk of another writer enters a list when it beats the list's last score (any
  added chunk enters an exhausted list), and the list is cut back to its depth;
- a removed chunk invalidates the lists that hold it and the entry of the document it belonged
  to (they are searched again when next needed): a list that lost an entry no longer knows its
  next one.

On a trained IVF-PQ index a search ranks only the chunks of the inverted lists it probes,
by the query's product with their *decoded* vectors (:class:`~trishield.kb.indexes.dense.IVFCodes`).
So there an added chunk is scored through its code, as the search would score it, and enters
only the lists of documents whose search probes its inverted list: each list stays exactly
what a fresh search of the index finds. Its scores belong to the index's codebooks: when the
index is trained anew (its :attr:`~trishield.kb.indexes.dense.IVFCodes.fingerprint` changes, or it
becomes or stops being trained), the cache starts over.

A handle of the KB owns one cache; it is used under the KB's write lock (screening runs
there). After more than :data:`CATCH_UP_MAX` changes (a bulk load, say) it starts over:
searching the sample again costs less than scoring every added chunk against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trishield.kb.indexes.dense import IVFCodes
from trishield.kb.screening.reference_draw import ReferenceDraws
from trishield.kb.screening.writer_chunks import WriterChunks
from trishield.kb.store import Store

CACHE_SPARE = 32
"""Rows a cached list holds beyond the ``k`` asked: a batch's writer's own chunks are dropped
from a list when it is used, and up to this many of them leave ``k``."""
CATCH_UP_MAX = 20_000
"""Most change-log entries a cache catches up on; past it, it starts over. Scoring the added
chunks against the cached documents is done in blocks of :data:`SCORE_BLOCK` chunks, so
memory stays near ``CACHE_CAPACITY x SCORE_BLOCK`` floats (32 MB)."""
SCORE_BLOCK = 1024
CACHE_CAPACITY = 8000
"""Most documents kept (four reference samples' worth); past it, documents not in the current
sample go first, oldest first."""


@dataclass
class CachedNeighbours:
    """One reference document: its writer, vector and chunks, and its nearest stored chunks by
    other writers (best first, at most ``depth``)."""

    writer: str
    vector: np.ndarray
    own: np.ndarray
    ids: np.ndarray
    scores: np.ndarray
    depth: int
    probes: np.ndarray | None = None
    """The inverted lists the document's search reads (a trained IVF-PQ index; sorted), else
    None: every stored chunk is within reach."""

    @property
    def exhausted(self) -> bool:
        """The KB held fewer eligible chunks than the depth: the list is all of them."""
        return len(self.ids) < self.depth

    @property
    def bar(self) -> float:
        """The score an added chunk must beat to enter the list (-inf: exhausted)."""
        return -np.inf if self.exhausted else float(self.scores[-1])

    def merge(self, ids: np.ndarray, scores: np.ndarray, writers: np.ndarray,
              reachable: np.ndarray | None = None) -> None:
        """Take in added chunks (``writers`` of each): those of other writers that rank, of
        those the document's search reaches (``reachable``, when not all)."""
        eligible = writers != self.writer
        if reachable is not None:
            eligible &= reachable
        if not self.exhausted:
            eligible &= scores > self.scores[-1]
        if not eligible.any():
            return
        merged_ids = np.concatenate([self.ids, ids[eligible]])
        merged_scores = np.concatenate([self.scores, scores[eligible]])
        order = np.argsort(-merged_scores, kind="stable")[:self.depth]
        self.ids, self.scores = merged_ids[order], merged_scores[order]


class _EntryRows:
    """The cached documents' vectors, writers (as codes) and bars as arrays, and their probed
    lists (a trained IVF-PQ index; stacked when asked), one row per :class:`CachedNeighbours`
    object, kept between catch-ups.

    Why: a catch-up scores the added chunks against every cached document at once, and
    gathering those arrays from about 2,000 entries each time (a stack of their vectors, a
    list of their bars) cost about 3-4 ms of a 30 ms screened write at 100,000 chunks. Rows
    are matched to entries by object identity, so an entry replaced under its document
    (``put``, ``adopt``, a loaded file) gets a new row, and rows no entry holds any more are
    dropped when they outnumber the live ones.

    A row's bar is set from its entry when the row is made and raised after each merge
    :meth:`NeighbourCache._merge_added` makes; merging only ever raises a list's bar, so a
    bar that missed a merge elsewhere would be lower than the list's and only let more
    chunks through to :meth:`CachedNeighbours.merge`, which checks the score itself."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}  # kept when the rows are dropped: codes stay valid
        self._reset(0)

    def _reset(self, dimension: int) -> None:
        self._rows: dict[int, tuple[CachedNeighbours, int]] = {}
        self.vectors = np.zeros((0, dimension), dtype=np.float32)
        self.writers = np.zeros(0, dtype=np.int64)
        self.bars = np.zeros(0, dtype=np.float32)
        self._probes: list[np.ndarray | None] = []
        self.used = 0

    def writer_codes(self, names: list[str]) -> np.ndarray:
        """One integer per writer name, the same for a name every time."""
        codes = self._codes
        return np.array([codes.setdefault(name, len(codes)) for name in names],
                        dtype=np.int64)

    def seed(self, entries: dict[int, CachedNeighbours], vectors: np.ndarray) -> None:
        """Rows for all of ``entries`` (none made yet) taking ``vectors``, their vectors in
        their order as one array, as it is: the saved lists' file reads them that way, and
        stacking them again from the entries cost about 6 ms of a one-off screen at 100,000
        chunks. Rows appended later go to a new array, so ``vectors`` is never written."""
        if self.used or vectors.ndim != 2 or len(vectors) != len(entries):
            raise ValueError(f"{len(vectors)} vectors for {len(entries)} entries, "
                             f"{self.used} rows made already")
        listed = list(entries.items())
        self._reset(vectors.shape[1])
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.writers = self.writer_codes([entry.writer for _, entry in listed])
        self.bars = np.array([entry.bar for _, entry in listed], dtype=np.float32)
        self._probes = [entry.probes for _, entry in listed]
        self._rows = {doc_pk: (entry, row) for row, (doc_pk, entry) in enumerate(listed)}
        self.used = len(listed)

    def align(self, entries: dict[int, CachedNeighbours]) -> np.ndarray:
        """The row of each of ``entries`` (in their order), rows added for entry objects not
        seen before; first dropping every row when the stale ones outnumber the live."""
        if self.used > 2 * len(entries) + 256:
            self._reset(self.vectors.shape[1])
        rows = np.empty(len(entries), dtype=np.int64)
        fresh: list[tuple[int, int, CachedNeighbours]] = []
        for at, (doc_pk, entry) in enumerate(entries.items()):
            known = self._rows.get(doc_pk)
            if known is not None and known[0] is entry:
                rows[at] = known[1]
            else:
                fresh.append((at, doc_pk, entry))
        if fresh:
            self._append(fresh, rows)
        return rows

    def _append(self, fresh: list[tuple[int, int, CachedNeighbours]], rows: np.ndarray
                ) -> None:
        """Rows for the ``fresh`` entries (``(position, doc_pk, entry)``), their positions
        in ``rows`` set."""
        entries = [entry for _, _, entry in fresh]
        vectors = np.stack([entry.vector for entry in entries]).astype(np.float32, copy=False)
        if vectors.shape[1] != self.vectors.shape[1]:
            if self.used:
                raise ValueError(f"a cached document's vector has {vectors.shape[1]} "
                                 f"dimensions, the others {self.vectors.shape[1]}")
            self._reset(vectors.shape[1])
        first = self.used
        end = first + len(entries)
        if end > len(self.vectors):
            size = max(2 * len(self.vectors), end, 64)
            self.vectors = _grown(self.vectors, size)
            self.writers = _grown(self.writers, size)
            self.bars = _grown(self.bars, size)
        self.vectors[first:end] = vectors
        self.writers[first:end] = self.writer_codes([entry.writer for entry in entries])
        self.bars[first:end] = [entry.bar for entry in entries]
        self._probes.extend(entry.probes for entry in entries)
        for row, (at, doc_pk, entry) in enumerate(fresh, start=first):
            rows[at] = row
            self._rows[doc_pk] = (entry, row)
        self.used = end

    def probes_of(self, rows: np.ndarray) -> np.ndarray:
        """The probed lists of ``rows`` (entries cached under a trained IVF-PQ index)."""
        return np.stack([self._probes[row] for row in rows.tolist()])


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` with room for ``size`` rows (its rows kept)."""
    grown = np.zeros((size, *array.shape[1:]), dtype=array.dtype)
    grown[:len(array)] = array
    return grown


class NeighbourCache:
    """Per-document neighbour lists of one KB handle, at one change-log position and one ``k``
    (see the module docstring), the handle's reference draws (which documents the sample
    holds: :class:`~trishield.kb.screening.reference_draw.ReferenceDraws`) and its writers' chunk
    row ids (:class:`~trishield.kb.screening.writer_chunks.WriterChunks`)."""

    def __init__(self, spare: int = CACHE_SPARE, capacity: int = CACHE_CAPACITY):
        self.spare = spare
        self.capacity = capacity
        self.draws = ReferenceDraws()
        self.chunks = WriterChunks()
        self.position: int | None = None
        self.k: int | None = None
        self.entries: dict[int, CachedNeighbours] = {}
        self._rows = _EntryRows()
        self.codebook: str | None = None
        """The fingerprint of the IVF-PQ codebooks the lists were scored under (None: an
        exact or HNSW index, scored by exact vectors)."""
        self.adopted = 0
        """Lists taken from screened batches so far (:meth:`adopt`)."""
        self.revision = 0
        """Counts the changes to :attr:`entries`, so that a handle saves the cache
        (:mod:`trishield.kb.screening.neighbour_cache_file`) only when it holds something new."""

    def catch_up(self, store: Store, dimension: int, k: int,
                 codes: IVFCodes | None = None) -> None:
        """Bring every list to the store's current change-log position (or start over when
        the log no longer reaches back to the cache's, ``k`` changed, or the index's codebooks
        did: ``codes`` is how the index searched scores, None for exact vectors)."""
        where = store.index_position()
        codebook = None if codes is None else codes.fingerprint
        if self.k != k or self.position is None or where.pruned > self.position or \
                where.current < self.position or \
                where.current - self.position > CATCH_UP_MAX or self.codebook != codebook:
            if self.entries:
                self.entries.clear()
                self._rows = _EntryRows()
                self.revision += 1
            self.position, self.k, self.codebook = where.current, k, codebook
            return
        if where.current == self.position:
            return
        delta = store.index_delta(self.position, where.current, dimension)
        if len(delta.removed) and self.entries:
            self._drop_removed(delta.removed)
            self.revision += 1
        if len(delta.added_ids) and self.entries:
            self._merge_added(store, delta.added_ids, delta.vectors, codes)
            self.revision += 1
        self.position = where.current

    @staticmethod
    def lists_for(codes: IVFCodes | None, vectors: np.ndarray) -> list[np.ndarray | None]:
        """The inverted lists each of ``vectors``' searches reads (None each on an index
        scored by exact vectors): what :attr:`CachedNeighbours.probes` holds."""
        if codes is None:
            return [None] * len(vectors)
        return list(codes.probes(vectors))

    def seed_rows(self, vectors: np.ndarray) -> None:
        """Take ``vectors`` (every entry's vector, in the order of :attr:`entries`) as the
        catch-up's row arrays (:meth:`_EntryRows.seed`)."""
        self._rows.seed(self.entries, vectors)

    def put(self, doc_pk: int, entry: CachedNeighbours) -> None:
        """Keep ``entry`` as the list of document ``doc_pk`` (searched at :attr:`position`)."""
        self.entries[doc_pk] = entry
        self.revision += 1

    def _drop_removed(self, gone: np.ndarray) -> None:
        """Drop the lists that held a removed chunk and the entries of documents that lost
        one of their own (one membership test over all lists, not one per list)."""
        doc_pks = list(self.entries)
        entries = [self.entries[pk] for pk in doc_pks]
        held = [entry.ids for entry in entries] + [entry.own for entry in entries]
        owner = np.repeat(np.tile(np.arange(len(entries)), 2), [len(ids) for ids in held])
        hit = owner[np.isin(np.concatenate(held), gone)]
        for row in np.unique(hit):
            del self.entries[doc_pks[row]]

    def _merge_added(self, store: Store, added_ids: np.ndarray, added: np.ndarray,
                     codes: IVFCodes | None) -> None:
        """Offer the added chunks to every list: scored against all cached documents at once,
        and merged only into the lists where one of them is eligible (another writer's
        chunk that beats the list's last score, or any other writer's chunk for an exhausted
        list; on a trained IVF-PQ index, scored through its code and only where the
        document's search probes its inverted list), which :meth:`CachedNeighbours.merge`
        would otherwise find by itself, list by list (2,000 calls a write). The documents'
        vectors, writers, bars and probed lists come from :class:`_EntryRows`, kept between
        catch-ups, not gathered from the entries anew each time."""
        added_lists = None
        if codes is not None:
            added_lists, added = codes.decoded(added)
        writers = store.chunk_writers(added_ids.tolist())
        added_writers = np.array([writers.get(int(pk), "") for pk in added_ids], dtype=object)
        arrays = self._rows
        rows = arrays.align(self.entries)
        added_codes = arrays.writer_codes(added_writers.tolist())
        entries = list(self.entries.values())
        entry_codes = arrays.writers[rows]
        bars = arrays.bars[rows]
        probes = None if added_lists is None else arrays.probes_of(rows)
        stored = arrays.vectors[:arrays.used]
        for start in range(0, len(added_ids), SCORE_BLOCK):
            block = slice(start, start + SCORE_BLOCK)
            scores = (stored @ added[block].T)[rows].astype(np.float32)
            eligible = (entry_codes[:, None] != added_codes[None, block]) & \
                (scores > bars[:, None])
            if probes is not None and added_lists is not None:
                # only the pairs left (few): is the chunk's list one the search probes?
                hit_rows, columns = np.nonzero(eligible)
                eligible[hit_rows, columns] = \
                    (probes[hit_rows] == added_lists[block][columns][:, None]).any(axis=1)
            for row in np.flatnonzero(eligible.any(axis=1)):
                entry = entries[row]
                entry.merge(added_ids[block], scores[row], added_writers[block],
                            None if probes is None else eligible[row])
                bars[row] = arrays.bars[rows[row]] = entry.bar

    def adopt(self, store: Store, position: int, writer: str, vectors: np.ndarray,
              chunks: list[np.ndarray], scores: np.ndarray, ids: np.ndarray,
              codes: IVFCodes | None = None) -> int:
        """Take in the lists of documents just stored by ``writer`` (``chunks``: each one's
        chunk row ids, in the order of ``vectors``), found by a search of the index at change-
        log ``position`` with ``writer``'s chunks excluded: each list is then what this cache
        would search for the document, provided the cache stood at that position with this
        ``k`` (the lists must not hold chunks added after it, which a catch-up would merge
        again), the search went deep enough and scored as the cache does (``codes``: how the
        index searched scores, None for exact vectors; the cache's codebooks). Otherwise
        nothing is taken. How many were."""
        if self.k is None or self.position != position or not len(chunks) or \
                self.codebook != (None if codes is None else codes.fingerprint):
            return 0
        depth = self.k + self.spare
        if ids.shape[1] < depth:
            return 0
        doc_pks = store.documents_of_chunks([int(own[0]) for own in chunks if len(own)])
        probes = self.lists_for(codes, vectors)
        taken = 0
        for row, own in enumerate(chunks):
            if not len(own) or int(own[0]) not in doc_pks:
                continue
            live = ids[row, :depth] >= 0
            self.entries[doc_pks[int(own[0])]] = CachedNeighbours(
                writer, np.array(vectors[row], dtype=np.float32), np.asarray(own, np.int64),
                ids[row, :depth][live].copy(), scores[row, :depth][live].astype(np.float32),
                depth, probes[row])
            taken += 1
        self.adopted += taken
        self.revision += taken
        return taken

    def trim(self, keep: set[int]) -> None:
        """Evict documents outside ``keep`` (oldest first) until at most ``capacity`` remain."""
        excess = len(self.entries) - self.capacity
        for doc_pk in [pk for pk in self.entries if pk not in keep][:max(excess, 0)]:
            del self.entries[doc_pk]
            self.revision += 1
