"""An exact flat search that reads half the memory: a half-precision copy scanned first,
the few rows it cannot tell apart re-scored from the full-precision rows.

A flat index of 100,000 chunks of 384 floats is 154 MB; one query reads all of it, and on
these cores that is bound by memory bandwidth (8.3 ms on one thread), not by arithmetic. The
same rows stored as IEEE half floats are 77 MB and FAISS scans them in 4.7 ms (300,000 rows:
23.4 -> 11.0 ms; docs/scale.md). A half float keeps 11 significant bits, so each
approximate score is within a bound of the exact one that depends only on the query's and
the rows' norms (:func:`score_bound`). That makes the result *exact*, not approximate:

- the half-precision scan reads more rows than asked (:func:`spare_rows`);
- every row whose approximate score is within twice the bound of the ``depth``-th
  approximate score is a candidate; every row of the true top ``depth`` is one of them (if
  ``k`` rows score at least ``a_k`` approximately, they score at least ``a_k - bound``
  exactly, so does the true ``k``-th, and any row scoring that much exactly scores at least
  ``a_k - 2 bound`` approximately);
- the candidates are scored by FAISS's own exact inner product (bit for bit the flat search's
  score: a row's score does not depend on the rows around it) and ranked;
- when the last row read is still a candidate (more near-ties than spare rows), the answer
  could lie beyond what was read, so :meth:`HalfScan.search` says so and the caller scans the
  flat rows instead.

Equal scores (identical vectors) come latest row first: FAISS's own flat search has no fixed
order among them (mostly the same, not always), so a caller must not rely on either.

The copy costs 2 bytes a dimension more per row (half the flat index again) and one pass over
the rows to build, about ten flat scans' worth (79 ms at 100,000 rows), so
:class:`~trishield.kb.indexes.dense.DenseIndex` builds it only after an index has served
:data:`~trishield.kb.indexes.dense.HALF_SCAN_AFTER` scans of at least
:data:`~trishield.kb.indexes.dense.HALF_SCAN_MIN_ROWS` rows, by when the scans have cost as much
as the copy (so a one-off process that searches once or twice never builds it), and keeps it
in step with every add and removal from then on.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from trishield.kb.indexes.lazy_faiss import faiss

SPARE_ROWS = 64
"""Rows read past the asked depth by the half-precision scan, at least (see
:func:`spare_rows`)."""
HALF_EPSILON = 2.0 ** -11
"""Relative rounding error of a float32 stored as an IEEE half (round to nearest)."""
SINGLE_EPSILON = 2.0 ** -24
"""Unit roundoff of float32 arithmetic."""
NORM_BLOCK = 65_536
"""Rows whose norms are taken at once when rows are added (the copy is built in one add)."""
LARGEST_NORM = 1_000.0
"""Rows of a larger norm are not copied (a half float overflows at 65,504)."""


def spare_rows(depth: int) -> int:
    """Rows read past ``depth``, so that the rows within the bound of the last are all seen.
    How many there are grows with the depth, as scores crowd together further down the
    ranking: at 100,000 rows of 384 dimensions, random or clustered, at most 8 at depth 42
    and 47 at depth 441 were within twice the bound; reading 284 more costs nothing
    measurable."""
    return SPARE_ROWS + depth // 2


def reading(depth: int, past: int = 0) -> int:
    """Rows the half-precision scan reads for ``depth`` rows kept after dropping at most
    ``past`` of those read."""
    return depth + past + spare_rows(depth + past)


def score_bound(query_norm: float, largest_row_norm: float, dimension: int) -> float:
    """How far the half-precision scan's score of any row can be from the exact one.

    Storing a component as a half float moves it by at most ``HALF_EPSILON`` of itself (a
    subnormal half, by at most 2**-25), so the stored row's inner product with the query
    moves by at most ``HALF_EPSILON * |q| * |x| + 2**-25 * sqrt(d) * |q|`` (Cauchy-Schwarz).
    Both scores are then summed in float32, each sum off by at most ``d * 2**-24`` of the sum
    of the absolute products; the bound counts that twice over for each, to be safe."""
    products = query_norm * largest_row_norm
    rounding = 2 * 2 * dimension * SINGLE_EPSILON * products * (1 + HALF_EPSILON)
    subnormal = 2.0 ** -25 * math.sqrt(dimension) * query_norm
    return HALF_EPSILON * products + rounding + subnormal


class HalfScan:
    """A half-precision copy of a flat index's rows, row for row in the same order (row
    numbers are the flat storage's positions), kept in step by its owner."""

    def __init__(self, dimension: int):
        self.dimension = dimension
        self.index = faiss.IndexScalarQuantizer(dimension, faiss.ScalarQuantizer.QT_fp16,
                                                faiss.METRIC_INNER_PRODUCT)
        self.largest_norm = 0.0

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @property
    def usable(self) -> bool:
        """False once a row too large for a half float was added (the owner drops the copy)."""
        return self.largest_norm <= LARGEST_NORM

    def memory_bytes(self) -> int:
        return len(self) * int(self.index.code_size)

    def add(self, vectors: np.ndarray) -> None:
        """Append rows (the owner's flat storage appended the same rows)."""
        if not len(vectors):
            return
        # in blocks: a float64 copy of a million rows at once would be 3 GB
        largest = float(np.max([  # np.max keeps a NaN, Python's max may not
            np.linalg.norm(vectors[start:start + NORM_BLOCK].astype(np.float64), axis=1).max()
            for start in range(0, len(vectors), NORM_BLOCK)]))
        self.largest_norm = max(self.largest_norm, largest if math.isfinite(largest)
                                else math.inf)
        self.index.add(vectors)

    def remove(self, positions: np.ndarray) -> None:
        """Drop rows by position; the rest close up in order, as the flat storage's do."""
        if len(positions):
            self.index.remove_ids(faiss.IDSelectorBatch(
                np.ascontiguousarray(positions, dtype=np.int64)))

    def search(self, queries: np.ndarray, depth: int, rows: np.ndarray, *,
               past: int = 0, dropped: Callable[[np.ndarray], np.ndarray] | None = None
               ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The exact ``depth`` best ``(scores, positions)`` of each query, best first, read
        through the copy and re-scored from ``rows`` (the flat storage, full precision).

        ``dropped`` (positions -> a mask of those to leave out: an exclusion) is applied to
        the approximate ranking, which then reads ``past`` rows more, so that only the rows
        kept are re-scored. Returns also the queries the copy could not answer exactly (more
        rows within the bound of the last than were read, fewer than ``depth`` kept, or a
        query that is not finite): their rows are left empty (position -1, score NaN) for
        the caller to search the flat rows itself."""
        approximate, found = self.index.search(queries, reading(depth, past))
        scores = np.full((len(queries), depth), np.nan, dtype=np.float32)
        positions = np.full((len(queries), depth), -1, dtype=np.int64)
        unanswered: list[int] = []
        for row, query in enumerate(queries):
            ranked, ranking = found[row], approximate[row]
            if dropped is not None:
                kept = ~dropped(ranked)
                ranked, ranking = ranked[kept], ranking[kept]
            if len(ranked) <= depth:
                unanswered.append(row)
                continue
            bound = score_bound(float(np.linalg.norm(query.astype(np.float64))),
                                self.largest_norm, self.dimension)
            floor = float(ranking[depth - 1]) - 2 * bound
            if not math.isfinite(floor) or float(ranking[-1]) >= floor:
                unanswered.append(row)
                continue
            candidates = ranked[ranking >= floor]
            exact, order = faiss.knn(query[None, :], rows[candidates], len(candidates),
                                     metric=faiss.METRIC_INNER_PRODUCT)
            candidate_scores = np.empty(len(candidates), dtype=np.float32)
            candidate_scores[order[0]] = exact[0]
            best = np.lexsort((-candidates, -candidate_scores))[:depth]
            scores[row], positions[row] = candidate_scores[best], candidates[best]
        return scores, positions, unanswered
