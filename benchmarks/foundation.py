"""Foundation benchmark: ingest throughput, retrieval latency and gold-passage recall on wiki5k.

Measures, in one run (see benchmarks/README.md):

1. ingest throughput of all-MiniLM-L6-v2 and all-mpnet-base-v2 on the same seeded sample of
   wiki5k passages, each into a fresh temporary KB (model load time excluded);
2. the full wiki5k KB with MiniLM at ``--kb-dir`` (built, or reused when it already holds the
   5,000 wiki5k passages);
3. retrieval latency p50/p95 per backend (dense, bm25, hybrid; k=5, ``kb.search`` end to end),
   plus dense search over a FAISS HNSW index built in memory from the KB's stored embeddings,
   and the recall@3 of HNSW against exact (flat) search;
4. recall@3 of the gold passage per backend for seeded samples of NQ-open and SQuAD dev
   questions.

It prints figures, never pass/fail, and writes the same figures to
``benchmarks/results/foundation.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from trishield.kb import BACKENDS, Document, KnowledgeBase
from trishield.kb.datasets import DATASETS, WIKI5K_SIZE, wiki5k_documents
from trishield.kb.indexes.dense import DenseIndex
from trishield.models import install, load_embedder
from trishield.models.embedders import MPNET_ARTIFACT, get_embedding_model

MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
LATENCY_K = 5
RECALL_K = 3
WARMUP_QUERIES = 20
RESULTS = Path(__file__).resolve().parent / "results" / "foundation.json"


@dataclass(frozen=True)
class Question:
    dataset: str
    number: str  # line (NQ-open) or title:paragraph:question (SQuAD) in the source file
    text: str
    gold_id: str  # the id the gold passage actually has in the KB (after content-hash dedupe)
    source_gold_id: str  # the id the gold passage has in its own data set


def say(text: str = "") -> None:
    print(text, flush=True)


def percentile_ms(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(seconds) * 1000.0, q)), 3)


def latency_summary(seconds: list[float]) -> dict[str, float]:
    return {"queries": len(seconds), "p50_ms": percentile_ms(seconds, 50),
            "p95_ms": percentile_ms(seconds, 95),
            "mean_ms": round(float(np.mean(seconds)) * 1000.0, 3)}


def reproduce_command(args: argparse.Namespace) -> str:
    python = sys.executable
    if Path(python).is_relative_to(Path.cwd()):
        python = os.path.relpath(python)
    parts = [python, "benchmarks/foundation.py", "--kb-dir", str(args.kb_dir),
             "--questions", str(args.questions), "--seed", str(args.seed),
             "--mpnet-sample", str(args.mpnet_sample)]
    if args.skip_mpnet:
        parts.append("--skip-mpnet")
    return f"cd {shlex.quote(os.getcwd())} && HF_HUB_OFFLINE=1 {shlex.join(parts)}"


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def environment() -> dict[str, object]:
    import torch

    versions = {}
    for package in ("torch", "sentence-transformers", "faiss-cpu", "bm25s", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus_usable": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
            "versions": versions}


# -- 1. ingest throughput per model -------------------------------------------------------------
def sample_ingest(model: str, documents: list[Document]) -> dict[str, object]:
    """Ingest ``documents`` into a fresh temporary KB with ``model``; the model is loaded first."""
    load_started = time.perf_counter()
    embedder = load_embedder(model)
    embedder.encode(["warm-up"])  # first call pays one-off lazy initialisation
    load_seconds = time.perf_counter() - load_started
    with tempfile.TemporaryDirectory(prefix="trishield-bench-") as scratch:
        kb = KnowledgeBase.open(Path(scratch) / "kb", create=True, embedding_model=model)
        try:
            cpu_started = time.process_time()
            report = kb.ingest(documents, tier="neutral", writer="bench")
            cpu_seconds = time.process_time() - cpu_started
        finally:
            kb.close()
    return ingest_figures(report, cpu_seconds) | {"model": model, "model_load_seconds_excluded":
                                     round(load_seconds, 3)}


def ingest_figures(report, cpu_seconds: float) -> dict[str, object]:
    documents = len(report.added)
    return {"documents": documents, "duplicates": len(report.duplicates),
            "chunks": report.chunks_added, "seconds": round(report.seconds, 3),
            "embed_seconds": round(report.embed_seconds, 3),
            "documents_per_second": round(documents / report.seconds, 2),
            "chunks_per_second": round(report.chunks_added / report.seconds, 2),
            "embed_share": round(report.embed_seconds / report.seconds, 4),
            "cpu_per_wall": round(cpu_seconds / report.seconds, 2)}


# -- 2. the full wiki5k KB -------------------------------------------------------------------------
def open_wiki5k(kb_dir: Path, documents: list[Document]) -> tuple[KnowledgeBase, dict]:
    kb = KnowledgeBase.open(kb_dir, create=True, embedding_model=MINILM, dense_index="flat")
    _, present = kb.store.existing([], [d.content_hash for d in documents])
    count = kb.store.counts()["documents"]
    if count == WIKI5K_SIZE and len(present) == WIKI5K_SIZE:
        return kb, {"built_in_this_run": False, "documents": count,
                    "chunks": kb.store.counts()["chunks"]}
    say(f"  building wiki5k at {kb_dir} (holds {count} documents now) ...")
    cpu_started = time.process_time()
    report = kb.ingest(documents, tier="neutral", writer="wiki5k", progress=True)
    cpu_seconds = time.process_time() - cpu_started
    counts = kb.store.counts()
    if counts["documents"] != WIKI5K_SIZE:
        say(f"  NOTE: {kb_dir} holds {counts['documents']} documents, not {WIKI5K_SIZE}: "
            "it had other content before; figures below are for that KB")
    return kb, {"built_in_this_run": True, "documents": counts["documents"],
                "chunks": counts["chunks"], "ingest": ingest_figures(report, cpu_seconds)}


# -- questions -------------------------------------------------------------------------------------
def nq_open_questions(kb: KnowledgeBase) -> tuple[list[Question], int]:
    """Every NQ-open question whose gold passage (``nq-open:i``) is in the KB, by content hash."""
    gold = {d.id: d.content_hash for d in DATASETS["nq-open"].documents()}
    in_kb = kb.store.existing([], list(gold.values()))[1]
    questions: list[Question] = []
    total = 0
    with gzip.open(DATASETS["nq-open"].verified_path(), "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            total += 1
            source_id = f"nq-open:{number}"
            stored = in_kb.get(gold[source_id])
            if stored is not None:
                questions.append(Question("nq-open", str(number), json.loads(line)["question"],
                                          stored, source_id))
    return questions, total


def squad_questions(kb: KnowledgeBase) -> tuple[list[Question], int]:
    """Every SQuAD dev question whose paragraph (``squad-dev:T:p``) is in the KB."""
    gold = {d.id: d.content_hash for d in DATASETS["squad-dev"].documents()}
    in_kb = kb.store.existing([], list(gold.values()))[1]
    with DATASETS["squad-dev"].verified_path().open("rb") as handle:
        articles = json.load(handle)["data"]
    questions: list[Question] = []
    total = 0
    for article in articles:
        title = article.get("title", "") or "untitled"
        for paragraph_number, paragraph in enumerate(article["paragraphs"]):
            source_id = f"squad-dev:{title}:{paragraph_number}"
            stored = in_kb.get(gold[source_id])
            for qa in paragraph["qas"]:
                total += 1
                if stored is not None:
                    questions.append(Question(
                        "squad-dev", f"{title}:{paragraph_number}:{qa['id']}", qa["question"],
                        stored, source_id))
    return questions, total


def sample(questions: list[Question], n: int, seed: int, name: str) -> list[Question]:
    return random.Random(f"{seed}:{name}").sample(questions, min(n, len(questions)))


# -- 3. latency -----------------------------------------------------------------------------------
def search_latency(kb: KnowledgeBase, questions: list[Question]) -> dict[str, dict]:
    """``kb.search`` per backend. Backends are interleaved per question (rotating order), so a
    burst of load from other processes hits every backend alike instead of one of them."""
    for backend in BACKENDS:
        for question in questions[:WARMUP_QUERIES]:
            kb.search(question.text, backend=backend, k=LATENCY_K)
    seconds: dict[str, list[float]] = {backend: [] for backend in BACKENDS}
    cpu: dict[str, float] = dict.fromkeys(BACKENDS, 0.0)
    for number, question in enumerate(questions):
        shift = number % len(BACKENDS)
        for backend in BACKENDS[shift:] + BACKENDS[:shift]:
            cpu_started, started = time.process_time(), time.perf_counter()
            kb.search(question.text, backend=backend, k=LATENCY_K)
            seconds[backend].append(time.perf_counter() - started)
            cpu[backend] += time.process_time() - cpu_started
    return {backend: latency_summary(seconds[backend])
            | {"cpu_per_wall": round(cpu[backend] / sum(seconds[backend]), 2)}
            for backend in BACKENDS}


def hnsw_comparison(kb: KnowledgeBase, questions: list[Question]) -> dict[str, object]:
    """Dense search over an in-memory HNSW index vs the KB's flat index, on the same vectors.

    Per question the query is embedded once (timed) and both indexes are searched with that
    vector (each timed, order alternating); embed+index = that embedding time + the index time.
    """
    embedder = kb.embedder
    flat, _ = kb.indexes()
    ids, vectors = kb.store.all_embeddings(kb.dimension)
    started = time.perf_counter()
    hnsw = DenseIndex("hnsw", kb.dimension)
    hnsw.add(ids, vectors)
    build_seconds = time.perf_counter() - started
    indexes = {"flat": flat, "hnsw": hnsw}

    for question in questions[:WARMUP_QUERIES]:
        vector = embedder.encode([question.text])[0]
        for index in indexes.values():
            index.search(vector, LATENCY_K)
    embed_seconds: list[float] = []
    index_seconds: dict[str, list[float]] = {name: [] for name in indexes}
    tops: dict[str, list[list[int]]] = {name: [] for name in indexes}
    for number, question in enumerate(questions):
        started = time.perf_counter()
        vector = embedder.encode([question.text])[0]
        embed_seconds.append(time.perf_counter() - started)
        for name in (("flat", "hnsw") if number % 2 == 0 else ("hnsw", "flat")):
            started = time.perf_counter()
            found = indexes[name].search(vector, LATENCY_K)
            index_seconds[name].append(time.perf_counter() - started)
            # top-3 of a k=5 search is the k=3 search: flat is exact, and HNSW's efSearch is
            # max(128, k), the same for both
            tops[name].append([pk for pk, _ in found[:RECALL_K]])

    overlap = [len(set(h) & set(f)) / max(1, len(f))
               for h, f in zip(tops["hnsw"], tops["flat"], strict=True)]
    gold_hits = dict.fromkeys(indexes, 0)
    for name in indexes:
        for question, pks in zip(questions, tops[name], strict=True):
            chunks = kb.store.chunks_by_pk(pks)
            gold_hits[name] += any(chunks[pk].doc_id == question.gold_id for pk in pks)
    figures: dict[str, object] = {"vectors": len(hnsw), "build_seconds": round(build_seconds, 3),
                                  "query_embedding": latency_summary(embed_seconds)}
    for name in indexes:
        figures[f"{name}_index_only"] = latency_summary(index_seconds[name])
        figures[f"{name}_index_plus_embed"] = latency_summary(
            [e + i for e, i in zip(embed_seconds, index_seconds[name], strict=True)])
    return figures | {
        "hnsw_recall_at_3_vs_flat": round(float(np.mean(overlap)), 4),
        "gold_recall_at_3": {name: round(hits / len(questions), 4)
                             for name, hits in gold_hits.items()}}


# -- 4. gold-passage recall ----------------------------------------------------------------------
def gold_recall(kb: KnowledgeBase, questions: list[Question]) -> dict[str, object]:
    hits = {backend: 0 for backend in BACKENDS}
    for question in questions:
        for backend in BACKENDS:
            candidates = kb.search(question.text, backend=backend, k=RECALL_K)
            hits[backend] += any(c.doc_id == question.gold_id for c in candidates)
    return {backend: round(hits[backend] / len(questions), 4) if questions else None
            for backend in BACKENDS} | {"questions": len(questions)}


# -- output --------------------------------------------------------------------------------------
def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join("  " + line.rstrip() for line in lines)


def summary(results: dict) -> str:
    out = []
    ingest = results["ingest_sample"]
    rows = [["ingest", "docs", "chunks", "seconds", "docs/s", "chunks/s", "embed share",
             "cpu/wall"]]
    for model, figures in ingest["models"].items():
        rows.append([f"{model} (sample)", str(figures["documents"]), str(figures["chunks"]),
                     f"{figures['seconds']:.2f}", f"{figures['documents_per_second']:.1f}",
                     f"{figures['chunks_per_second']:.1f}", f"{figures['embed_share']:.1%}",
                     f"{figures['cpu_per_wall']:.2f}"])
    wiki = results["wiki5k_kb"]
    if wiki.get("ingest"):
        figures = wiki["ingest"]
        rows.append([f"{MINILM} (wiki5k)", str(figures["documents"]), str(figures["chunks"]),
                     f"{figures['seconds']:.2f}", f"{figures['documents_per_second']:.1f}",
                     f"{figures['chunks_per_second']:.1f}", f"{figures['embed_share']:.1%}",
                     f"{figures['cpu_per_wall']:.2f}"])
    out.append(table(rows))
    ratio = ingest.get("minilm_over_mpnet_docs_per_second")
    out.append(f"  minilm/mpnet docs/s ratio: {ratio if ratio is not None else 'n/a (skipped)'}")
    if not wiki.get("ingest"):
        out.append(f"  wiki5k KB reused ({wiki['documents']} docs, {wiki['chunks']} chunks): "
                   "no ingest figures this run")
    out.append("")
    rows = [["retrieval", "p50 ms", "p95 ms", "mean ms", "R@3 nq-open", "R@3 squad-dev"]]
    recall = results["gold_recall_at_3"]
    for backend in BACKENDS:
        lat = results["latency_k5"][backend]
        rows.append([f"{backend} (kb.search)", f"{lat['p50_ms']:.3f}", f"{lat['p95_ms']:.3f}",
                     f"{lat['mean_ms']:.3f}", f"{recall['nq-open'][backend]:.3f}",
                     f"{recall['squad-dev'][backend]:.3f}"])
    hnsw = results["hnsw"]
    for label, key in (("query embedding only", "query_embedding"),
                       ("dense-flat (embed+index)", "flat_index_plus_embed"),
                       ("dense-hnsw (embed+index)", "hnsw_index_plus_embed"),
                       ("flat index only", "flat_index_only"),
                       ("hnsw index only", "hnsw_index_only")):
        lat = hnsw[key]
        rows.append([label, f"{lat['p50_ms']:.3f}", f"{lat['p95_ms']:.3f}",
                     f"{lat['mean_ms']:.3f}", "", ""])
    out.append(table(rows))
    out.append(f"  hnsw recall@3 vs flat: {hnsw['hnsw_recall_at_3_vs_flat']:.4f}; gold R@3 over "
               f"all questions: flat {hnsw['gold_recall_at_3']['flat']:.3f}, "
               f"hnsw {hnsw['gold_recall_at_3']['hnsw']:.3f}; hnsw build "
               f"{hnsw['build_seconds']:.2f} s for {hnsw['vectors']} vectors")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kb-dir", type=Path, default=Path(".trishield/bench/wiki5k-minilm"),
                        help="the wiki5k MiniLM KB: built here, or reused if complete "
                             "(relative to the current directory)")
    parser.add_argument("--questions", type=int, default=300,
                        help="questions sampled per data set (NQ-open, SQuAD dev)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every sample")
    parser.add_argument("--mpnet-sample", type=int, default=300,
                        help="wiki5k passages ingested by each model for the throughput test")
    parser.add_argument("--skip-mpnet", action="store_true",
                        help="measure MiniLM only (no mpnet install or ingest)")
    args = parser.parse_args()
    run_started = time.perf_counter()
    command = reproduce_command(args)
    say("TriShield foundation benchmark")
    say(f"reproduce: {command}")
    env = environment()
    say(f"environment: python {env['python']}, {env['cpus_usable']} usable CPUs, torch "
        f"{env['versions']['torch']} with {env['torch_threads']} threads, {env['platform']}")
    results: dict[str, object] = {"command": command, "arguments": {
        "kb_dir": str(args.kb_dir), "questions": args.questions, "seed": args.seed,
        "mpnet_sample": args.mpnet_sample, "skip_mpnet": args.skip_mpnet}, "environment": env}

    loads = {"start": load_average()}
    results["load_average_1min"] = loads
    documents = wiki5k_documents()
    # 1. ingest throughput per model, same seeded sample
    passages = random.Random(f"{args.seed}:ingest-sample").sample(
        documents, min(args.mpnet_sample, len(documents)))
    say(f"\n[1] ingest throughput: {len(passages)} wiki5k passages (seeded sample), each model "
        "into a fresh temporary KB. Model load + a one-sentence warm-up happen BEFORE timing "
        "and are excluded; seconds = IngestReport.seconds (chunk + embed + SQLite commit + "
        "index build/write).")
    models = [MINILM] if args.skip_mpnet else [MINILM, MPNET]
    mpnet_install_seconds = None
    if not args.skip_mpnet:
        started = time.perf_counter()
        install(MPNET_ARTIFACT)  # a no-op once cached
        mpnet_install_seconds = round(time.perf_counter() - started, 3)
        say(f"  {MPNET} install/check: {mpnet_install_seconds:.1f} s (not part of any figure)")
    ingest_models = {}
    for model in models:
        figures = sample_ingest(model, passages)
        ingest_models[model] = figures
        say(f"  {model:<18} dim {get_embedding_model(model).dimension}: "
            f"{figures['documents']} docs / {figures['chunks']} chunks in "
            f"{figures['seconds']:.2f} s -> {figures['documents_per_second']:.1f} docs/s, "
            f"{figures['chunks_per_second']:.1f} chunks/s, embedding "
            f"{figures['embed_share']:.1%} of the time, cpu/wall {figures['cpu_per_wall']:.2f} "
            f"(load excluded: {figures['model_load_seconds_excluded']:.1f} s)")
    ratio = None
    if MPNET in ingest_models:
        ratio = round(ingest_models[MINILM]["documents_per_second"]
                      / ingest_models[MPNET]["documents_per_second"], 2)
        say(f"  minilm/mpnet docs/s ratio: {ratio}")
    results["ingest_sample"] = {"passages": len(passages), "models": ingest_models,
                                "minilm_over_mpnet_docs_per_second": ratio,
                                "mpnet_install_seconds": mpnet_install_seconds,
                                "model_load_excluded": True}

    loads["after_ingest_sample"] = load_average()
    # 2. full wiki5k KB
    say(f"\n[2] wiki5k KB with {MINILM} at {args.kb_dir}")
    kb, wiki = open_wiki5k(args.kb_dir, documents)
    results["wiki5k_kb"] = wiki
    if wiki["built_in_this_run"]:
        figures = wiki["ingest"]
        say(f"  built: {figures['documents']} docs / {figures['chunks']} chunks in "
            f"{figures['seconds']:.1f} s -> {figures['documents_per_second']:.1f} docs/s, "
            f"{figures['chunks_per_second']:.1f} chunks/s, embedding "
            f"{figures['embed_share']:.1%} of the time, cpu/wall {figures['cpu_per_wall']:.2f}")
    else:
        say(f"  reused: {wiki['documents']} docs / {wiki['chunks']} chunks (no ingest timing)")
    kb.indexes()  # load (or rebuild) the indexes before anything is timed
    loads["after_wiki5k"] = load_average()

    # questions
    nq_all, nq_total = nq_open_questions(kb)
    squad_all, squad_total = squad_questions(kb)
    nq = sample(nq_all, args.questions, args.seed, "nq-open")
    squad = sample(squad_all, args.questions, args.seed, "squad-dev")
    remapped = {"nq-open": sum(q.gold_id != q.source_gold_id for q in nq),
                "squad-dev": sum(q.gold_id != q.source_gold_id for q in squad)}
    results["questions"] = {
        "nq-open": {"total": nq_total, "eligible": len(nq_all), "sampled": len(nq),
                    "sampled_gold_stored_under_other_id": remapped["nq-open"]},
        "squad-dev": {"total": squad_total, "eligible": len(squad_all), "sampled": len(squad),
                      "sampled_gold_stored_under_other_id": remapped["squad-dev"]}}
    say(f"  questions: nq-open {len(nq_all)}/{nq_total} eligible (gold passage in the KB), "
        f"sampled {len(nq)} ({remapped['nq-open']} gold stored under another id after dedupe); "
        f"squad-dev {len(squad_all)}/{squad_total} eligible, sampled {len(squad)} "
        f"({remapped['squad-dev']} remapped)")
    questions = nq + squad

    # 3. latency
    say(f"\n[3] retrieval latency, k={LATENCY_K}, {len(questions)} questions (nq-open + "
        f"squad-dev), {WARMUP_QUERIES} warm-up queries per backend; kb.search end to end "
        "(query embedding, index search, SQLite chunk fetch); backends interleaved per question")
    results["latency_k5"] = search_latency(kb, questions)
    for backend, figures in results["latency_k5"].items():
        say(f"  {backend:<7} p50 {figures['p50_ms']:.2f} ms  p95 {figures['p95_ms']:.2f} ms  "
            f"mean {figures['mean_ms']:.2f} ms  cpu/wall {figures['cpu_per_wall']:.2f}")
    say("  dense with HNSW: DenseIndex('hnsw') built in memory from the KB's stored embeddings; "
        "each query embedded once, then the flat and HNSW indexes searched with that vector "
        "(k=5); embed+index = embedding time + index time (no SQLite fetch)")
    results["hnsw"] = hnsw_comparison(kb, questions)
    hnsw = results["hnsw"]
    for label, key in (("query embedding", "query_embedding"),
                       ("dense-flat embed+index", "flat_index_plus_embed"),
                       ("dense-hnsw embed+index", "hnsw_index_plus_embed"),
                       ("flat index only", "flat_index_only"),
                       ("hnsw index only", "hnsw_index_only")):
        figures = hnsw[key]
        say(f"  {label:<22} p50 {figures['p50_ms']:.3f} ms  p95 {figures['p95_ms']:.3f} ms  "
            f"mean {figures['mean_ms']:.3f} ms")
    say(f"  hnsw: built in {hnsw['build_seconds']:.2f} s over {hnsw['vectors']} vectors; "
        f"recall@3 vs flat {hnsw['hnsw_recall_at_3_vs_flat']:.4f}; gold R@3 flat "
        f"{hnsw['gold_recall_at_3']['flat']:.3f} / hnsw {hnsw['gold_recall_at_3']['hnsw']:.3f}")

    # 4. gold recall
    say(f"\n[4] recall@{RECALL_K} of the gold passage (hit: a top-{RECALL_K} candidate's doc_id "
        "is the gold passage's id in the KB)")
    results["gold_recall_at_3"] = {"nq-open": gold_recall(kb, nq),
                                   "squad-dev": gold_recall(kb, squad)}
    for name, figures in results["gold_recall_at_3"].items():
        say(f"  {name:<9} ({figures['questions']} q): " + "  ".join(
            f"{backend} {figures[backend]:.3f}" for backend in BACKENDS))
    kb.close()

    loads["end"] = load_average()
    results["load_average_1min"] = loads
    results["total_seconds"] = round(time.perf_counter() - run_started, 1)
    results["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    say("\n=== summary ===")
    say(summary(results))
    say(f"  1-min load average at start / after [1] / after [2] / end: "
        f"{' / '.join(str(value) for value in loads.values())} on "
        f"{env['cpus_usable']} usable CPUs. cpu/wall = this process's CPU seconds per wall "
        f"second (about {env['torch_threads']} when it has the CPUs to itself); load above "
        "the CPU count or a low cpu/wall means other processes competed and the timings are "
        "pessimistic.")
    say(f"\ntotal {results['total_seconds']:.1f} s; figures written to {RESULTS}")
    say(f"reproduce: {command}")


if __name__ == "__main__":
    main()
