"""Ring 1's outlier statistic at ingest, against how many writers the KB holds (issue 19).

Ingest screening (``KnowledgeBase._screen``) measures each new document against stored
documents by *other* writers, and calibrates that against a reference sample drawn across
writers (``kb/neighbourhood.py``, ``rings/outlier.stored_outlier_scores``): each reference
writer's documents are measured with that writer excluded too. So the work of one ingest grows
with the number of writers in the sample (up to ``REFERENCE_SIZE``), and a KB open to many
writers (the product's premise) pays it on every write.

This prints, per KB size and number of writers, the p50/p95 of ``stored_outlier_scores`` for
one new document from a new writer (what one ``POST /v1/documents`` with Ring 1 pays besides
embedding and the commit), and how many reference writers were measured. The KBs are
*synthetic*: clustered, L2-normalised 384-d vectors and generated text written through the
store's real write path (``benchmarks/scale.py``'s generator), documents spread round-robin
over the writers; the statistic's value is not the point, its cost is.

Usage::

    PYTHONPATH=src python benchmarks/ingest_writers.py                  # 5k and 50k chunks
    PYTHONPATH=src python benchmarks/ingest_writers.py --sizes 5000 --writers 1 500
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import DATA, SEED, Synthetic, percentiles
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.neighbour_cache import NeighbourCache
from trishield.kb.neighbourhood import StoredNeighbourhood
from trishield.rings.outlier import stored_outlier_scores


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


def measure(kb: KnowledgeBase, synthetic: Synthetic, repeats: int) -> dict[str, object]:
    _, dense, _ = kb._refresh_indexes(persist=False)  # what ``_screen`` searches
    seconds, notes = [], set()
    for number in range(repeats):
        vector = synthetic.vectors(1, 50_000_000 + number)
        started = time.perf_counter()
        neighbourhood = StoredNeighbourhood(kb.store, dense, kb.dimension, f"new-{number}")
        outliers = stored_outlier_scores(vector, neighbourhood)
        seconds.append(time.perf_counter() - started)
        notes.add(outliers.note or "scored")
    reference = StoredNeighbourhood(kb.store, dense, kb.dimension, "new").reference()
    return {"outlier_at_ingest": percentiles(seconds), "with_cache": cached(kb, synthetic,
                                                                            repeats),
            "reference_documents": len(reference.writers),
            "reference_writers": len(set(reference.writers)), "outcome": sorted(notes)}


def cached(kb: KnowledgeBase, synthetic: Synthetic, repeats: int) -> dict[str, object]:
    """The same through one handle's :class:`NeighbourCache`, as a service's writer screens
    one write after another: each new writer's document is stored after it is screened, so
    the next screen catches the cache up from the change log. The first screen fills the
    cache (``first_ms``); the rest are what a warm writer pays."""
    cache = NeighbourCache()
    seconds = []
    for number in range(repeats + 1):
        _, dense, _ = kb._refresh_indexes(persist=False)
        vector = synthetic.vectors(1, 60_000_000 + number)
        started = time.perf_counter()
        stored_outlier_scores(vector, StoredNeighbourhood(
            kb.store, dense, kb.dimension, f"cached-{number}", cache=cache))
        seconds.append(time.perf_counter() - started)
        document = Document(id=f"cached-{number}", text=synthetic.texts(1, 90, number)[0])
        with kb.store.transaction() as connection:
            kb.store.write_batch(connection, documents=[document],
                                 chunks=[chunk_document(document, kb.settings.chunking)],
                                 embeddings=vector, tier="neutral",
                                 writer=f"cached-{number}", source="synthetic")
    return {"first_ms": round(seconds[0] * 1000, 3), "next": percentiles(seconds[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    if min(args.sizes) < 1 or min(args.writers) < 1 or args.repeats < 1:
        parser.error("--sizes, --writers and --repeats must be at least 1")
    synthetic = Synthetic(DATA)
    work = Path(tempfile.mkdtemp(prefix="ingest-writers-"))
    try:
        for rows in args.sizes:
            for writers in args.writers:
                directory = work / f"kb-{rows}-{writers}"
                with KnowledgeBase.open(directory, create=True) as kb:
                    load(kb, synthetic, rows, writers)
                with KnowledgeBase.open(directory) as kb:
                    figures = measure(kb, synthetic, args.repeats)
                shutil.rmtree(directory, ignore_errors=True)
                timing, warm = figures["outlier_at_ingest"], figures["with_cache"]
                print(f"{rows:>7} chunks {writers:>5} writers: S_out at ingest p50 "
                      f"{timing['p50_ms']} ms, p95 {timing['p95_ms']} ms; with the handle's "
                      f"cache first {warm['first_ms']} ms, then p50 {warm['next']['p50_ms']} "
                      f"ms, p95 {warm['next']['p95_ms']} ms "
                      f"({figures['reference_documents']} reference documents by "
                      f"{figures['reference_writers']} writers; {', '.join(figures['outcome'])})",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
