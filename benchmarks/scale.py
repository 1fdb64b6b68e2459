"""Scale benchmark (issue 19): incremental indexes at 1k, 10k, 100k (and 1M) chunks.

Measures, and prints (figures, never pass/fail; also written to
``benchmarks/results/scale.json``):

1. **Lexical recall@3** of today's bm25s analyzer against SQLite FTS5 on real QA sets from the
   shared data directory (SQuAD v1.1 dev: 2,067 paragraphs / 10,570 questions; NQ-open
   oracle: gold passages / 2,655 questions): bm25s over :func:`index_terms` (the index this
   issue replaces), FTS5 over the same terms (what the KB now uses), and FTS5's own
   ``porter unicode61`` tokenizer over raw text (for reference).
2. **Per KB size and dense index kind** (flat, hnsw, ivfpq), through a real
   :class:`KnowledgeBase` on disk whose chunks are *synthetic*: clustered, L2-normalised
   384-d vectors (1,000 seeded cluster centres) and generated text (words drawn from SQuAD's
   word frequencies). Embedding is excluded everywhere (the vectors are given), so these are
   index figures, not retrieval quality:

   * ingest-one-document latency (p50/p95 of 20 three-chunk documents): the SQLite commit
     (rows + FTS5 + change log, in one transaction) and the dense index taking in the rows
     (``_after_commit``), plus the one-off cost of a dense snapshot and of a full rebuild
     (what every ingest cost before);
   * dense search p50/p95 (k = 20, single queries, FAISS with 1 OpenMP thread and with the
     default), recall@20 against exact search, and index memory (serialised size, and per
     million rows; then again after the searches, which counts the half-precision copy an
     exact index of 10,000 rows or more builds after its first ten scans);
   * lexical (FTS5 bm25) search p50/p95 (k = 20) over generated 4-word queries.

Usage::

    PYTHONPATH=src python benchmarks/scale.py              # 1k, 10k, 100k
    PYTHONPATH=src python benchmarks/scale.py --million    # and 1M (hours on 2 cores)
    PYTHONPATH=src python benchmarks/scale.py --sizes --skip-recall --index-only 1000000 \\
        --kinds flat ivfpq                                  # 1M, dense index alone
    PYTHONPATH=src python benchmarks/scale.py --sizes 1000 10000 --kinds flat hnsw
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import bm25s
import faiss
import numpy as np

import trishield.kb.indexes.dense as indexes
import trishield.kb.knowledge_base as knowledge_base
from trishield.config import data_dir
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import chunk_document
from trishield.kb.indexes.dense import DENSE_KINDS, IVF_NPROBE
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.store.fts import install, match_expression
from trishield.text import index_terms

DIMENSION = 384
CLUSTERS = 1000
K = 20
RECALL_K = 3
QUERIES = 200
INGESTS = 20
SEED = 19
RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"
DATA = data_dir()
"""The public data (SQuAD passages for the generated text): ``TRISHIELD_DATA_DIR``, else
``../shared/data``, as everywhere in TriShield (benchmarks/README.md)."""


def say(text: str = "") -> None:
    print(text, flush=True)


def percentiles(seconds: list[float]) -> dict[str, float]:
    values = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(values, 50)), 3),
            "p95_ms": round(float(np.percentile(values, 95)), 3)}


# -- 1. lexical recall on real QA sets -------------------------------------------------------
def squad(data: Path) -> tuple[list[str], list[tuple[str, int]]]:
    raw = json.loads((data / "squad" / "dev-v1.1.json").read_text())
    passages, questions = [], []
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            passages.append(paragraph["context"])
            questions += [(qa["question"], len(passages) - 1) for qa in paragraph["qas"]]
    return passages, questions


def nq_open(data: Path) -> tuple[list[str], list[tuple[str, int]]]:
    passages: dict[str, int] = {}
    questions = []
    with gzip.open(data / "nq_open" / "nq-open-oracle.jsonl.gz", "rt") as handle:
        for line in handle:
            row = json.loads(line)
            gold = next((c for c in row["ctxs"] if c.get("isgold")), None)
            if gold is None:
                continue
            text = f"{gold['title']}. {gold['text']}"
            questions.append((row["question"], passages.setdefault(text, len(passages))))
    return list(passages), questions


def bm25s_ranker(passages: list[str]):
    """Today's (pre-issue-19) lexical index: bm25s, Lucene BM25, over index_terms."""
    retriever = bm25s.BM25()
    retriever.index([index_terms(text) for text in passages], show_progress=False)

    def rank(question: str) -> list[int]:
        tokens = index_terms(question)
        if not tokens:
            return []
        scores = retriever.get_scores(tokens)
        top = np.argsort(-scores, kind="stable")[:RECALL_K]
        return [int(i) for i in top if scores[i] > 0]
    return rank


