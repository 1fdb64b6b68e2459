"""What Python's garbage collector costs a long-running process that asks, with and without
the service's start-up freeze (:func:`trishield.service.runtime.freeze_startup_heap`).

Each mode runs in a fresh process of its own (one mode's heap must not shape the other's),
one after the other: the wiki5k base KB, ``ring12`` (pool 20, Rings 1 and 2) with the
extractive reader (no LLM), five warm-up questions, then ``--questions`` seeded SQuAD/NQ
questions. ``frozen`` calls ``freeze_startup_heap()`` after the warm-up, as ``trishield
serve`` does after its own; ``plain`` does not. Every collection is timed through
``gc.callbacks``. Prints, per mode, the objects the collector tracks (and how many are
frozen), the collections of each generation with their total and longest pause, and ask
latency p50/p99/max; figures only, never pass/fail.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/gc_pause.py --questions 400

The KB is the benchmark's wiki5k base (``wiki5k_questions.wiki5k_base``: built when missing).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wiki5k_questions import question_arguments

MODES = ("plain", "frozen")


def measure(mode: str, work_dir: Path, questions: int, seed: int) -> dict[str, object]:
    """One mode's figures, in this process."""
    from trishield.defenses.retrievers import KBRetriever
    from trishield.eval.poisonedrag.defenses import make_asker
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel
    from trishield.service.runtime import freeze_startup_heap
    from trishield.settings import PipelineConfig
    from wiki5k_questions import seeded_questions, wiki5k_base

    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(time.perf_counter() - started[0])

    base = wiki5k_base(work_dir)
    with KnowledgeBase.open(base) as kb:
        asked = seeded_questions(kb, questions, seed)
        ask = make_asker("ring12", KBRetriever(kb), build_panel(["extractive"]),
                         PipelineConfig(backend="dense"))
        for question in asked[:5]:  # warm-up: models loaded, lexicons read, caches filled
            ask(question)
        frozen = freeze_startup_heap() if mode == "frozen" else 0
        tracked = len(gc.get_objects())
        gc.callbacks.append(timed)
        latencies = []
        for question in asked:
            mark = time.perf_counter()
            ask(question)
            latencies.append(time.perf_counter() - mark)
        gc.callbacks.remove(timed)
    return {
        "mode": mode, "questions": len(asked), "tracked_objects": tracked,
        "frozen_objects": frozen, "load_average": round(os.getloadavg()[0], 2),
        "collections": {str(generation): {
            "count": len(found), "total_ms": round(1000 * sum(found), 1),
            "longest_ms": round(1000 * max(found, default=0.0), 1)}
            for generation, found in pauses.items()},
        "ask_ms": {name: round(float(np.percentile(latencies, q)) * 1000, 1)
                   for name, q in (("p50", 50), ("p99", 99), ("max", 100))},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    parser.add_argument("--mode", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = question_arguments(parser, questions=400)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.mode is not None:  # one mode, in the process the parent started for it
        print(json.dumps(measure(args.mode, args.work_dir, args.questions, args.seed)))
        return
    figures = []
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--work-dir", str(args.work_dir),
             "--questions", str(args.questions), "--seed", str(args.seed)],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the {mode} run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        figures.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"wiki5k, ring12 + extractive reader, {args.questions} questions (seed {args.seed}), "
          "each mode in a fresh process")
    print(f"{'mode':7s} {'tracked':>8s} {'frozen':>8s} {'load':>5s} "
          f"{'gen0 n/ms':>11s} {'gen1 n/ms':>10s} {'gen2 n/ms':>11s} {'gen2 max':>9s} "
          f"{'ask p50':>8s} {'p99':>6s} {'max':>7s}")
    for row in figures:
        c = row["collections"]
        print(f"{row['mode']:7s} {row['tracked_objects']:8d} {row['frozen_objects']:8d} "
              f"{row['load_average']:5.2f} "
              f"{c['0']['count']:4d}/{c['0']['total_ms']:6.1f} "
              f"{c['1']['count']:3d}/{c['1']['total_ms']:6.1f} "
              f"{c['2']['count']:3d}/{c['2']['total_ms']:7.1f} {c['2']['longest_ms']:9.1f} "
              f"{row['ask_ms']['p50']:8.1f} {row['ask_ms']['p99']:6.1f} "
              f"{row['ask_ms']['max']:7.1f}")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
