"""An exact index's search with and without its half-precision copy, side by side (issue 19).

A flat index scans every row of 384 floats per query; at 100,000 rows that is bound by memory
bandwidth, and the copy (``kb/indexes/half_scan.py``) halves what is read. This builds two identical
flat :class:`DenseIndex` es over the same *synthetic* clustered unit vectors
(``benchmarks/scale.py``'s generator), lets one build its copy and refuses it to the other,
then times the same searches on both, alternated query by query so that the machine's load
falls on both alike: single queries at the query path's depth (20), and Ring 1's screening
search (42 neighbours, a writer's 399 chunks excluded) of one chunk and of a document's three
at once (FAISS's default threads for the batch). It checks every answer pair (same ids up
to the order among equal scores; the same scores bit for bit) and prints p50/p95 per side,
their ratio and each index's memory.

With ``--screens WRITERS...`` it then times Ring 1's whole warm screen at the largest size
(``benchmarks/ingest_writers.py``'s, on a KB built the same way), with the copy and without,
alternated write by write on one KB: separate runs of ``ingest_writers.py`` move by more
than the copy saves.

Usage::

    PYTHONPATH=src python benchmarks/studies/half_scan.py                    # 10k, 100k rows
    PYTHONPATH=src python benchmarks/studies/half_scan.py --sizes 100000 --screens 10 100
    PYTHONPATH=src python benchmarks/studies/half_scan.py --sizes 1000000    # 2.2 GB of vectors
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest_writers import load, screen_one
from scale import DATA, DIMENSION, SEED, Synthetic, percentiles
from trishield.kb import KnowledgeBase
from trishield.kb.indexes.dense import HALF_SCAN_AFTER, DenseIndex
from trishield.kb.screening.neighbour_cache import NeighbourCache
from trishield.rings.ingest_guard import IngestGuard

CASES = (("one query, k=20", 1, 20, 0), ("one query, k=42, 399 excluded", 1, 42, 399),
         ("three queries, k=42, 399 excluded", 3, 42, 399))
QUERIES = 100
SCREENS = 20
"""Screens on each side per scenario (``--screens``)."""


def pair(synthetic: Synthetic, rows: int) -> tuple[DenseIndex, DenseIndex]:
    """Two flat indexes of the same rows: the first with its copy built, the second never."""
    vectors = np.concatenate([synthetic.vectors(min(100_000, rows - start), SEED + start)
                              for start in range(0, rows, 100_000)])
    ids = np.arange(1, rows + 1, dtype=np.int64)
    with_copy, without = DenseIndex("flat", DIMENSION), DenseIndex("flat", DIMENSION)
    with_copy.add(ids, vectors)
    without.add(ids, vectors)
    without.use_half_scan = False
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
    rng = np.random.default_rng(SEED)
    for name, batch, depth, excluded in CASES:
        times: dict[str, list[float]] = {"copy": [], "flat": []}
        for number in range(QUERIES):
            chunk = queries[number * batch:(number + 1) * batch]
            excluding = (rng.choice(rows, excluded, replace=False) + 1) if excluded else None
            answers = {}
            sides = (("copy", with_copy), ("flat", without))
            for side, index in sides if number % 2 == 0 else sides[::-1]:
                started = time.perf_counter()
                answers[side] = index.search_many(chunk, depth, excluding=excluding)
                times[side].append(time.perf_counter() - started)
            mismatches += not same_answer(answers["copy"], answers["flat"])
        copy, flat = percentiles(times["copy"]), percentiles(times["flat"])
        print(f"{rows:>8} rows  {name:<34} through the copy p50/p95 {copy['p50_ms']}/"
              f"{copy['p95_ms']} ms, flat {flat['p50_ms']}/{flat['p95_ms']} ms, "
              f"flat / copy p50 {flat['p50_ms'] / copy['p50_ms']:.2f}x", flush=True)
    print(f"{rows:>8} rows  memory {with_copy.memory_bytes() / 2 ** 20:.1f} MB with the copy, "
          f"{without.memory_bytes() / 2 ** 20:.1f} MB without; answers differing: "
          f"{mismatches} of {QUERIES * len(CASES)}", flush=True)


def screens(synthetic: Synthetic, rows: int, writers: int, work: Path | None) -> None:
    """Ring 1's whole warm screen (``benchmarks/ingest_writers.py``'s) with the copy and
    without, alternated write by write on one KB of ``rows`` chunks by ``writers`` writers:
    the copy is kept in step throughout and only its use is switched."""
    directory = Path(tempfile.mkdtemp(prefix="half-scan-", dir=work))
    try:
        with KnowledgeBase.open(directory / "kb", create=True) as kb:
            load(kb, synthetic, rows, writers)
        with KnowledgeBase.open(directory / "kb") as kb:
            _, dense, _ = kb._refresh_indexes(persist=False)
            for query in synthetic.vectors(HALF_SCAN_AFTER, SEED + 98):
                dense.search(query, 20)
            guard = IngestGuard()
            for scenario in ("new writers", "returning writers"):
                cache = NeighbourCache()
                times: dict[bool, list[float]] = {True: [], False: []}
                for number in range(2 * SCREENS + 1):
                    _, dense, _ = kb._refresh_indexes(persist=False)
                    dense.use_half_scan = bool(number % 2)
                    writer = (f"new-{scenario[0]}-{number}" if scenario == "new writers"
                              else f"w{number % writers}")
                    seconds = screen_one(kb, guard, synthetic, writer,
                                         80_000_000 + 1000 * len(scenario) + number, cache,
                                         store=True)
                    if number:  # the first screen fills the cache
                        times[dense.use_half_scan].append(seconds)
                copy, flat = percentiles(times[True]), percentiles(times[False])
                print(f"{rows:>8} rows {writers:>5} writers  warm screen, {scenario:<17} "
                      f"with the copy p50/p95 {copy['p50_ms']}/{copy['p95_ms']} ms, without "
                      f"{flat['p50_ms']}/{flat['p95_ms']} ms, p50 difference "
                      f"{flat['p50_ms'] - copy['p50_ms']:.2f} ms", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--screens", type=int, nargs="*", default=[], metavar="WRITERS",
                        help="also Ring 1's whole warm screen at the largest size, for KBs of "
                             "these numbers of writers (each KB built through the store)")
    parser.add_argument("--work", type=Path, help="where the screens' KBs are written")
    arguments = parser.parse_args()
    synthetic = Synthetic(DATA)
    for rows in arguments.sizes:
        measure(synthetic, rows)
    for writers in arguments.screens:
        screens(synthetic, max(arguments.sizes), writers, arguments.work)


if __name__ == "__main__":
    main()