def fts5_ranker(passages: list[str], *, porter: bool):
    """FTS5 bm25 over the analyzer's terms (the KB's table), or over raw text with FTS5's
    own porter tokenizer."""
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    connection.execute("CREATE TABLE chunks (pk INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    if porter:
        connection.execute("CREATE VIRTUAL TABLE raw USING fts5(text, content='', "
                           "tokenize='porter unicode61')")
        connection.executemany("INSERT INTO raw(rowid, text) VALUES (?, ?)",
                               list(enumerate(passages, start=1)))

        def rank_raw(question: str) -> list[int]:
            words = re.findall(r"\w+", question.lower())
            if not words:
                return []
            rows = connection.execute(
                "SELECT rowid FROM raw WHERE raw MATCH ? ORDER BY bm25(raw), rowid LIMIT ?",
                (match_expression(words), RECALL_K))
            return [pk - 1 for (pk,) in rows]
        return rank_raw
    install(connection)
    connection.executemany("INSERT INTO chunks(pk, text) VALUES (?, ?)",
                           list(enumerate(passages, start=1)))
    index = LexicalIndex(connection)
    return lambda question: [pk - 1 for pk, _ in index.search(question, RECALL_K)]


def lexical_recall(data: Path) -> dict[str, dict[str, float]]:
    say("== 1. lexical recall@3 of the gold passage (real QA sets) ==")
    figures: dict[str, dict[str, float]] = {}
    for name, load in (("squad-dev", squad), ("nq-open-oracle", nq_open)):
        passages, questions = load(data)
        row: dict[str, float] = {"passages": len(passages), "questions": len(questions)}
        for label, make in (("bm25s (today)", bm25s_ranker),
                            ("fts5 analyzer (KB)", lambda p: fts5_ranker(p, porter=False)),
                            ("fts5 porter raw", lambda p: fts5_ranker(p, porter=True))):
            started = time.perf_counter()
            rank = make(passages)
            built = time.perf_counter() - started
            started = time.perf_counter()
            hits = sum(gold in rank(question) for question, gold in questions)
            row[label] = round(hits / len(questions), 4)
            row[f"{label} build_s"] = round(built, 2)
            row[f"{label} query_ms"] = round(
                (time.perf_counter() - started) / len(questions) * 1000, 3)
        figures[name] = row
        say(f"  {name}: {len(passages)} passages, {len(questions)} questions")
        for label in ("bm25s (today)", "fts5 analyzer (KB)", "fts5 porter raw"):
            say(f"    {label:<20} recall@3 {row[label]:.4f}   build {row[f'{label} build_s']}"
                f" s   query {row[f'{label} query_ms']} ms")
    return figures


# -- 2. synthetic KBs --------------------------------------------------------------------------
class Synthetic:
    """Seeded clustered unit vectors and generated text (SQuAD's word frequencies)."""

    def __init__(self, data: Path):
        rng = np.random.default_rng(SEED)
        self.centres = rng.standard_normal((CLUSTERS, DIMENSION)).astype(np.float32)
        self.centres /= np.linalg.norm(self.centres, axis=1, keepdims=True)
        passages, _ = squad(data)
        counts = Counter(word for text in passages for word in re.findall(r"[A-Za-z]+", text))
        self.words = np.array(list(counts))
        weights = np.array(list(counts.values()), dtype=np.float64)
        self.weights = weights / weights.sum()

    def vectors(self, count: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        noise = rng.standard_normal((count, DIMENSION)).astype(np.float32)
        vectors = self.centres[rng.integers(0, CLUSTERS, count)] + noise / np.sqrt(DIMENSION)
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    def texts(self, count: int, words: int, seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        drawn = rng.choice(self.words, size=(count, words), p=self.weights)
        return [" ".join(row) + f" (passage {seed}-{n})." for n, row in enumerate(drawn)]


def bulk_load(kb: KnowledgeBase, synthetic: Synthetic, rows: int) -> None:
    """Write ``rows`` one-chunk documents through the store's write path (FTS5 and change-log
    triggers included), 5,000 a transaction."""
    for start in range(0, rows, 5000):
        count = min(5000, rows - start)
        texts = synthetic.texts(count, 90, SEED + start)
        documents = [Document(id=f"s{start + n}", text=text) for n, text in enumerate(texts)]
        chunks = [chunk_document(document, kb.settings.chunking) for document in documents]
        assert all(len(per) == 1 for per in chunks)
        with kb.store.transaction() as connection:
            kb.store.write_batch(connection, documents=documents, chunks=chunks,
                                 embeddings=synthetic.vectors(count, SEED + start),
                                 tier="neutral", writer="bench", source="synthetic")


def ingest_one(kb: KnowledgeBase, synthetic: Synthetic, number: int) -> tuple[float, float]:
    """One three-chunk document the way ``ingest`` writes it (embedding and screening
    excluded): ``(commit seconds, index seconds)``."""
    text = synthetic.texts(1, 300, 10_000_000 + number)[0]
    document = Document(id=f"one-{number}", text=text)
    chunks = chunk_document(document, kb.settings.chunking)
    vectors = synthetic.vectors(len(chunks), 10_000_000 + number)
    with kb._lock.hold():
        started = time.perf_counter()
        with kb.store.transaction() as connection:
            kb.store.write_batch(connection, documents=[document], chunks=[chunks],
                                 embeddings=vectors, tier="neutral", writer="bench",
                                 source="synthetic")
        committed = time.perf_counter()
        warnings = kb._after_commit()
        done = time.perf_counter()
    assert not warnings, warnings
    return committed - started, done - committed


def set_kind(directory: Path, kind: str) -> None:
    """Switch a benchmark KB's dense index kind (its rows stay; the index is rebuilt)."""
    with KnowledgeBase.open(directory) as kb, kb.store.transaction() as connection:
        kb.store.set_meta({"dense_index": kind}, connection)
    for path in directory.glob("*-s*.*"):
        path.unlink()


def exact_top(ids: np.ndarray, vectors: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    flat = faiss.IndexFlatIP(DIMENSION)
    flat.add(vectors)
    _, found = flat.search(queries, K)
    return [set(ids[row].tolist()) for row in found]


def measure_kind(directory: Path, kind: str, synthetic: Synthetic,
                 queries: np.ndarray) -> dict[str, object]:
    set_kind(directory, kind)
    with KnowledgeBase.open(directory) as kb:
        started = time.perf_counter()
        kb.repair()  # full rebuild from SQLite + snapshot: what every write used to cost
        rebuild = time.perf_counter() - started
        truth = exact_top(*kb.store.all_embeddings(kb.dimension), queries)
        backend = kb._dense_indexes.backend
        dense = backend.dense_index
        started = time.perf_counter()
        kb._dense_indexes.save(backend.position, dense)
        snapshot = time.perf_counter() - started
        memory = dense.memory_bytes()
        figures: dict[str, object] = {
            "rows": len(dense), "rebuild_s": round(rebuild, 3),
            "snapshot_s": round(snapshot, 3), "memory_mb": round(memory / 2 ** 20, 1),
            "memory_per_million_gb": round(memory / len(dense) * 1e6 / 2 ** 30, 3),
            "trained_ivfpq": dense.trained}
        default_threads = faiss.omp_get_max_threads()
        for threads in (1, default_threads):
            indexes.SINGLE_QUERY_THREADS = threads
            times, recalls = [], []
            for query, expected in zip(queries, truth, strict=True):
                started = time.perf_counter()
                found = backend.dense(query, K)
                times.append(time.perf_counter() - started)
                recalls.append(len({pk for pk, _ in found} & expected) / K)
            figures[f"search_threads_{threads}"] = percentiles(times)
            figures["recall_at_20"] = round(float(np.mean(recalls)), 4)
        # an exact index builds its half-precision copy after its first scans (indexes.py)
        figures["memory_searched_mb"] = round(dense.memory_bytes() / 2 ** 20, 1)
        if dense.trained:  # the codes alone, without the exact re-scoring
            codes = [len({pk for pk, _ in dense.search(q, K)} & e) / K
                     for q, e in zip(queries, truth, strict=True)]
            figures["recall_at_20_codes_only"] = round(float(np.mean(codes)), 4)
        indexes.SINGLE_QUERY_THREADS = 1
        commits, indexing = [], []
        for number in range(INGESTS):
            commit, index = ingest_one(kb, synthetic, number + 1000 * DENSE_KINDS.index(kind))
            commits.append(commit)
            indexing.append(index)
        figures["ingest_commit"] = percentiles(commits)
        figures["ingest_index"] = percentiles(indexing)
        figures["ingest_total"] = percentiles([a + b for a, b in zip(commits, indexing,
                                                                     strict=True)])
    return figures


def measure_size(work: Path, rows: int, kinds: list[str], synthetic: Synthetic,
                 data_queries: list[str]) -> dict[str, object]:
    directory = work / f"kb-{rows}"
    shutil.rmtree(directory, ignore_errors=True)
    started = time.perf_counter()
    with KnowledgeBase.open(directory, create=True) as kb:
        bulk_load(kb, synthetic, rows)
    say(f"  {rows} rows written through the store (FTS5 + log triggers) in "
        f"{time.perf_counter() - started:.1f} s")
    with KnowledgeBase.open(directory) as kb:
        lexical = LexicalIndex(kb.store.connection)
        times = []
        for query in data_queries:
            started = time.perf_counter()
            lexical.search(query, K)
            times.append(time.perf_counter() - started)
    figures: dict[str, object] = {"lexical_search": percentiles(times)}
    queries = synthetic.vectors(QUERIES, SEED + 99)
    for kind in kinds:
        figures[kind] = measure_kind(directory, kind, synthetic, queries)
        row = figures[kind]
        say(f"  {kind:<6} rebuild {row['rebuild_s']:>8} s  snapshot {row['snapshot_s']:>6} s  "
            f"memory {row['memory_mb']:>8} MB ({row['memory_per_million_gb']} GB/M; "
            f"{row['memory_searched_mb']} MB once searched)  "
            f"recall@20 {row['recall_at_20']}"
            + (f" (codes only {row['recall_at_20_codes_only']})"
               if "recall_at_20_codes_only" in row else ""))
        one, default = row["search_threads_1"], row[f"search_threads_{faiss.omp_get_max_threads()}"]
        say(f"         search k=20 p50/p95 {one['p50_ms']}/{one['p95_ms']} ms (1 thread), "
            f"{default['p50_ms']}/{default['p95_ms']} ms ({faiss.omp_get_max_threads()} threads)")
        say(f"         ingest one document: commit {row['ingest_commit']['p50_ms']}/"
            f"{row['ingest_commit']['p95_ms']} ms + dense {row['ingest_index']['p50_ms']}/"
            f"{row['ingest_index']['p95_ms']} ms = {row['ingest_total']['p50_ms']}/"
            f"{row['ingest_total']['p95_ms']} ms (p50/p95)")
    lexical_figure = figures["lexical_search"]
    say(f"  lexical (FTS5 bm25) search k=20 p50/p95 {lexical_figure['p50_ms']}/"
        f"{lexical_figure['p95_ms']} ms")
    shutil.rmtree(directory, ignore_errors=True)
    return figures


def index_only(rows: int, kinds: list[str], synthetic: Synthetic) -> dict[str, object]:
    """The dense index alone at ``rows`` rows (no KB, no SQLite: a million rows written
    through the store take most of an hour on two cores): build, memory, single-query
    search p50/p95 and recall@20 against exact search. IVF-PQ re-scores its candidates with
    the exact vectors from memory here (the KB reads them from SQLite)."""
    from trishield.kb.indexes.dense import DenseIndex

    vectors = np.concatenate([synthetic.vectors(min(100_000, rows - start), SEED + start)
                              for start in range(0, rows, 100_000)])
    ids = np.arange(1, rows + 1, dtype=np.int64)
    queries = synthetic.vectors(QUERIES, SEED + 99)
    truth = exact_top(ids, vectors, queries)
    figures: dict[str, object] = {}
    for kind in kinds:
        started = time.perf_counter()
        dense = DenseIndex.build(kind, DIMENSION, ids, vectors)
        built = time.perf_counter() - started
        memory = dense.memory_bytes()
        row: dict[str, object] = {"build_s": round(built, 1),
                                  "memory_mb": round(memory / 2 ** 20, 1),
                                  "memory_per_million_gb": round(memory / rows * 1e6 / 2 ** 30, 3)}
        exact = (lambda found: vectors[found - 1]) if dense.trained else None
        times, recalls = timed_searches(dense, queries, truth, exact)
        row["search_threads_1"] = percentiles(times)
        row["recall_at_20"] = round(float(np.mean(recalls)), 4)
        row["memory_searched_mb"] = round(dense.memory_bytes() / 2 ** 20, 1)
        if dense.trained:
            row["sweep"] = rescoring_sweep(dense, queries, truth, exact)
        figures[kind] = row
        say(f"  {kind:<6} build {row['build_s']} s  memory {row['memory_mb']} MB "
            f"({row['memory_per_million_gb']} GB/M; {row['memory_searched_mb']} MB once "
            "searched)  search k=20 p50/p95 "
            f"{row['search_threads_1']['p50_ms']}/{row['search_threads_1']['p95_ms']} ms  "
            f"recall@20 {row['recall_at_20']}")
        del dense
    return figures


def timed_searches(dense, queries: np.ndarray, truth: list[set[int]],
                   exact) -> tuple[list[float], list[float]]:
    """Each query's k=20 search time and its recall@20 against the exact neighbours."""
    times, recalls = [], []
    for query, expected in zip(queries, truth, strict=True):
        started = time.perf_counter()
        found = dense.search(query, K, exact=exact)
        times.append(time.perf_counter() - started)
        recalls.append(len({pk for pk, _ in found} & expected) / K)
    return times, recalls


def rescoring_sweep(dense, queries: np.ndarray, truth: list[set[int]],
                    exact) -> dict[str, object]:
    """Recall@20 and latency of one trained IVF-PQ index at each nprobe and re-scoring depth
    (how the defaults were chosen)."""
    saved = indexes.IVF_NPROBE, indexes.IVF_RERANK
    sweep: dict[str, object] = {}
    try:
        for nprobe in (32, 64):
            for rerank in (8, 16, 24, 32):
                indexes.IVF_NPROBE, indexes.IVF_RERANK = nprobe, rerank
                times, recalls = timed_searches(dense, queries, truth, exact)
                key = f"nprobe {nprobe}, re-score {rerank} x k"
                sweep[key] = {"recall_at_20": round(float(np.mean(recalls)), 4),
                              **percentiles(times)}
                say(f"         {key}: recall@20 {sweep[key]['recall_at_20']}  p50/p95 "
                    f"{sweep[key]['p50_ms']}/{sweep[key]['p95_ms']} ms")
    finally:
        indexes.IVF_NPROBE, indexes.IVF_RERANK = saved
    return sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="also 1,000,000 chunks")
    parser.add_argument("--kinds", nargs="+", default=list(DENSE_KINDS), choices=DENSE_KINDS)
    parser.add_argument("--index-only", type=int, nargs="*", default=[],
                        help="dense-index-only figures (no KB) at these sizes, e.g. 1000000")
    parser.add_argument("--skip-recall", action="store_true",
                        help="skip the lexical recall comparison (section 1)")
    parser.add_argument("--work", type=Path, help="where the benchmark KBs are written")
    parser.add_argument("--data", type=Path, default=DATA)
    arguments = parser.parse_args()
    sizes = arguments.sizes + ([1_000_000] if arguments.million else [])
    say(f"TriShield scale benchmark: python {platform.python_version()}, faiss "
        f"{faiss.__version__}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"faiss threads {faiss.omp_get_max_threads()}, ivfpq nprobe {IVF_NPROBE}")
    say(f"  command: {' '.join(sys.argv)}")
    results: dict[str, object] = {"command": sys.argv, "cpus": os.cpu_count()}
    if not arguments.skip_recall:
        results["lexical_recall_at_3"] = lexical_recall(arguments.data)
    say("== 2. synthetic KBs: clustered normalised vectors + generated text; embedding "
        "excluded (index figures only) ==")
    synthetic = Synthetic(arguments.data)
    queries = [" ".join(text.split()[:4]) for text in synthetic.texts(QUERIES, 4, SEED + 7)]
    work = Path(tempfile.mkdtemp(prefix="scale-", dir=arguments.work))
    per_size: dict[str, object] = {}
    try:
        for rows in sizes:
            say(f"-- {rows} chunks --")
            per_size[str(rows)] = measure_size(work, rows, arguments.kinds, synthetic, queries)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["sizes"] = per_size
    for rows in arguments.index_only:
        say(f"-- {rows} rows, dense index only (no KB; synthetic vectors) --")
        results.setdefault("index_only", {})[str(rows)] = index_only(rows, arguments.kinds,
                                                                      synthetic)
    if "1000" in per_size and "100000" in per_size:
        say("== one-document ingest, 100k vs 1k chunks (p50 of commit + dense) ==")
        for kind in arguments.kinds:
            small = per_size["1000"][kind]["ingest_total"]["p50_ms"]
            large = per_size["100000"][kind]["ingest_total"]["p50_ms"]
            say(f"  {kind:<6} {small} ms -> {large} ms  (x{large / small:.2f})")
            small = per_size["1000"][kind]["ingest_commit"]["p50_ms"]
            large = per_size["100000"][kind]["ingest_commit"]["p50_ms"]
            say(f"  lexical+rows commit ({kind} run) {small} ms -> {large} ms  "
                f"(x{large / small:.2f})")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    say(f"written to {RESULTS}")


if __name__ == "__main__":
    knowledge_base.log.setLevel("ERROR")
    main()
