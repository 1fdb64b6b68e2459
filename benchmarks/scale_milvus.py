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

With ``--kb-sizes 1000 10000`` it measures a whole knowledge base on the engine instead (written
to ``benchmarks/results/scale_milvus_kb.json``): per size, a KB on disk is bulk-loaded with
synthetic chunks through the store's write path and attached to the engine (a full load,
timed), then ``--ingests`` three-chunk documents are written the way ``ingest`` writes them
(embedding and screening excluded): the SQLite commit, the engine taking in the rows
(``EngineLink.after_commit``) and the embedded dense index that Ring 1's ingest
neighbourhood still uses; then ``KnowledgeBase.search`` p50/p95 for dense (query embedding
included, with the real model), bm25 and hybrid, on the engine and, for comparison, on the
embedded indexes of the same KB.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scale_milvus.py --kb-sizes 1000 10000
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

from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.indexes.dense import DenseIndex
from trishield.kb.indexes.engines.config import EngineConfig
from trishield.kb.indexes.engines.milvus import INDEX_KINDS, MilvusBackend
from trishield.kb.indexes.lexical import LexicalIndex

RESULTS = Path(__file__).parent / "results" / "scale_milvus.json"
KB_RESULTS = Path(__file__).parent / "results" / "scale_milvus_kb.json"
KB_DIMENSION = 384
"""all-MiniLM-L6-v2's, the default KB model (its query embeddings are searched)."""
KB_DEPTH = 10
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


def bulk_load(kb: KnowledgeBase, rows: int, seed: int) -> None:
    """``rows`` one-chunk documents through the store's write path (FTS5 and change-log
    triggers included), 5,000 a transaction; embedding excluded (the vectors are given)."""
    _, vectors, texts = synthetic(rows, KB_DIMENSION, seed)
    for start in range(0, rows, 5000):
        part = slice(start, start + 5000)
        documents = [Document(id=f"s{start + n}", text=text)
                     for n, text in enumerate(texts[part])]
        chunks = [chunk_document(document, kb.settings.chunking) for document in documents]
        if any(len(per) != 1 for per in chunks):
            raise SystemExit("a synthetic text made more than one chunk; shorten the texts")
        with kb.store.transaction() as connection:
            kb.store.write_batch(connection, documents=documents, chunks=chunks,
                                 embeddings=vectors[part], tier="neutral", writer="bench",
                                 source="synthetic")


def ingest_one(kb: KnowledgeBase, number: int) -> tuple[float, float, float]:
    """One three-chunk document the way ``ingest`` writes it (embedding and screening
    excluded): ``(commit, engine, embedded index)`` seconds."""
    _, vectors, texts = synthetic(3, KB_DIMENSION, 1_000_000 + number)
    document = Document(id=f"one-{number}", text=" ".join(texts))
    chunks = chunk_document(document, kb.settings.chunking)
    vectors = synthetic(len(chunks), KB_DIMENSION, 2_000_000 + number)[1]
    with kb._lock.hold():
        started = time.perf_counter()
        with kb.store.transaction() as connection:
            kb.store.write_batch(connection, documents=[document], chunks=[chunks],
                                 embeddings=vectors, tier="neutral", writer="bench",
                                 source="synthetic")
        committed = time.perf_counter()
        warnings = kb._engines.after_commit()
        followed = time.perf_counter()
        warnings += kb._after_commit()  # the engine is in step: the embedded index's share
        done = time.perf_counter()
    if warnings:
        raise SystemExit(f"the write warned: {warnings}")
    return committed - started, followed - committed, done - followed


def kb_searches(kb: KnowledgeBase, questions: list[str]) -> dict[str, dict[str, float]]:
    figures = {}
    for backend in ("dense", "bm25", "hybrid"):
        figures[backend], _ = timed([lambda q=q, b=backend: kb.search(q, backend=b, k=KB_DEPTH)
                                     for q in questions])
    figures["query_embedding"], _ = timed([lambda q=q: kb.embedder.encode([q])
                                           for q in questions])
    return figures


