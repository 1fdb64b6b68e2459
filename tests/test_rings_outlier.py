"""Ring 1's S_out: its own median is np.median's, bit for bit (the pool's outlier scores after
retrieval, the writer-balanced baseline at ingest, and so the verdicts, must not move with the
faster median)."""

from __future__ import annotations

import numpy as np
import pytest

from trishield.rings.outlier import median, outlier_scores, writer_balanced_baseline


def test_median_is_numpys_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    compared = 0
    for n in range(1, 41):
        for dtype in (np.float32, np.float64):
            for _ in range(60):
                values = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3])).astype(dtype)
                if rng.random() < 0.3:  # ties and signed zeros
                    values = np.where(np.round(values, 0) == 0, -0.0, np.round(values, 0))
                expected = float(np.median(values))
                assert np.float64(median(values)).tobytes() == np.float64(expected).tobytes(), \
                    (values, expected)
                compared += 1
    assert compared == 40 * 2 * 60


def test_median_of_values_with_a_nan_is_nan() -> None:
    assert np.isnan(median(np.array([1.0, np.nan, 3.0], dtype=np.float32)))


@pytest.mark.parametrize("values, problem", [
    (np.zeros(0, dtype=np.float32), "no values"),
    (np.zeros((2, 2), dtype=np.float32), "1-D float"),
    (np.arange(4), "1-D float"),
])
def test_median_refuses_what_it_cannot_take(values: np.ndarray, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        median(values)


def test_pool_outlier_scores_single_out_the_passage_unlike_the_rest() -> None:
    rng = np.random.default_rng(0)
    centre = rng.standard_normal(64)
    pool = centre + 0.3 * rng.standard_normal((20, 64))
    pool[7] = rng.standard_normal(64)  # off topic
    pool = (pool / np.linalg.norm(pool, axis=1, keepdims=True)).astype(np.float32)
    scores = outlier_scores(pool, pool)
    assert scores is not None and int(np.argmax(scores)) == 7 and scores[7] > 0.5
    assert outlier_scores(pool[:19], pool[:19]) is None  # too small a neighbourhood


def _numpy_baseline(groups: list[np.ndarray]) -> tuple[float, float]:
    """The writer-balanced baseline as it was written with ``np.median`` throughout."""
    centre = float(np.median([np.median(group) for group in groups]))
    spread = float(np.median([np.median(np.abs(group - centre)) for group in groups]))
    return centre, spread * 1.4826 or 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_writer_balanced_baseline_is_numpys_bit_for_bit(dtype: type) -> None:
    rng = np.random.default_rng(11)
    for trial in range(300):
        writers = int(rng.integers(2, 40))
        groups = [(0.4 + 0.1 * rng.standard_normal(int(rng.integers(1, 12)))).astype(dtype)
                  for _ in range(writers)]
        if trial % 3 == 0:  # ties: writers with the same values, rounded statistics
            groups = [np.round(group, 2).astype(dtype) for group in groups]
            groups[1] = groups[0].copy()
        got = writer_balanced_baseline(groups)
        expected = _numpy_baseline(groups)
        assert [np.float64(v).tobytes() for v in got] == \
            [np.float64(v).tobytes() for v in expected], (groups, got, expected)


def test_writer_balanced_baseline_keeps_a_nan_and_a_zero_spread_as_numpy_did() -> None:
    centre, sigma = writer_balanced_baseline([np.array([0.5, np.nan]), np.array([0.4])])
    assert np.isnan(centre) and np.isnan(sigma)
    same = [np.full(3, 0.5, dtype=np.float32), np.full(2, 0.5, dtype=np.float32)]
    assert writer_balanced_baseline(same) == _numpy_baseline(same) == (0.5, 1e-6)
