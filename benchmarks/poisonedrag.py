"""The full PoisonedRAG matrix on wiki5k with the default local panel, resumable.

Run from the project root (it is ``trishield eval poisonedrag`` plus a printout of the
headline table and the wall-clock figures)::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/poisonedrag.py

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
from trishield.eval.poisonedrag.render import headline_rows
from trishield.llm.panel import DEFAULT_PANEL, parse_panel_option


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
    args = parser.parse_args()
    started = time.monotonic()

    def progress(done: int, total: int, label: str) -> None:
        elapsed = time.monotonic() - started
        eta = elapsed / done * (total - done) if done else 0.0
        print(f"[{done}/{total}] {label}  elapsed {elapsed / 60:.1f} min, "
              f"eta {eta / 60:.1f} min", file=sys.stderr, flush=True)

    options = PoisonedRAGOptions(
        out=args.out, work_dir=args.work_dir, kb_profile=args.kb_profile,
        defenses=validate(args.defenses) if args.defenses else DEFENSES,
        panel=tuple(parse_panel_option(args.panel)) if args.panel else DEFAULT_PANEL,
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


if __name__ == "__main__":
    sys.exit(main())
