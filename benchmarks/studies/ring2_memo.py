"""Ring 2's time per question on the wiki5k KB, passages read cold and from the memo (issue 19).

Ring 2 reads each pooled passage (sentences, terms, candidate answers, numbers) once and keeps
the reading in bounded in-process memos (``trishield.rings.claims``, ``.conflicts``). This
asks ``ring12`` (a pool of 20, Ring 1, Ring 2, the extractive reader: no LLM) each seeded
SQuAD/NQ question twice in a row: first with the memos cleared (cold: what passages never
seen cost), then again (warm: what recurring passages cost, and what Ring 2 would cost if
the reading were stored at ingest). Prints Ring 2's p50/p95 from the trace's
timings and the load average, never a pass/fail.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/ring2_memo.py --questions 100

The KB is the benchmark's wiki5k base (built by ``trishield eval poisonedrag`` or
``benchmarks/ring_latency.py``; this script builds it when missing, about five minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wiki5k_questions import question_arguments


def summary(seconds: list[float]) -> dict[str, float]:
    values = np.asarray(seconds) * 1000.0
    return {"p50": round(float(np.percentile(values, 50)), 3),
            "p95": round(float(np.percentile(values, 95)), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    args = question_arguments(parser, questions=100)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trishield.defenses.retrievers import KBRetriever
    from trishield.eval.poisonedrag.defenses import make_asker
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel
    from trishield.rings import claims, conflicts
    from trishield.settings import PipelineConfig
    from wiki5k_questions import seeded_questions, wiki5k_base

    with KnowledgeBase.open(wiki5k_base(args.work_dir)) as kb:
        questions = seeded_questions(kb, args.questions, args.seed)
        ask = make_asker("ring12", KBRetriever(kb), build_panel(["extractive"]),
                         PipelineConfig(backend="dense"))
        for question in questions[:5]:  # warm-up: models loaded, KB caches filled
            ask(question)
        cold, warm = [], []
        for question in questions:  # each question cold, then at once warm: one load for both
            claims.clear_memo()
            conflicts.clear_memo()
            cold.append(ask(question).trace.timings_s["ring2"])
            warm.append(ask(question).trace.timings_s["ring2"])
    figures = {"questions": len(questions), "seed": args.seed, "kb": "wiki5k", "pool": 20,
               "load_average": round(os.getloadavg()[0], 2),
               "ring2_ms": {"cold": summary(cold), "warm": summary(warm)}}
    print(f"wiki5k, {len(questions)} questions (SQuAD + NQ, seed {args.seed}), ring12, pool 20, "
          f"load average {figures['load_average']:.1f}")
    for label, value in figures["ring2_ms"].items():
        print(f"ring2 {label:5s} p50 {value['p50']:7.3f} ms   p95 {value['p95']:7.3f} ms")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
