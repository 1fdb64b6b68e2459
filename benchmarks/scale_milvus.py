"""The Milvus search engine at 10,000 rows: write throughput and search latency (p50/p95).

Writes ``--rows`` synthetic chunks (seeded unit vectors of ``--dimension``, texts of Zipf-drawn
words) to a ``MilvusBackend`` in batches of ``--batch`` (an ingest's commit at a time), then times
``--queries`` dense searches (a perturbed stored vector) and lexical searches (3 words of a
stored text), ``--depth`` deep, and the consistency count. The embedded indexes (FAISS flat,
bm25s) get the same rows and queries for comparison, and the share of queries whose dense top-10
equals the embedded flat index's is reported, and for lexical search the share whose top-1
equals bm25s' and the share that finds the text the query words came from. Prints figures,
never pass/fail; writes them to ``benchmarks/results/scale_milvus.json``.

By default the engine is Milvus Lite in a temporary folder (a pure-Python engine meant for
tests: expect it far slower than a server); ``--uri http://host:19530`` measures a server or
cluster (token from ``TRISHIELD_MILVUS_TOKEN``) in a collection ``--collection`` that the run
drops at the end.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scale_milvus.py
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from trishield.kb.engines.milvus import INDEX_KINDS, MilvusBackend
from trishield.kb.indexes import DenseIndex, LexicalIndex

RESULTS = Path(__file__).parent / "results" / "scale_milvus.json"
VOCABULARY = 20_000
WORDS_PER_TEXT = 80


def synthetic(rows: int, dimension: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Row ids, unit vectors and texts whose word frequencies follow Zipf's law, like prose."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ranks = np.minimum(rng.zipf(1.2, size=(rows, WORDS_PER_TEXT)), VOCABULARY)
    texts = [" ".join(f"term{rank}x" for rank in row) for row in ranks]
    return np.arange(1, rows + 1, dtype=np.int64), vectors, texts


def percentiles(timings: list[float]) -> dict[str, float]:
    milliseconds = np.array(timings) * 1000
    return {"p50_ms": round(float(np.percentile(milliseconds, 50)), 2),
            "p95_ms": round(float(np.percentile(milliseconds, 95)), 2),
            "mean_ms": round(float(milliseconds.mean()), 2)}


def timed(calls: list[Callable[[], object]]) -> tuple[dict[str, float], list[object]]:
    timings, results = [], []
    for call in calls:
        started = time.perf_counter()
        results.append(call())
        timings.append(time.perf_counter() - started)
    return percentiles(timings), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--index", choices=sorted(INDEX_KINDS), default="flat")
    parser.add_argument("--uri", default=None, help="default: Milvus Lite in a temporary folder")
    parser.add_argument("--collection", default="trishield_scale_bench")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    ids, vectors, texts = synthetic(args.rows, args.dimension, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    picks = rng.choice(args.rows, size=args.queries, replace=False)
    dense_queries = vectors[picks] + rng.normal(scale=0.05, size=(args.queries, args.dimension))
    dense_queries = (dense_queries / np.linalg.norm(dense_queries, axis=1, keepdims=True)
                     ).astype(np.float32)
    lexical_queries = [" ".join(rng.choice(texts[pick].split(), size=3)) for pick in picks]

    with tempfile.TemporaryDirectory() as scratch:
        uri = args.uri or str(Path(scratch) / "engine.db")
        figures: dict[str, object] = {
            "engine": "milvus-lite" if args.uri is None else "milvus server", "rows": args.rows,
            "dimension": args.dimension, "index": args.index, "batch": args.batch,
            "queries": args.queries, "depth": args.depth, "seed": args.seed,
            "load_average_start": round(os.getloadavg()[0], 2)}
        started = time.perf_counter()
        backend = MilvusBackend(uri, args.collection, args.dimension, index=args.index)
        figures["open_s"] = round(time.perf_counter() - started, 2)
        try:
            started = time.perf_counter()
            for start in range(0, args.rows, args.batch):
                part = slice(start, start + args.batch)
                backend.add(ids[part], vectors[part], texts[part])
            seconds = time.perf_counter() - started
            figures["add_s"] = round(seconds, 2)
            figures["add_rows_per_s"] = round(args.rows / seconds, 1)
            started = time.perf_counter()
            figures["count"] = len(backend)
            figures["count_ms"] = round((time.perf_counter() - started) * 1000, 2)

            figures["dense"], engine_dense = timed(
                [lambda q=q: backend.dense(q, args.depth) for q in dense_queries])
            figures["lexical"], engine_lexical = timed(
                [lambda q=q: backend.lexical(q, args.depth) for q in lexical_queries])
            started = time.perf_counter()
            figures["ids_listed"] = len(backend.ids())
            figures["ids_s"] = round(time.perf_counter() - started, 2)
        finally:
            if args.uri is not None:
                backend.drop()
            backend.close()

    flat = DenseIndex("flat", args.dimension)
    flat.add(ids, vectors)
    figures["embedded_dense"], embedded_dense = timed(
        [lambda q=q: flat.search(q, args.depth) for q in dense_queries])
    lexical = LexicalIndex.build(ids, texts)
    figures["embedded_lexical"], embedded_lexical = timed(
        [lambda q=q: lexical.search(q, args.depth) for q in lexical_queries])
    pairs = list(zip(engine_dense, embedded_dense, strict=True))
    figures["dense_topk_equal_share"] = round(float(np.mean(
        [[i for i, _ in a] == [i for i, _ in b] for a, b in pairs])), 3)
    figures["dense_recall_at_depth"] = round(float(np.mean(
        [len({i for i, _ in a} & {i for i, _ in b}) / max(len(b), 1) for a, b in pairs])), 3)
    figures["lexical_top1_equal_share"] = round(float(np.mean(
        [bool(a) and bool(b) and a[0][0] == b[0][0]
         for a, b in zip(engine_lexical, embedded_lexical, strict=True)])), 3)
    sources = ids[picks].tolist()
    for name, found in (("lexical_source_recall", engine_lexical),
                        ("embedded_lexical_source_recall", embedded_lexical)):
        figures[name] = round(float(np.mean(
            [source in {i for i, _ in hits} for source, hits in zip(sources, found,
                                                                      strict=True)])), 3)
    figures["load_average_end"] = round(os.getloadavg()[0], 2)

    print(f"Milvus ({figures['engine']}, {args.index}) with {args.rows} rows of dimension "
          f"{args.dimension}:")
    print(f"  open {figures['open_s']} s; add {figures['add_s']} s = "
          f"{figures['add_rows_per_s']} rows/s in batches of {args.batch}; count(*) "
          f"{figures['count_ms']} ms; list all {figures['ids_listed']} ids {figures['ids_s']} s")
    for name in ("dense", "lexical", "embedded_dense", "embedded_lexical"):
        shown = figures[name]
        print(f"  {name:17s} depth {args.depth}: p50 {shown['p50_ms']} ms  "
              f"p95 {shown['p95_ms']} ms  mean {shown['mean_ms']} ms")
    print(f"  dense top-{args.depth} identical to the embedded flat index: "
          f"{figures['dense_topk_equal_share']:.1%} (recall@{args.depth} "
          f"{figures['dense_recall_at_depth']:.1%}); lexical top-1 identical to bm25s: "
          f"{figures['lexical_top1_equal_share']:.1%}")
    print(f"  lexical: the queried text in the top {args.depth}: milvus "
          f"{figures['lexical_source_recall']:.1%}, bm25s "
          f"{figures['embedded_lexical_source_recall']:.1%} (Milvus Lite weighs terms per "
          "segment, bm25s over all rows)")
    print(f"  1-min load average start/end: {figures['load_average_start']} / "
          f"{figures['load_average_end']} on {os.cpu_count()} CPUs")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"  written to {RESULTS}")


if __name__ == "__main__":
    main()
