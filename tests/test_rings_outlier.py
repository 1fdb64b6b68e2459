"""Ring 1's S_out after retrieval: its own median is np.median's, bit for bit (the pool's
outlier scores, and so the verdicts, must not move with the faster median)."""

from __future__ import annotations

import numpy as np
import pytest

from trishield.rings.outlier import median, outlier_scores


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
