"""Do two embedding models retrieve alike? Recall@5 on SQuAD dev and NQ-open, and cosine.

For seeded samples of SQuAD dev and NQ-open questions, the corpus is their gold passages plus
seeded wiki5k distractors (deduplicated by content hash). Every passage and question is
embedded by each model; a question's hit is its gold passage among the top 5 by exact
cosine (a flat index's search). Printed per model: recall@5 per data set, the encode rate
(passages/s wall and per CPU-second, the models' slices interleaved so that load from other
processes hits both alike) and the load time; and per passage the cosine between the two
models' vectors (mean, 1st percentile, minimum). With the 1-minute load average.

    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/encoder_recall.py
    ... --questions 300 --distractors 3000      # larger; about 4x longer

The default run embeds about 1,300 passages twice (about 5 minutes on 2 idle cores).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import time
from dataclasses import dataclass

import numpy as np

from trishield.kb.datasets import DATASETS, wiki5k_documents
from trishield.models.embedders import load_embedder

SLICE = 128
"""Passages per timed slice; the models' slices alternate."""


@dataclass(frozen=True)
class Question:
    dataset: str
    text: str
    gold_hash: str


def squad(n: int, seed: int) -> list[Question]:
    hashes = {d.id: d.content_hash for d in DATASETS["squad-dev"].documents()}
    with DATASETS["squad-dev"].verified_path().open("rb") as handle:
        articles = json.load(handle)["data"]
    questions = [Question("squad-dev", qa["question"],
                          hashes[f"squad-dev:{article.get('title', '') or 'untitled'}:{p}"])
                 for article in articles
                 for p, paragraph in enumerate(article["paragraphs"]) for qa in paragraph["qas"]]
    return random.Random(f"{seed}:squad").sample(questions, min(n, len(questions)))


def nq_open(n: int, seed: int) -> list[Question]:
    hashes = {d.id: d.content_hash for d in DATASETS["nq-open"].documents()}
    with gzip.open(DATASETS["nq-open"].verified_path(), "rt", encoding="utf-8") as handle:
        questions = [Question("nq-open", json.loads(line)["question"], hashes[f"nq-open:{i}"])
                     for i, line in enumerate(handle)]
    return random.Random(f"{seed}:nq").sample(questions, min(n, len(questions)))


def corpus(questions: list[Question], distractors: int, seed: int) -> dict[str, str]:
    """content hash -> text: the gold passages, then seeded wiki5k passages."""
    texts: dict[str, str] = {}
    wanted = {q.gold_hash for q in questions}
    for name in ("squad-dev", "nq-open"):
        for document in DATASETS[name].documents():
            if document.content_hash in wanted:
                texts.setdefault(document.content_hash, document.text)
    pool = wiki5k_documents()
    for document in random.Random(f"{seed}:distractors").sample(pool, min(distractors,
                                                                          len(pool))):
        texts.setdefault(document.content_hash, document.text)
    return texts


def embed_interleaved(models: list[str], texts: list[str]) -> dict[str, dict]:
    """Each model's vectors of ``texts``, slice by slice in alternating order, timed."""
    encoders = {}
    for name in models:
        started = time.perf_counter()
        encoders[name] = load_embedder(name)
        encoders[name].encode(texts[:8])  # first-call set-up is not throughput
        encoders[name] = (encoders[name], time.perf_counter() - started)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in models}
    wall = dict.fromkeys(models, 0.0)
    cpu = dict.fromkeys(models, 0.0)
    for number, start in enumerate(range(0, len(texts), SLICE)):
        order = models if number % 2 == 0 else list(reversed(models))
        for name in order:
            began, began_cpu = time.perf_counter(), time.process_time()
            parts[name].append(encoders[name][0].encode(texts[start:start + SLICE]))
            wall[name] += time.perf_counter() - began
            cpu[name] += time.process_time() - began_cpu
    return {name: {"vectors": np.concatenate(parts[name]), "load_s": encoders[name][1],
                   "passages_per_s": len(texts) / wall[name],
                   "passages_per_cpu_s": len(texts) / cpu[name]} for name in models}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs=2, default=["all-MiniLM-L6-v2",
                                                      "all-MiniLM-L6-v2-int8"])
    parser.add_argument("--questions", type=int, default=150, help="per data set")
    parser.add_argument("--distractors", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-k", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    questions = squad(args.questions, args.seed) + nq_open(args.questions, args.seed)
    passages = corpus(questions, args.distractors, args.seed)
    hashes, texts = list(passages), list(passages.values())
    print(f"{len(questions)} questions, {len(texts)} passages; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    embedded = embed_interleaved(args.models, texts)
    row_of = {h: i for i, h in enumerate(hashes)}
    results: dict[str, dict] = {}
    for name in args.models:
        encoder = load_embedder(name)
        queries = encoder.encode([q.text for q in questions])
        top = np.argsort(-(queries @ embedded[name]["vectors"].T), axis=1)[:, :args.k]
        hits: dict[str, list[bool]] = {}
        for question, row in zip(questions, top, strict=True):
            hits.setdefault(question.dataset, []).append(row_of[question.gold_hash] in row)
        results[name] = {f"recall@{args.k} {d}": round(sum(h) / len(h), 4)
                         for d, h in hits.items()}
        figures = embedded[name]
        print(f"{name:<24} " + "  ".join(f"{k} {v:.4f}" for k, v in results[name].items())
              + f"  {figures['passages_per_s']:.1f} passages/s ("
              f"{figures['passages_per_cpu_s']:.2f} per CPU-s), load {figures['load_s']:.1f} s",
              flush=True)
    first, second = (embedded[name]["vectors"] for name in args.models)
    cosine = (first * second).sum(axis=1)
    print(f"cosine {args.models[0]} vs {args.models[1]} over {len(cosine)} passages: mean "
          f"{cosine.mean():.5f}, p1 {np.percentile(cosine, 1):.5f}, min {cosine.min():.5f}")
    for dataset in ("squad-dev", "nq-open"):
        key = f"recall@{args.k} {dataset}"
        delta = results[args.models[1]][key] - results[args.models[0]][key]
        print(f"{key}: {args.models[1]} - {args.models[0]} = {delta:+.4f} (limit +-0.01)")
    print(f"load average {os.getloadavg()[0]:.2f}; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
