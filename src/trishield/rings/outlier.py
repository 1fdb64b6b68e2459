"""Ring 1's outlier score ``S_out``: how much less similar a text is to its nearest neighbours
than a typical reference text is to its own.

Two uses, two neighbourhoods. After retrieval (:func:`outlier_scores`) the retrieved pool is
its own reference: a passage unlike the others retrieved with it stands out. At ingest
(:func:`stored_outlier_scores`) the yardstick is what the KB already stores from *other*
writers (:class:`~trishield.kb.screening.Neighbourhood`): a batch compared with itself made
the verdict depend on how the batch was cut, and a reference that counted every document of a
writer let one writer flood the KB and move the baseline for everyone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trishield.kb.screening import Neighbourhood

OUTLIER_NEIGHBOURS = 10
MIN_NEIGHBOURHOOD = 20
MAD_TO_SIGMA = 1.4826


def squashed_z(statistic: np.ndarray, median: float, sigma: float) -> np.ndarray:
    """``tanh(max(0, z) / 3)`` with ``z = (median - statistic) / sigma``: only a *lower*
    similarity than usual counts, squashed to [0, 1]."""
    return np.tanh(np.clip((median - statistic) / sigma, 0.0, None) / 3.0)


def median(values: np.ndarray) -> float:
    """``float(np.median(values))`` of a 1-D float array, bit for bit (the middle value, or
    the float mean of the two middle ones; NaN if any is NaN), without ``np.median``'s
    general machinery, which cost Ring 1 about 20 us a call on a pool of 20."""
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
        raise ValueError(f"median of a 1-D float array, got {values.dtype} {values.shape}")
    if not len(values):
        raise ValueError("median of no values")
    ordered = np.sort(values)  # NaNs sort last
    if np.isnan(ordered[-1]):
        return float("nan")
    middle = len(ordered) // 2
    # as np.mean sums: the first value plus the sum of the rest from +0.0 (so -0.0 -> 0.0)
    if len(ordered) % 2:
        return float(ordered[middle] + 0.0)
    return float((ordered[middle - 1] + (ordered[middle] + 0.0)) / 2)


def robust_outlier_score(statistic: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """:func:`squashed_z` against the median and ``1.4826 * MAD`` of ``reference``."""
    centre = median(reference)
    mad = median(np.abs(reference - centre)) * MAD_TO_SIGMA or 1e-6
    return squashed_z(statistic, centre, mad)


def outlier_scores(vectors: np.ndarray, reference: np.ndarray,
                   neighbours: int = OUTLIER_NEIGHBOURS) -> np.ndarray | None:
    """``S_out`` for each row of ``vectors`` against a ``reference`` neighbourhood.

    Each vector's statistic is its mean cosine similarity to its ``neighbours`` nearest
    reference vectors (itself excluded); the reference's own statistics give the median and MAD;
    the robust z-score of a low similarity is squashed to [0, 1] with ``tanh(z / 3)``.
    Returns ``None`` when the neighbourhood is too small to say anything.
    """
    if len(reference) < MIN_NEIGHBOURHOOD or len(vectors) == 0:
        return None
    depth = min(neighbours, len(reference) - 1)

    def statistic(rows: np.ndarray) -> np.ndarray:
        similarity = rows @ reference.T
        similarity[similarity > 0.9999] = -np.inf  # a vector is not its own neighbour
        top = -np.sort(-similarity, axis=1)[:, :depth]
        top[~np.isfinite(top)] = 0.0
        return top.mean(axis=1)

    measured = statistic(vectors)
    # a pool measured against itself (Ring 1 after retrieval): one computation, not two
    return robust_outlier_score(measured, measured if vectors is reference
                                else statistic(reference))


def writer_balanced_baseline(groups: Sequence[np.ndarray]) -> tuple[float, float]:
    """Median and robust sigma of reference statistics grouped by writer, one vote a writer.

    The centre is the median of the writers' medians, the spread the median of the writers'
    median absolute deviations from that centre (times 1.4826). A writer's many documents
    summarise to one value, so a writer that floods the KB moves the baseline by at most one
    place among the writers' values, however many documents it writes.
    """
    centre = median(_medians(groups))
    spread = median(_medians([np.abs(group - centre) for group in groups]))
    return centre, spread * MAD_TO_SIGMA or 1e-6


def _medians(groups: Sequence[np.ndarray]) -> np.ndarray:
    """Each group's median, in the groups' own float type: what ``np.median`` of the list of
    ``np.median(group)`` computes in, so that the median of medians stays bit for bit the
    same. Why not ``np.median``: a screen takes two medians per reference writer (about 200
    at 100 writers), and its general machinery cost about 20 us a call, 4-5 ms a screen."""
    return np.array([median(group) for group in groups], dtype=np.result_type(*groups))


@dataclass(frozen=True)
class StoredOutliers:
    """``S_out`` at ingest for each document of a batch, or ``None`` with the reason."""

    scores: np.ndarray | None
    note: str | None = None


def _mean_similarity(similarities: np.ndarray) -> np.ndarray:
    """Row means over the neighbours found (NaN marks a neighbour not found; none: 0)."""
    found = np.isfinite(similarities)
    total = np.where(found, similarities, 0.0).sum(axis=1)
    return np.where(found.any(axis=1), total / np.maximum(found.sum(axis=1), 1), 0.0)


def stored_outlier_scores(vectors: np.ndarray, neighbourhood: Neighbourhood,
                          neighbours: int = OUTLIER_NEIGHBOURS) -> StoredOutliers:
    """``S_out`` at ingest: each document against what the KB stores from other writers.

    A document's statistic is its mean cosine similarity to its ``neighbours`` nearest stored
    chunks by writers other than the batch's writer. The reference is the neighbourhood's
    sample of stored documents (drawn across writers, capped per writer), each measured the
    same way, *as if its own writer were writing it now*: its neighbours exclude its own writer
    (and the batch's writer). So a writer's topic is not held against it (its stored documents
    have no same-writer neighbours either), and a writer's near-identical copies of one text
    cannot inflate the baseline (they are measured against other writers' documents).

    ``None`` until the KB can say something: fewer than ``MIN_NEIGHBOURHOOD`` stored
    documents by other writers, or fewer than ``MIN_NEIGHBOURHOOD`` reference documents
    (or fewer than two writers) that can be measured, i.e. whose own writer is not the only
    other one (calibration needs two writers besides the batch's). A brand-new KB therefore
    gives its first batches no ``S_out`` at all, rather than measuring a batch against
    itself.
    """
    writer = neighbourhood.writer
    pool = neighbourhood.document_count()
    if pool < MIN_NEIGHBOURHOOD:
        return StoredOutliers(None, f"no S_out: the KB stores {pool} documents by writers "
                                    f"other than {writer!r}, fewer than {MIN_NEIGHBOURHOOD}")
    reference = neighbourhood.reference()
    members: dict[str, list[int]] = {}  # rows by writer, in order: one pass, not one a writer
    for row, name in enumerate(reference.writers):
        members.setdefault(name, []).append(row)
    statistics = []
    for name in sorted(members):
        if neighbourhood.document_count(also_excluding=name) < MIN_NEIGHBOURHOOD:
            continue  # too few documents by yet other writers to measure this writer's
        rows = reference.vectors[members[name]]
        statistics.append(_mean_similarity(
            neighbourhood.nearest(rows, neighbours, also_excluding=name)))
    measured = sum(len(group) for group in statistics)
    if measured < MIN_NEIGHBOURHOOD or len(statistics) < 2:
        return StoredOutliers(None, f"no S_out: {measured} reference documents by "
                                    f"{len(statistics)} writers to calibrate on (needs "
                                    f"{MIN_NEIGHBOURHOOD} by at least two writers other "
                                    f"than {writer!r}, each beside {MIN_NEIGHBOURHOOD}+ "
                                    "documents by yet other writers)")
    statistic = _mean_similarity(neighbourhood.nearest(vectors, neighbours))
    return StoredOutliers(squashed_z(statistic, *writer_balanced_baseline(statistics)))
