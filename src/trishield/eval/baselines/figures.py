"""Measured figures for the baselines: ``python -m trishield.eval.baselines.figures``.

* Perplexity filter: the threshold calibrated on clean passages (training sample), its clean
  false-positive rate on held-out clean passages (another HotpotQA/MuSiQue sample, and the
  PoisonedRAG-NQ ground-truth passages), its recall on the *evaluation* half of the
  PoisonedRAG-NQ poisons (``poisonedrag_split``), and the scoring speed.
* RAGDefender: seconds per query for the top-5 and pool-20 modes, and what it removed, on a
  small KB of those same held-out clean passages, NQ ground truth and evaluation poisons,
  asked the evaluation questions.

Every number is computed here from the shared data; scores are cached, so a re-run is fast.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trishield.errors import require_extra
from trishield.eval.baselines import build_baseline
from trishield.eval.baselines.perplexity import (
    PerplexityScorer,
    calibrate_perplexity,
    clean_passages,
)
from trishield.eval.calibration import poisonedrag_split
from trishield.kb import Document, KnowledgeBase
from trishield.kb.chunking import ChunkingConfig, chunk_document
from trishield.kb.datasets import DATASETS, load_named
from trishield.llm import ExtractiveReader


def evaluation_poisons() -> list[Document]:
    """The PoisonedRAG-NQ poisons of the evaluation half of the targets."""
    _, test = poisonedrag_split()
    wanted = set(test)
    return [d for d in load_named("poisonedrag-nq") if d.id.split(":")[1] in wanted]


def evaluation_questions() -> list[tuple[str, str]]:
    """(target id, question) of the evaluation half."""
    _, test = poisonedrag_split()
    targets = json.loads(DATASETS["poisonedrag-nq"].verified_path().read_text())
    return [(t, targets[t]["question"]) for t in test]


def _first_chunks(documents: Sequence[Document]) -> list[tuple[str, str]]:
    chunking = ChunkingConfig(strategy="window")
    return [(f"{d.id}#0", chunk_document(d, chunking)[0].text) for d in documents]


def _rate(scores: Sequence[float], threshold: float) -> float:
    return round(float(np.mean(np.asarray(scores) > threshold)), 4) if len(scores) else 0.0


def perplexity_figures(scorer: PerplexityScorer, *, sample: int = 300,
                       held_out: int = 300) -> dict[str, Any]:
    calibration = calibrate_perplexity(scorer, sample=sample)
    threshold = calibration.threshold
    sets = {
        "held_out_clean_hotpotqa_musique": clean_passages(held_out, skip=sample),
        "nq_ground_truth": _first_chunks(load_named("poisonedrag-nq-gt")),
        "evaluation_poisons": [(d.id, d.text) for d in evaluation_poisons()],
    }
    measured: dict[str, Any] = {}
    scored: dict[str, list[float]] = {}
    for name, passages in sets.items():
        before = (scorer.stats.computed, scorer.stats.seconds)
        scores = scorer.score([text for _, text in passages])
        scored[name] = scores
        computed = scorer.stats.computed - before[0]
        seconds = scorer.stats.seconds - before[1]
        measured[name] = {
            "count": len(scores),
            "above_threshold": _rate(scores, threshold),
            "median_perplexity": round(float(np.median(scores)), 3),
            "computed": computed,
            "passages_per_s": round(computed / seconds, 3) if computed and seconds else None,
        }
    # other clean false-positive rates, same training passages (cached: no new scoring)
    training = scorer.score([text for _, text in clean_passages(sample)])
    points = []
    for percentile in (80.0, 90.0, 95.0, 99.0):
        cut = float(np.percentile(training, percentile))
        points.append({"percentile": percentile, "threshold": round(cut, 4),
                       "held_out_clean_fpr": _rate(scored["held_out_clean_hotpotqa_musique"],
                                                   cut),
                       "nq_ground_truth_fpr": _rate(scored["nq_ground_truth"], cut),
                       "poison_recall": _rate(scored["evaluation_poisons"], cut)})
    return {
        "calibration": calibration.as_dict(),
        "operating_points": points,
        "held_out_clean_fpr": measured["held_out_clean_hotpotqa_musique"]["above_threshold"],
        "nq_ground_truth_fpr": measured["nq_ground_truth"]["above_threshold"],
        "poison_recall": measured["evaluation_poisons"]["above_threshold"],
        "sets": measured,
        "scorer": scorer.describe() | {"threads": scorer.threads},
        "scoring_total": scorer.stats.as_dict(),
    }


def ragdefender_figures(held_out: int = 300, sample: int = 300,
                        clean_kb: Path | None = None) -> dict[str, Any]:
    """RAGDefender on a measurement KB: timing per query and what it removed.

    With ``clean_kb`` (e.g. a wiki5k KB built by ``trishield ingest --dataset wiki5k``), a copy
    of it gets all 500 PoisonedRAG-NQ poisons and all 100 targets are asked, the setup of
    docs/benchmarks.md ("Baselines"); otherwise a small KB of NQ ground truth, held-out clean
    passages and the evaluation poisons is built and the evaluation questions are asked (a
    small KB has few clean neighbours, so other targets' poisons crowd the pool: use it for
    timing only).
    """
    with tempfile.TemporaryDirectory(prefix="trishield-figures-") as scratch:
        directory = Path(scratch) / "kb"
        started = time.perf_counter()
        if clean_kb is not None:
            shutil.copytree(clean_kb, directory)
            poisons = load_named("poisonedrag-nq")
            targets = json.loads(DATASETS["poisonedrag-nq"].verified_path().read_text())
            questions = [(t, targets[t]["question"]) for t in targets]
            with KnowledgeBase.open(directory) as kb:
                kb.ingest(poisons, writer="figures")
        else:
            poisons = evaluation_poisons()
            clean = [Document(id=f"clean:{pid}", text=text)
                     for pid, text in clean_passages(held_out, skip=sample)]
            questions = evaluation_questions()
            with KnowledgeBase.open(directory, create=True) as kb:
                kb.ingest([*load_named("poisonedrag-nq-gt"), *clean], writer="figures")
                kb.ingest(poisons, writer="figures")
        ingest_seconds = time.perf_counter() - started
        with KnowledgeBase.open(directory) as kb:
            passages = kb.stats()
            return _ragdefender_on(kb, questions) | {
                "kb": str(clean_kb) if clean_kb else "small measurement KB",
                "kb_counts": {key: passages[key] for key in passages
                              if key in ("documents", "chunks")},
                "setup_seconds": round(ingest_seconds, 2)}


def _ragdefender_on(kb: KnowledgeBase, questions: Sequence[tuple[str, str]]) -> dict[str, Any]:
    results = {}
    for pool in (5, 20):
        name = "ragdefender-top5" if pool == 5 else "ragdefender-pool20"
        defense = build_baseline(name, kb, ExtractiveReader(), k=5,
                                 config={"pool": pool} if pool != 5 else None)
        seconds, removed_poison, removed_clean, poison_in_context = [], 0, 0, 0
        poisons_in_pool = 0
        for _, question in questions:
            trace = defense.ask(question).trace
            seconds.append(trace.timings_s["ragdefender"])
            is_poison = {c.chunk_id: c.doc_id.startswith("poison:") for c in trace.candidates}
            poisons_in_pool += sum(is_poison.values())
            for row in trace.removed or []:
                if is_poison[row.id]:
                    removed_poison += 1
                else:
                    removed_clean += 1
            poison_in_context += any(is_poison[p.id] for p in trace.context)
        removed = removed_poison + removed_clean
        results[defense.name] = {
            "questions": len(questions),
            "seconds_per_query_median": round(float(np.median(seconds)), 4),
            "seconds_per_query_p95": round(float(np.percentile(seconds, 95)), 4),
            "poisons_retrieved": poisons_in_pool,
            "poison_recall": round(removed_poison / poisons_in_pool, 4)
            if poisons_in_pool else None,
            "precision": round(removed_poison / removed, 4) if removed else None,
            "questions_with_a_poison_in_context": poison_in_context,
        }
    expansion = expansion_figures(kb, [q for _, q in questions])
    return {"modes": results, "expansion_k50_prompt_tokens": expansion}


def expansion_figures(kb: KnowledgeBase, questions: Sequence[str], *,
                      model: str = "qwen2.5-0.5b", k: int = 50) -> dict[str, Any]:
    """Prompt tokens the reader's k=50 prompt really takes: the reader's messages, rendered
    with the model's own chat template and counted with its own tokenizer (no generation)."""
    require_extra("counting the expansion baseline's prompt tokens", "eval", ["gguf"])
    from transformers import AutoTokenizer

    from trishield.llm.reader import build_messages
    from trishield.models.gguf import resolve_gguf

    path = resolve_gguf(model).path
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name,
                                              local_files_only=True)
    counts = []
    for question in questions:
        pairs = [(c.chunk_id, c.chunk.text) for c in kb.search(question, k=k)]
        messages = build_messages(question, pairs, "chat")
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                            tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        counts.append(len(ids))
    return {"model": model, "k": k, "questions": len(counts),
            "median": int(np.median(counts)), "max": int(max(counts)),
            "default_n_ctx": 2048, "expansion_n_ctx": 16384}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads while scoring perplexity")
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--held-out", type=int, default=300)
    parser.add_argument("--skip-ragdefender", action="store_true")
    parser.add_argument("--clean-kb", type=Path,
                        help="a clean wiki5k KB to copy and poison for the RAGDefender figures")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    arguments = parser.parse_args()
    scorer = PerplexityScorer(threads=arguments.threads)
    figures: dict[str, Any] = {"perplexity_filter": perplexity_figures(
        scorer, sample=arguments.sample, held_out=arguments.held_out)}
    print(json.dumps(figures, indent=2, sort_keys=True), flush=True)
    if not arguments.skip_ragdefender:
        figures["ragdefender"] = ragdefender_figures(arguments.held_out, arguments.sample,
                                                    arguments.clean_kb)
        print(json.dumps(figures["ragdefender"], indent=2, sort_keys=True), flush=True)
    if arguments.out:
        arguments.out.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