def kb_level(args: argparse.Namespace) -> None:
    """KB-level figures on the engine (see the module docstring)."""
    figures: dict[str, object] = {"engine": "milvus-lite" if args.uri is None else
                                  "milvus server", "index": args.index, "seed": args.seed,
                                  "ingests": args.ingests, "queries": args.queries,
                                  "cpus": os.cpu_count(),
                                  "load_average_start": round(os.getloadavg()[0], 2)}
    rng = np.random.default_rng(args.seed + 1)
    with tempfile.TemporaryDirectory() as scratch:
        for rows in args.kb_sizes:
            directory = Path(scratch) / f"kb-{rows}"
            uri = args.uri or str(Path(scratch) / f"engine-{rows}.db")
            texts = synthetic(rows, KB_DIMENSION, args.seed)[2]
            questions = [" ".join(rng.choice(texts[pick].split(), size=3))
                         for pick in rng.choice(rows, size=args.queries, replace=False)]
            with KnowledgeBase.open(directory, create=True) as kb:
                started = time.perf_counter()
                bulk_load(kb, rows, args.seed)
                loaded = time.perf_counter() - started
                kb.repair()  # the embedded snapshot, as a KB of this size would have
                started = time.perf_counter()
                kb.attach_engine(EngineConfig.parse(uri, f"bench_{rows}", args.index))
                attach = time.perf_counter() - started
                commits, engine, embedded = zip(*(ingest_one(kb, number)
                                                  for number in range(args.ingests)),
                                                strict=True)
                kb.search("warm up", backend="dense")  # load the embedding model
                on_engine = kb_searches(kb, questions)
                check = kb.check_indexes()["engine"]
                if args.uri is not None:
                    kb._engines.backend().drop()
                kb.attach_engine("embedded")
                on_embedded = kb_searches(kb, questions)
            row = {"bulk_load_s": round(loaded, 2), "attach_s": round(attach, 2),
                   "attach_rows_per_s": round(rows / attach, 1),
                   "ingest_commit": percentiles(list(commits)),
                   "ingest_engine": percentiles(list(engine)),
                   "ingest_embedded_index": percentiles(list(embedded)),
                   "ingest_total": percentiles([a + b + c for a, b, c in
                                                zip(commits, engine, embedded, strict=True)]),
                   "search_engine": on_engine, "search_embedded": on_embedded,
                   "engine_consistent": check["consistent"]}
            figures[str(rows)] = row
            print(f"KB of {rows} chunks on {figures['engine']} ({args.index}): attach "
                  f"{row['attach_s']} s ({row['attach_rows_per_s']} rows/s); consistent "
                  f"{check['consistent']}")
            print(f"  ingest one 3-chunk document p50/p95: commit "
                  f"{row['ingest_commit']['p50_ms']}/{row['ingest_commit']['p95_ms']} ms + "
                  f"engine {row['ingest_engine']['p50_ms']}/{row['ingest_engine']['p95_ms']} "
                  f"ms + embedded dense {row['ingest_embedded_index']['p50_ms']}/"
                  f"{row['ingest_embedded_index']['p95_ms']} ms = "
                  f"{row['ingest_total']['p50_ms']}/{row['ingest_total']['p95_ms']} ms")
            for backend in ("dense", "bm25", "hybrid", "query_embedding"):
                a, b = on_engine[backend], on_embedded[backend]
                print(f"  search {backend:15s} k={KB_DEPTH} p50/p95: engine {a['p50_ms']}/"
                      f"{a['p95_ms']} ms, embedded {b['p50_ms']}/{b['p95_ms']} ms")
    figures["load_average_end"] = round(os.getloadavg()[0], 2)
    print(f"  1-min load average start/end: {figures['load_average_start']} / "
          f"{figures['load_average_end']} on {os.cpu_count()} CPUs")
    KB_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    KB_RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"  written to {KB_RESULTS}")


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
    parser.add_argument("--kb-sizes", type=int, nargs="*", default=[],
                        help="measure whole KBs of these sizes on the engine instead")
    parser.add_argument("--ingests", type=int, default=20,
                        help="one-document ingests timed per KB size (with --kb-sizes)")
    args = parser.parse_args()
    if args.kb_sizes:
        kb_level(args)
        return

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
