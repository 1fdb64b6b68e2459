"""What Rings 1 and 2 add to retrieval, per question, on the wiki5k KB (issue 19, part 4).

Runs ``none`` (k=5 dense retrieval) and ``ring12`` (a pool of 20, Ring 1 after retrieval, Ring
2's evidence and trust ranking) over the same seeded SQuAD/NQ questions, interleaved question by
question so that both see the same machine load, with the extractive reader (no LLM: the LLM's
time is reported separately as ``answer`` and is not part of the ratio). Prints p50/p95 per
stage and the ratio of (retrieval + Ring 1 + Ring 2) to undefended retrieval, computed per
question and then summarised, never a pass/fail; and how many of ``ring12``'s candidates
carried a stored analysis of the current version (a stale KB is slow: ``trishield compact``).

``--pool N`` (repeatable) times ``ring12`` with each pool size in the same run, question by
question, so that the price of the pool is a ratio measured side by side: the configured pool
(20) is ``ring12``, any other is ``ring12/N``. What a smaller pool gives up is measured by
``benchmarks/studies/pool_margin.py``.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ring_latency.py --questions 200
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ring_latency.py --pool 20 --pool 10

The KB is the benchmark's wiki5k base (built by ``trishield eval poisonedrag`` or this script
with ``--build``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from wiki5k_questions import question_arguments


def percentile_ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    parser.add_argument("--pool", type=int, action="append", default=None,
                        help="a pool size to time ring12 with (repeatable; default: the "
                             "configured pool)")
    args = question_arguments(parser, questions=200)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trishield.defenses.retrievers import KBRetriever
    from trishield.eval.poisonedrag.defenses import make_asker
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel
    from trishield.rings.analysis import ANALYSIS_VERSION
    from trishield.settings import PipelineConfig
    from wiki5k_questions import pooled_configs, seeded_questions, wiki5k_base

    carried = {"current": 0, "candidates": 0}

    class CountingRetriever(KBRetriever):
        """The KB's retriever, counting the candidates that carry a current analysis."""

        def retrieve(self, query, k):
            found = super().retrieve(query, k)
            carried["candidates"] += len(found)
            carried["current"] += sum(1 for c in found if c.chunk.analysis is not None
                                      and c.chunk.analysis.version == ANALYSIS_VERSION)
            return found

    config = PipelineConfig(backend="dense")
    configured = config.scorer.pool
    configs = pooled_configs(parser, config, args.pool or [configured])
    base = wiki5k_base(args.work_dir)
    panel = build_panel(["extractive"])
    names = {pool: "ring12" if pool == configured else f"ring12/{pool}" for pool in configs}
    with KnowledgeBase.open(base) as kb:
        questions = seeded_questions(kb, args.questions, args.seed)
        askers = {"none": make_asker("none", KBRetriever(kb), panel, config)}
        for pool, name in names.items():
            askers[name] = make_asker("ring12", CountingRetriever(kb), panel, configs[pool])
        for ask in askers.values():  # warm-up: models loaded, caches filled
            for question in questions[:5]:
                ask(question)
        carried.update(current=0, candidates=0)
        stages: dict[str, dict[str, list[float]]] = {name: {} for name in askers}
        ratios: dict[str, list[float]] = {name: [] for name in names.values()}
        started = time.perf_counter()
        pooled = list(names.values())
        for number, question in enumerate(questions):
            per = {}
            # the pools take turns going first: a later one finds its rows just read
            turn = number % len(pooled)
            for name in ["none", *pooled[turn:], *pooled[:turn]]:
                timings = askers[name](question).trace.timings_s
                for stage, seconds in timings.items():
                    stages[name].setdefault(stage, []).append(seconds)
                per[name] = timings
            undefended = per["none"]["retrieval"]
            for name in names.values():
                defended = sum(per[name].get(s, 0.0) for s in ("retrieval", "ring1", "ring2"))
                ratios[name].append(defended / undefended if undefended > 0 else float("nan"))
    figures = {
        "questions": len(questions), "seed": args.seed, "kb": "wiki5k",
        "load_average": os.getloadavg()[0], "seconds": round(time.perf_counter() - started, 1),
        "stages_ms": {name: {stage: {"p50": round(percentile_ms(v, 50), 2),
                                     "p95": round(percentile_ms(v, 95), 2)}
                             for stage, v in sorted(per_stage.items())}
                      for name, per_stage in stages.items()},
        "ratio_rings12_to_undefended_retrieval": {
            name: {"pool": pool, "median": round(statistics.median(ratios[name]), 3),
                   "p95": round(float(np.percentile(ratios[name], 95)), 3)}
            for pool, name in names.items()},
        "ring12_candidates_with_current_analysis": dict(carried),
    }
    print(f"wiki5k, {len(questions)} questions (SQuAD + NQ, seed {args.seed}), dense, load "
          f"average {figures['load_average']:.1f}")
    print(f"{'defense':10s} {'stage':10s} {'p50 ms':>9s} {'p95 ms':>9s}")
    for name, per_stage in figures["stages_ms"].items():
        for stage, value in per_stage.items():
            print(f"{name:10s} {stage:10s} {value['p50']:9.2f} {value['p95']:9.2f}")
    for name, ratio in figures["ratio_rings12_to_undefended_retrieval"].items():
        print(f"{name}: (retrieval + Ring 1 + Ring 2) / undefended retrieval, per question "
              f"(pool {ratio['pool']}): median {ratio['median']:.3f}, p95 {ratio['p95']:.3f}")
    print(f"ring12 candidates with a current stored analysis: {carried['current']} of "
          f"{carried['candidates']}")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
