"""The full PoisonedRAG matrix on wiki5k with the default local panel, resumable.

Run from the project root (it is ``trishield eval poisonedrag`` plus a printout of the
headline table and the wall-clock figures)::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/poisonedrag.py

``--plan`` prints the matrix (blocks x sizes x defenses, answers per defense) and an estimate
of its compute time from the per-answer compute seconds of each defense in an earlier
``timing.json`` (default: the committed one), then exits without building or asking anything.

Interrupt it at any time: the answers are checkpointed one by one under ``--work-dir`` and the
LLM responses are cached, so running it again continues where it stopped. The report goes to
``benchmarks/results/poisonedrag/`` (committed, so that the README's table has its source):
report.json / report.html / report.md are byte-reproducible, timing.json / timing.html hold the
wall-clock figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from trishield.eval.poisonedrag import PoisonedRAGOptions, run_poisonedrag
from trishield.eval.poisonedrag.defenses import DEFENSES, validate
from trishield.eval.poisonedrag.plan import Block, full_plan
from trishield.eval.poisonedrag.render import headline_rows
from trishield.llm.panel import FAST_PANEL, parse_panel_option


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/poisonedrag"))
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/poisonedrag"))
    parser.add_argument("--kb-profile", choices=("wiki5k", "mini"), default="wiki5k")
    parser.add_argument("--defense", action="append", dest="defenses",
                        help=f"repeatable; default all: {', '.join(DEFENSES)}")
    parser.add_argument("--panel", help="comma-separated panel members")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-only", action="store_true",
                        help="write the report from the answers checkpointed so far")
    parser.add_argument("--plan", action="store_true",
                        help="print the matrix and a run-time estimate, then exit")
    parser.add_argument("--timing", type=Path,
                        default=Path("benchmarks/results/poisonedrag/timing.json"),
                        help="per-defense timings the --plan estimate is computed from")
    args = parser.parse_args()
    defenses = validate(args.defenses) if args.defenses else DEFENSES
    if args.plan:
        return print_plan(full_plan(defenses), args.timing)
    started = time.monotonic()

    def progress(done: int, total: int, label: str) -> None:
        elapsed = time.monotonic() - started
        eta = elapsed / done * (total - done) if done else 0.0
        print(f"[{done}/{total}] {label}  elapsed {elapsed / 60:.1f} min, "
              f"eta {eta / 60:.1f} min", file=sys.stderr, flush=True)

    options = PoisonedRAGOptions(
        out=args.out, work_dir=args.work_dir, kb_profile=args.kb_profile,
        defenses=defenses,
        panel=tuple(parse_panel_option(args.panel)) if args.panel else FAST_PANEL,
        seed=args.seed, report_only=args.report_only, progress=progress,
        say=lambda m: print(m, file=sys.stderr, flush=True))
    payload = run_poisonedrag(options)
    headers, rows = headline_rows(payload)
    answers = payload["answers"]
    print(f"answers checkpointed: {answers['checkpointed']} of {answers['planned']}"
          + ("" if answers["complete"] else " (partial report)"))
    print(" | ".join(headers))
    for row in rows:
        print(" | ".join(str(cell) for cell in row))
    timing = json.loads((args.out / "timing.json").read_text())
    print(f"\nwall time of this run: {timing['wall_seconds_this_run']} s; "
          f"compute time of every checkpointed answer: {timing['total_compute_seconds']} s")
    for defense, figures in timing["latency_by_defense"].items():
        print(f"{defense}: p50 {figures['p50_s']} s, p95 {figures['p95_s']} s "
              f"({figures['answers']} answers, {figures['cold_answers']} cold)")
    return 0


def print_plan(blocks: list[Block], timing_path: Path) -> int:
    """The matrix, and its compute time estimated as answers x mean compute seconds per answer
    of each defense in ``timing_path`` (an earlier run's ``timing.json``: its answers were
    partly served by the LLM response cache, as a full run's are when defenses share a
    context), with the cold p50 per answer as a second, cache-free figure."""
    try:
        timings = json.loads(timing_path.read_text())["latency_by_defense"]
    except (OSError, ValueError, KeyError) as error:
        raise SystemExit(f"cannot read per-defense timings from {timing_path}: {error}") \
            from None
    per_defense: dict[str, int] = {}
    print("block | questions | size | defenses (answers where fewer than the size)")
    for block in blocks:
        capped = {d: block.limit(d) for d in block.defenses if block.limit(d) != block.size}
        print(f"{block.name} | {block.questions} | {block.size} | "
              f"{len(block.defenses)}: {', '.join(block.defenses)}"
              + (f" (capped: {', '.join(f'{d} {n}' for d, n in capped.items())})"
                 if capped else ""))
        for defense in block.defenses:
            per_defense[defense] = per_defense.get(defense, 0) + block.limit(defense)
    mean_total = cold_total = 0.0
    print("\ndefense | answers | mean s/answer | cold p50 s | estimate h (mean) | (cold)")
    for defense, answers in per_defense.items():
        figures = timings.get(defense)
        if not figures or not figures.get("answers"):
            print(f"{defense} | {answers} | no timing in {timing_path}")
            continue
        mean = figures["compute_seconds"] / figures["answers"]
        cold = figures["cold_p50_s"] if figures["cold_p50_s"] is not None else mean
        mean_total += answers * mean
        cold_total += answers * cold
        print(f"{defense} | {answers} | {mean:.2f} | {cold:.2f} | "
              f"{answers * mean / 3600:.1f} | {answers * cold / 3600:.1f}")
    print(f"\n{len(blocks)} blocks, {sum(per_defense.values())} answers; estimated compute "
          f"{mean_total / 3600:.1f} h (mean per answer, with cache hits) to "
          f"{cold_total / 3600:.1f} h (cold p50 per answer), KB builds not included")
    return 0


if __name__ == "__main__":
    sys.exit(main())
