"""The half-precision scan: an exact index's search through it finds the same rows with the
same scores (bit for bit) as scanning the flat rows, through adds and removals."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

import trishield.kb.indexes.dense as indexes
from trishield.kb.indexes.dense import DenseIndex
from trishield.kb.indexes.half_scan import HalfScan, score_bound

DIMENSION = 48


def _unit(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def small_half_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy used from 200 rows on and from the first scan (10,000 rows in production)."""
    monkeypatch.setattr(indexes, "HALF_SCAN_MIN_ROWS", 200)
    monkeypatch.setattr(indexes, "HALF_SCAN_AFTER", 1)


def _same_as_flat(index: DenseIndex, ids: np.ndarray, rows: np.ndarray,
                  queries: np.ndarray, depth: int, excluding: np.ndarray | None = None) -> None:
    """The search's scores equal FAISS's flat scan of ``rows`` bit for bit, and its ids are
    the flat scan's, up to the order among (and the choice at the cut between) equal scores."""
    found_scores, found_ids = index.search_many(queries, depth, excluding=excluding)
    if excluding is not None:
        kept = ~np.isin(ids, excluding)
        ids, rows = ids[kept], rows[kept]
    reference = faiss.IndexFlatIP(DIMENSION)
    reference.add(rows)
    expected_scores, _ = reference.search(queries, depth)
    assert np.array_equal(found_scores, expected_scores)
    everything, order = reference.search(queries, len(rows))
    for row in range(len(queries)):
        score_of = dict(zip(ids[order[row]].tolist(), everything[row].tolist(), strict=True))
        assert len(set(found_ids[row].tolist())) == depth
        last = float(found_scores[row, -1])
        above = {i for i, s in score_of.items() if s > last}
        assert above <= set(found_ids[row].tolist())
        assert [score_of[i] for i in found_ids[row].tolist()] == found_scores[row].tolist()


@pytest.mark.usefixtures("small_half_scan")
def test_the_scan_through_the_copy_is_the_flat_scan_through_adds_and_removals() -> None:
    rng = np.random.default_rng(7)
    index = DenseIndex("flat", DIMENSION)
    ids = rng.permutation(50_000)[:600].astype(np.int64)
    rows = _unit(rng, 600)
    rows[100:140] = rows[0]  # identical rows: ties at and around the cut
    index.add(ids, rows)
    for round_number in range(6):
        queries = np.vstack([_unit(rng, 4), rows[[0, 300]]])
        _same_as_flat(index, ids, rows, queries, 25)
        _same_as_flat(index, ids, rows, queries[:1], 60)
        assert index._half is not None and len(index._half) == len(ids)
        gone = rng.choice(len(ids), 30, replace=False)
        index.remove(ids[gone])
        kept = np.setdiff1d(np.arange(len(ids)), gone)
        ids, rows = ids[kept], rows[kept]
        new_ids = np.arange(100_000 + 50 * round_number, 100_000 + 50 * round_number + 50)
        new_rows = _unit(rng, 50)
        index.add(new_ids, new_rows)
        ids, rows = np.concatenate([ids, new_ids]), np.vstack([rows, new_rows])
    _same_as_flat(index, ids, rows, _unit(rng, 3), 25)


@pytest.mark.usefixtures("small_half_scan")
def test_an_exclusion_is_dropped_from_the_copys_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(13)
    rows = _unit(rng, 1_500)
    rows[700:720] = rows[3]
    ids = rng.permutation(10_000)[:1_500].astype(np.int64)
    index = DenseIndex("flat", DIMENSION)
    index.add(ids, rows)
    queries = np.vstack([_unit(rng, 3), rows[[3, 50]]])
    scanned: list[int] = []
    original = DenseIndex._scan_dropping

    def counted(self, queries, depth, excluding):
        scanned.append(len(queries))
        return original(self, queries, depth, excluding)

    monkeypatch.setattr(DenseIndex, "_scan_dropping", counted)
    for excluded in (1, 40, 400):
        excluding = rng.choice(ids, excluded, replace=False)
        excluding[0] = ids[_nearest(rows, queries[0])]  # the best row is excluded
        _same_as_flat(index, ids, rows, queries, 30, excluding)
    assert index._half is not None and sum(scanned) < 3 * len(queries)  # the copy answered


def _nearest(rows: np.ndarray, query: np.ndarray) -> int:
    return int(np.argmax(rows @ query))


@pytest.mark.usefixtures("small_half_scan")
def test_a_query_with_more_near_ties_than_spare_rows_is_scanned_flat() -> None:
    rng = np.random.default_rng(3)
    rows = np.repeat(_unit(rng, 5), 80, axis=0)  # 400 rows, five vectors eighty times each
    ids = np.arange(1, 401, dtype=np.int64)
    index = DenseIndex("flat", DIMENSION)
    index.add(ids, rows)
    half = HalfScan(DIMENSION)
    half.add(rows)
    _, _, unanswered = half.search(rows[:1], 10, rows)
    assert unanswered == [0]
    _same_as_flat(index, ids, rows, rows[:2], 10)


def test_the_copy_is_built_only_after_the_scans_have_paid_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexes, "HALF_SCAN_MIN_ROWS", 200)
    rng = np.random.default_rng(5)
    index = DenseIndex("flat", DIMENSION)
    index.add(np.arange(1, 301, dtype=np.int64), _unit(rng, 300))
    flat_size = index.memory_bytes()
    for _ in range(indexes.HALF_SCAN_AFTER - 3):
        index.search(_unit(rng, 1)[0], 5)
    index.search(_unit(rng, 1)[0], 300 - 64)  # a depth near the size: scanned flat, not counted
    assert index._half is None
    index.search_many(_unit(rng, 2_700), 5)  # a batch FAISS multiplies as matrices: flat
    assert index._half is None
    index.search_many(_unit(rng, 2), 5)  # a batch scanned row by row counts as its queries
    assert index._half is None
    index.search(_unit(rng, 1)[0], 5)
    assert index._half is not None
    assert index.memory_bytes() == flat_size + 300 * DIMENSION * 2


@pytest.mark.usefixtures("small_half_scan")
def test_rows_too_large_for_a_half_float_refuse_the_copy() -> None:
    rng = np.random.default_rng(9)
    index = DenseIndex("flat", DIMENSION)
    index.add(np.arange(1, 301, dtype=np.int64), _unit(rng, 300))
    index.search(_unit(rng, 1)[0], 5)
    assert index._half is not None
    huge = _unit(rng, 1) * 1e5
    index.add(np.array([999], dtype=np.int64), huge)
    assert index._half is None
    assert index.search(huge[0], 1)[0][0] == 999
    assert index._half is None  # refused for good: not rebuilt


def test_the_bound_holds_for_rows_and_queries_of_any_norm() -> None:
    rng = np.random.default_rng(11)
    for scale in (1e-3, 1.0, 37.0):
        rows = _unit(rng, 2_000) * rng.uniform(0.1, 1.0, (2_000, 1)).astype(np.float32) * scale
        rows[:10, :5] = 1e-7  # subnormal in half precision
        half = HalfScan(DIMENSION)
        half.add(rows)
        for query in _unit(rng, 20) * np.float32(scale):
            approximate, positions = half.index.search(query[None, :], 2_000)
            exact = rows[positions[0]].astype(np.float64) @ query.astype(np.float64)
            bound = score_bound(float(np.linalg.norm(query)), half.largest_norm, DIMENSION)
            assert np.abs(approximate[0] - exact).max() <= bound
            assert np.abs(approximate[0] - exact).max() > 0  # the copy does round
