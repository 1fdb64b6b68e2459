"""How alike one target's poisons are to each other, per attack family, with the default
MiniLM embedder (issue 16, "Independence").

For every PoisonedRAG-NQ target and family, the pairwise cosine of the target's poisons
(each embedded whole, L2-normalised, so the inner product is the cosine); the pairs of all
targets are pooled and the median and 10th/90th percentiles printed. For reference, the same
figure for *independent clean passages answering one question*: pairs of a target's distinct
ground-truth passages (targets with two or more). Prints figures only; deterministic (the
families are seeded, the embedder runs on the CPU)::

    HF_HUB_OFFLINE=1 PYTHONPATH=src .venv/bin/python benchmarks/studies/poison_similarity.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import numpy as np

from trishield.eval.poisonedrag.attacks import FAMILIES, get_family, load_targets
from trishield.eval.poisonedrag.diverse import STYLES
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder


def pairwise(vectors: np.ndarray) -> list[float]:
    """Cosines of every unordered pair of rows (rows are unit vectors)."""
    return [float(vectors[i] @ vectors[j])
            for i, j in itertools.combinations(range(len(vectors)), 2)]


def summary(values: list[float]) -> dict[str, float | int]:
    return {"pairs": len(values), "median": round(float(np.median(values)), 3),
            "p10": round(float(np.percentile(values, 10)), 3),
            "p90": round(float(np.percentile(values, 90)), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", dest="families",
                        help="repeatable; default: diverse, claim-only, published")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    families = args.families or ["diverse", "claim-only", "published"]
    for name in families:
        get_family(name)  # refuses an unknown name before the model loads
    embedder = load_embedder(DEFAULT_EMBEDDING_MODEL)
    targets = load_targets()
    figures: dict[str, dict[str, float | int]] = {}
    by_style: dict[str, list[float]] = {}
    for name in families:
        values: list[float] = []
        for target in targets:
            texts = [d.text for d in FAMILIES[name].poisons(target, args.seed)]
            found = pairwise(embedder.encode(texts))
            values += found
            if name == "diverse":  # poison n is written in STYLES[n]
                for (i, j), cosine in zip(itertools.combinations(range(len(texts)), 2), found,
                                          strict=True):
                    by_style.setdefault(f"{STYLES[i]} / {STYLES[j]}", []).append(cosine)
        figures[name] = summary(values)
    clean: list[float] = []
    for target in targets:
        texts = list(dict.fromkeys(text for _, text in target.gt_passages))
        if len(texts) > 1:
            clean += pairwise(embedder.encode(texts))
    figures["clean ground-truth passages (same question)"] = summary(clean)
    print(f"pairwise cosine of one target's documents ({DEFAULT_EMBEDDING_MODEL}, "
          f"{len(targets)} targets, seed {args.seed})")
    for name, row in figures.items():
        print(f"{name:45s} median {row['median']:.3f}  p10 {row['p10']:.3f}  "
              f"p90 {row['p90']:.3f}  ({row['pairs']} pairs)")
    if by_style:
        print("diverse, per pair of styles (median):")
        for pair, values in sorted(by_style.items(), key=lambda kv: -np.median(kv[1])):
            print(f"  {pair:30s} {np.median(values):.3f}")
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
