"""Ring 1 at ingest, against the KB's size and how many writers it holds (issue 19).

Ingest screening (``IngestScreening.screen``, kb/screening/at_ingest.py) measures each new document
against stored documents by *other* writers, and calibrates that against a reference sample drawn
across writers (``kb/screening/neighbourhood.py``, ``rings/outlier.stored_outlier_scores``): each
reference writer's documents are measured with that writer excluded too. A KB open to many writers
(the product's premise) pays that on every write, so this times Ring 1's whole screen of one new
document (``IngestGuard.screen``: text checks, ``S_out`` and the tampered-copy search;
embedding and the commit excluded), per KB size and number of writers, three ways:

* *cold*: a fresh neighbourhood each time, no cache (a one-off CLI process);
* *warm, new writers*: one handle's cache, each write by a writer the KB has not seen, stored
  before the next (a new writer moves every writer's share of the sample now and then);
* *warm, returning writers*: one handle's cache, writes by the KB's writers in turn (the
  steady state of a service);
* *one-off processes, lists saved*: each write a new handle's, by the KB's writers in turn,
  starting from the neighbour lists the previous one saved when it closed
  (``kb/screening/neighbour_cache_file.py``; loading the file is timed, saving it is reported
  apart); the first of them finds no file, as a first process does.

The KBs are *synthetic*: clustered, L2-normalised 384-d vectors and generated text written
through the store's real write path (``benchmarks/scale.py``'s generator), one-chunk documents
round-robin over the writers; the statistic's value is not the point, its cost is. The last
lines give, per number of writers, the largest size's p50 over the smallest's (same run).

Usage::

    PYTHONPATH=src python benchmarks/ingest_writers.py                 # 1k and 100k chunks
    PYTHONPATH=src python benchmarks/ingest_writers.py --sizes 5000 --writers 1 500
    PYTHONPATH=src python benchmarks/ingest_writers.py --kinds flat hnsw --writers 100

With ``--kinds`` each KB is measured once per dense index kind (its rows kept, the index
rebuilt before the first screen, not timed: an HNSW graph of 100,000 rows takes minutes).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import DATA, SEED, Synthetic, percentiles, set_kind
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.indexes.dense import DENSE_KINDS, DenseIndex
from trishield.kb.screening import neighbour_cache_file
from trishield.kb.screening.neighbour_cache import NeighbourCache
from trishield.kb.screening.neighbourhood import StoredNeighbourhood
from trishield.rings.ingest_guard import IngestGuard


def load(kb: KnowledgeBase, synthetic: Synthetic, rows: int, writers: int) -> None:
    """``rows`` one-chunk documents, round-robin over ``writers`` writers, one transaction per
    5,000 documents (one batch per writer within it)."""
    for start in range(0, rows, 5000):
        count = min(5000, rows - start)
        texts = synthetic.texts(count, 90, SEED + start)
        vectors = synthetic.vectors(count, SEED + start)
        by_writer: dict[int, list[int]] = {}
        for n in range(count):
            by_writer.setdefault((start + n) % writers, []).append(n)
        with kb.store.transaction() as connection:
            for writer, members in sorted(by_writer.items()):
                documents = [Document(id=f"s{start + n}", text=texts[n]) for n in members]
                kb.store.write_batch(
                    connection, documents=documents,
                    chunks=[chunk_document(d, kb.settings.chunking) for d in documents],
                    embeddings=vectors[members], tier="neutral", writer=f"w{writer}",
                    source="synthetic")


def screen_one(kb: KnowledgeBase, guard: IngestGuard, synthetic: Synthetic, writer: str,
               number: int, cache: NeighbourCache | None, store: bool,
               new_process: bool = False) -> float:
    """Seconds of Ring 1's screen of one new one-chunk document by ``writer`` (the dense
    index brought up to date first, as ``_screen`` does, not timed); the document is stored
    afterwards when ``store``. With ``new_process`` the screen searches the index as a
    process that has just loaded it would: the same rows, and none of what an index builds
    after its first searches (an exact index's half-precision copy, ``kb/indexes/dense.py``)."""
    _, dense, _ = kb._refresh_indexes(persist=False)
    if new_process:
        dense = DenseIndex(dense.kind, dense.dimension, dense.index)
    vector = synthetic.vectors(1, 50_000_000 + number)
    document = Document(id=f"{writer}-bench-{number}",
                        text=synthetic.texts(1, 90, 70_000_000 + number)[0])
    neighbourhood = StoredNeighbourhood(kb.store, dense, kb.dimension, writer, cache=cache)
    started = time.perf_counter()
    guard.screen([document.id], [document.text], tiers=["neutral"], embeddings=vector,
                 neighbourhood=neighbourhood)
    seconds = time.perf_counter() - started
    if store:  # as Writes._write_batch does after a screen (not timed)
        with kb.store.transaction() as connection:
            _, chunk_pks = kb.store.write_batch(
                connection, documents=[document],
                chunks=[chunk_document(document, kb.settings.chunking)], embeddings=vector,
                tier="neutral", writer=writer, source="synthetic")
        neighbourhood.hand_over([0], [chunk_pks])
    return seconds


def measure(kb: KnowledgeBase, synthetic: Synthetic, writers: int, repeats: int,
            run: int = 0) -> dict[str, object]:
    """The three scenarios on ``kb``; ``run`` numbers the measurements of one KB (one per
    index kind), so that their documents and new writers are new each time."""
    guard = IngestGuard()
    base = 100_000 * run
    cold = [screen_one(kb, guard, synthetic, f"cold-{n}", base + n, None, store=False)
            for n in range(repeats)]
    figures: dict[str, object] = {"cold": percentiles(cold)}
    for name, writer_of in (("new_writers", lambda n: f"new-{run}-{n}"),
                            ("returning_writers", lambda n: f"w{n % writers}")):
        cache = NeighbourCache()
        seconds = [screen_one(kb, guard, synthetic, writer_of(n),
                              base + 1000 * len(figures) + n, cache, store=True)
                   for n in range(repeats + 1)]
        figures[name] = {"first_ms": round(seconds[0] * 1000, 3)} | percentiles(seconds[1:])
    figures["one_off_saved"] = one_off_processes(kb, guard, synthetic, writers, repeats,
                                                 base + 1000 * len(figures))
    _, dense, _ = kb._refresh_indexes(persist=False)
    reference = StoredNeighbourhood(kb.store, dense, kb.dimension, "new").reference()
    return figures | {"reference_documents": len(reference.writers),
                      "reference_writers": len(set(reference.writers))}


def one_off_processes(kb: KnowledgeBase, guard: IngestGuard, synthetic: Synthetic,
                      writers: int, repeats: int, base: int) -> dict[str, object]:
    """Screens of returning writers, each from the lists the previous screen's handle saved
    on closing (the first finds none): seconds to load the file plus the screen's."""
    path = kb.directory / neighbour_cache_file.FILE
    identity = kb._screening.identity()
    path.unlink(missing_ok=True)
    seconds, saves = [], []
    for n in range(repeats + 1):
        started = time.perf_counter()
        cache = neighbour_cache_file.load(path, identity, kb.dimension) or NeighbourCache()
        loaded = time.perf_counter() - started
        seconds.append(loaded + screen_one(kb, guard, synthetic, f"w{n % writers}", base + n,
                                           cache, store=True, new_process=True))
        started = time.perf_counter()
        neighbour_cache_file.save(cache, path, identity, kb.dimension)
        saves.append(time.perf_counter() - started)
    size = path.stat().st_size
    path.unlink()
    return {"first_ms": round(seconds[0] * 1000, 3)} | percentiles(seconds[1:]) | {
        "save_p50_ms": percentiles(saves)["p50_ms"], "file_mb": round(size / 1e6, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--writers", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--kinds", nargs="+", default=["flat"], choices=DENSE_KINDS)
    args = parser.parse_args()
    if min(args.sizes) < 1 or min(args.writers) < 1 or args.repeats < 1:
        parser.error("--sizes, --writers and --repeats must be at least 1")
    synthetic = Synthetic(DATA)
    work = Path(tempfile.mkdtemp(prefix="ingest-writers-"))
    results: dict[tuple[str, int, int], dict[str, object]] = {}
    try:
        for rows in args.sizes:
            for writers in args.writers:
                directory = work / f"kb-{rows}-{writers}"
                with KnowledgeBase.open(directory, create=True) as kb:
                    load(kb, synthetic, rows, writers)
                for run, kind in enumerate(args.kinds):
                    set_kind(directory, kind)
                    with KnowledgeBase.open(directory) as kb:
                        figures = results[kind, rows, writers] = measure(
                            kb, synthetic, writers, args.repeats, run)
                    report(kind, rows, writers, figures)
                shutil.rmtree(directory, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    small, large = min(args.sizes), max(args.sizes)
    if small != large:
        for kind in args.kinds:
            for writers in args.writers:
                ratios = {scenario: results[kind, large, writers][scenario]["p50_ms"] /  # type: ignore[index]
                          max(results[kind, small, writers][scenario]["p50_ms"], 1e-3)  # type: ignore[index]
                          for scenario in ("cold", "new_writers", "returning_writers",
                                           "one_off_saved")}
                print(f"{kind} {large} / {small} chunks, {writers} writers, p50 ratio: "
                      + ", ".join(f"{scenario} {ratio:.2f}x"
                                  for scenario, ratio in ratios.items()), flush=True)


def report(kind: str, rows: int, writers: int, figures: dict[str, object]) -> None:
    new, returning = figures["new_writers"], figures["returning_writers"]
    saved = figures["one_off_saved"]
    print(f"{kind:<5} {rows:>7} chunks {writers:>5} writers: Ring 1 screen p50/p95 cold "
          f"{figures['cold']['p50_ms']}/{figures['cold']['p95_ms']} ms; warm, new "  # type: ignore[index]
          f"writers {new['p50_ms']}/{new['p95_ms']} ms (first {new['first_ms']}); "  # type: ignore[index]
          f"warm, returning writers {returning['p50_ms']}/{returning['p95_ms']} ms "  # type: ignore[index]
          f"(first {returning['first_ms']}); one-off processes, lists saved "
          f"{saved['p50_ms']}/{saved['p95_ms']} ms (first {saved['first_ms']}, save p50 "  # type: ignore[index]
          f"{saved['save_p50_ms']} ms, {saved['file_mb']} MB) ({figures['reference_documents']} "  # type: ignore[index]
          f"reference documents by {figures['reference_writers']} writers)", flush=True)


if __name__ == "__main__":
    main()
