"""Choosing Ring 1's threshold on training data only, and measuring each signal.

Training data: the PoisonedRAG-NQ poisons of the *training half* of the 100 targets (a seeded
split; the other half is the evaluation split that reports use) against clean Wikipedia passages
from the HotpotQA and MuSiQue corpora, which are in no evaluation KB. ``theta`` is the lowest
threshold whose false-positive rate on the clean passages stays at or under ``max_fpr``.

Run ``python -m trishield.eval.calibration`` to reproduce the defaults in ``GuardConfig``.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict

import numpy as np

from trishield.kb.datasets import DATASETS, load_named
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder
from trishield.rings.ingest_guard import GuardConfig, IngestGuard, outlier_scores

SPLIT_SEED = 0


def poisonedrag_split(seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(training target ids, evaluation target ids): a seeded half/half split of the 100."""
    path = DATASETS["poisonedrag-nq"].verified_path()
    targets = sorted(json.loads(path.read_text()), key=lambda t: int(t.removeprefix("test")))
    shuffled = targets[:]
    random.Random(seed).shuffle(shuffled)
    half = len(shuffled) // 2
    return sorted(shuffled[:half], key=targets.index), sorted(shuffled[half:], key=targets.index)


def choose_theta(poison_c: np.ndarray, clean_c: np.ndarray, max_fpr: float) -> float:
    """The lowest threshold (to 0.01) with a clean false-positive rate <= ``max_fpr``."""
    for theta in np.round(np.arange(0.05, 1.0001, 0.01), 2):
        if float(np.mean(clean_c >= theta)) <= max_fpr:
            return float(theta)
    return 1.0


def calibrate(max_fpr: float = 0.005) -> dict[str, object]:
    train, _ = poisonedrag_split()
    wanted = set(train)
    poisons = [d for d in load_named("poisonedrag-nq") if d.id.split(":")[1] in wanted]
    clean = load_named("hotpotqa") + load_named("musique")
    embedder = load_embedder(DEFAULT_EMBEDDING_MODEL)
    clean_vectors = embedder.encode([d.text for d in clean])
    poison_vectors = embedder.encode([d.text for d in poisons])
    reference = clean_vectors
    guard = IngestGuard(GuardConfig())  # only the scores are used, never the block decision
    results = {}
    for name, documents, vectors in (("poison", poisons, poison_vectors),
                                     ("clean", clean, clean_vectors)):
        outliers = outlier_scores(vectors, reference)
        verdicts = guard.judge_many([d.id for d in documents], [d.text for d in documents],
                                    [float(o) for o in outliers])
        results[name] = verdicts
    table = {}
    for name, verdicts in results.items():
        table[name] = {signal: float(np.median([getattr(v, signal) for v in verdicts]))
                       for signal in ("s_perp", "s_perp_len", "s_pat", "s_out", "combined")}
        table[name]["count"] = len(verdicts)
    poison_c = np.array([v.combined for v in results["poison"]])
    clean_c = np.array([v.combined for v in results["clean"]])
    theta = choose_theta(poison_c, clean_c, max_fpr)
    return {
        "training_targets": len(train),
        "poisons": len(poisons),
        "clean_passages": len(clean),
        "medians": table,
        "max_fpr": max_fpr,
        "theta": theta,
        "recall_at_theta": float(np.mean(poison_c >= theta)),
        "fpr_at_theta": float(np.mean(clean_c >= theta)),
        "weights": {k: v for k, v in asdict(GuardConfig()).items() if k.startswith("w_")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-fpr", type=float, default=0.005)
    arguments = parser.parse_args()
    print(json.dumps(calibrate(arguments.max_fpr), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
