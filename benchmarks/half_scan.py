"""An exact index's search with and without its half-precision copy, side by side (issue 19).

A flat index scans every row of 384 floats per query; at 100,000 rows that is bound by memory
bandwidth, and the copy (``kb/half_scan.py``) halves what is read. This builds two identical
flat :class:`DenseIndex` es over the same *synthetic* clustered unit vectors
(``benchmarks/scale.py``'s generator), lets one build its copy and refuses it to the other,
then times the same searches on both, alternated query by query so that the machine's load
falls on both alike: single queries at the query path's depth (20) and at Ring 1's
screening depth (42 neighbours past 399 excluded ids: 441), and a document's three chunks at
once (the screen's batch, FAISS's default threads). It checks every answer pair (same ids up
to the order among equal scores; the same scores bit for bit) and prints p50/p95 per side,
their ratio and each index's memory.

Usage::

    PYTHONPATH=src python benchmarks/half_scan.py                    # 10k, 100k rows
    PYTHONPATH=src python benchmarks/half_scan.py --sizes 1000000    # 2.2 GB of vectors
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import DATA, DIMENSION, SEED, Synthetic, percentiles
from trishield.kb.indexes import HALF_SCAN_AFTER, DenseIndex

CASES = (("one query, k=20", 1, 20), ("one query, k=441", 1, 441),
         ("three queries, k=441", 3, 441))
QUERIES = 100


def pair(synthetic: Synthetic, rows: int) -> tuple[DenseIndex, DenseIndex]:
    """Two flat indexes of the same rows: the first with its copy built, the second never."""
    vectors = np.concatenate([synthetic.vectors(min(100_000, rows - start), SEED + start)
                              for start in range(0, rows, 100_000)])
    ids = np.arange(1, rows + 1, dtype=np.int64)
    with_copy, without = DenseIndex("flat", DIMENSION), DenseIndex("flat", DIMENSION)
    with_copy.add(ids, vectors)
    without.add(ids, vectors)
    without._half_refused = True
    warm = synthetic.vectors(HALF_SCAN_AFTER, SEED + 98)
    for query in warm:  # the scans after which an index builds its copy
        with_copy.search(query, 20)
        without.search(query, 20)
    if with_copy._half is None:
        raise SystemExit(f"{rows} rows: no half-precision copy was built (below the "
                         "threshold?)")
    return with_copy, without


def same_answer(first: tuple[np.ndarray, np.ndarray],
                second: tuple[np.ndarray, np.ndarray]) -> bool:
    """The same scores bit for bit, and the same ids wherever a score is not tied."""
    (scores_a, ids_a), (scores_b, ids_b) = first, second
    if not np.array_equal(scores_a, scores_b):
        return False
    for row in range(len(ids_a)):
        equal = scores_a[row][1:] == scores_a[row][:-1]
        tied = np.zeros(len(equal) + 1, dtype=bool)
        tied[1:] |= equal
        tied[:-1] |= equal
        if not np.array_equal(ids_a[row][~tied], ids_b[row][~tied]):
            return False
    return True


def measure(synthetic: Synthetic, rows: int) -> None:
    with_copy, without = pair(synthetic, rows)
    queries = synthetic.vectors(QUERIES * 3, SEED + 97)
    mismatches = 0
    for name, batch, depth in CASES:
        times: dict[str, list[float]] = {"copy": [], "flat": []}
        for number in range(QUERIES):
            chunk = queries[number * batch:(number + 1) * batch]
            answers = {}
            sides = (("copy", with_copy), ("flat", without))
            for side, index in sides if number % 2 == 0 else sides[::-1]:
                started = time.perf_counter()
                answers[side] = index.search_many(chunk, depth)
                times[side].append(time.perf_counter() - started)
            mismatches += not same_answer(answers["copy"], answers["flat"])
        copy, flat = percentiles(times["copy"]), percentiles(times["flat"])
        print(f"{rows:>8} rows  {name:<21} through the copy p50/p95 {copy['p50_ms']}/"
              f"{copy['p95_ms']} ms, flat {flat['p50_ms']}/{flat['p95_ms']} ms, "
              f"flat / copy p50 {flat['p50_ms'] / copy['p50_ms']:.2f}x", flush=True)
    print(f"{rows:>8} rows  memory {with_copy.memory_bytes() / 2 ** 20:.1f} MB with the copy, "
          f"{without.memory_bytes() / 2 ** 20:.1f} MB without; answers differing: "
          f"{mismatches} of {QUERIES * len(CASES)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    arguments = parser.parse_args()
    synthetic = Synthetic(DATA)
    for rows in arguments.sizes:
        measure(synthetic, rows)


if __name__ == "__main__":
    main()
