"""Calibrate "about the question by meaning": the question-to-passage cosine at or above
which a passage is read as being about the question, per embedding model.

Why: Ring 3 drops a claim whose passages share too few of the question's words, and a true
passage often words it otherwise ("singer" for "sings"); read by meaning it is plainly about
the question (docs/decisions.md, D40). The threshold is a property of the embedding model,
so it is measured on data the defense is not evaluated on: SQuAD v1.1 dev (the PoisonedRAG
matrix asks NQ questions over wiki5k). For a sample of questions it prints the cosine of each
question with

* its own paragraph (the one that answers it),
* another paragraph of the same article (on the topic, not the answer),
* a paragraph of another article (off the topic),

and the suggested threshold: the 25th percentile of the first (three in four answering
paragraphs are at least this close), which the registry records as the model's
``about_cosine``. Run:

    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/about_by_meaning.py
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from trishield.config import data_dir
from trishield.errors import ModelError
from trishield.models.embedders import EMBEDDING_MODELS, load_embedder

PERCENTILES = (5, 10, 25, 50, 75, 90, 95, 99)


def sample(squad: Path, questions: int, seed: int) -> list[tuple[str, str, str, str]]:
    """``questions`` (question, own paragraph, same-article paragraph, other-article
    paragraph) quadruples, drawn with ``seed``."""
    articles = json.loads(squad.read_text(encoding="utf-8"))["data"]
    paragraphs = [(number, p["context"]) for number, article in enumerate(articles)
                  for p in article["paragraphs"]]
    by_article: dict[int, list[str]] = {}
    for number, context in paragraphs:
        by_article.setdefault(number, []).append(context)
    asked = [(number, p["context"], qa["question"]) for number, article in enumerate(articles)
             for p in article["paragraphs"] for qa in p["qas"]
             if len(by_article[number]) > 1]
    rng = random.Random(seed)
    chosen = rng.sample(asked, questions)
    rows = []
    for number, own, question in chosen:
        same = rng.choice([c for c in by_article[number] if c != own])
        other_number, other = rng.choice(paragraphs)
        while other_number == number:
            other_number, other = rng.choice(paragraphs)
        rows.append((question, own, same, other))
    return rows


def cosines(model: str, rows: list[tuple[str, str, str, str]]) -> dict[str, np.ndarray]:
    encoder = load_embedder(model)
    columns = list(zip(*rows, strict=True))
    vectors = [np.asarray(encoder.encode(list(column)), dtype=np.float32) for column in columns]
    question = vectors[0]
    return {name: np.sum(question * vectors[i], axis=1)
            for i, name in ((1, "own paragraph"), (2, "same article"), (3, "other article"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="default: TRISHIELD_DATA_DIR or "
                        "../shared/data (docs/benchmarks.md, data)")
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=list(EMBEDDING_MODELS))
    args = parser.parse_args()
    squad = (args.data_dir or data_dir()) / "squad" / "dev-v1.1.json"
    rows = sample(squad, args.questions, args.seed)
    print(f"SQuAD v1.1 dev, {len(rows)} questions, seed {args.seed}; percentiles "
          f"{', '.join(str(p) for p in PERCENTILES)}")
    for model in args.models:
        try:
            found = cosines(model, rows)
        except ModelError as error:
            print(f"\n{model}: skipped ({error})")
            continue
        print(f"\n{model} (registry about_cosine: {EMBEDDING_MODELS[model].about_cosine})")
        for name, values in found.items():
            shown = " ".join(f"{v:6.3f}" for v in np.percentile(values, PERCENTILES))
            print(f"  {name:14s} {shown}")
        threshold = float(np.percentile(found["own paragraph"], 25))
        share = {name: float(np.mean(values >= threshold)) for name, values in found.items()}
        print(f"  suggested about_cosine {threshold:.2f}: at or above it "
              + ", ".join(f"{name} {value:.2f}" for name, value in share.items()))


if __name__ == "__main__":
    main()
