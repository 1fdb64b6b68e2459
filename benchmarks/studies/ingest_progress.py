"""Ingest rate with the progress bar on vs off, and what committing in batches costs.

Ingests the same seeded sample of wiki5k passages (500 by default) into a fresh KB per run,
in three ways, and prints documents/s and chunks/s for each:

* ``one batch``: the whole sample in one transaction, no progress (the HTTP API's write);
* ``batched``: ``trishield ingest``'s default, a commit about every 30 s (``--commit-every``,
  batches sized by the measured rate, the first one a single encoder batch: docs/speed.md,
  "Commits and the ETA"), no bar (a piped or scripted ingest); ``--batch-size N`` commits
  every N documents instead (the CLI's ``--batch-size``; 200 was the default before the 30 s
  commits);
* ``batched + callback``: the same, reporting progress to a callback that draws nothing
  (what watching costs below the bar: a call after every encoder batch of 32 chunks and
  every commit);
* ``batched + bar``: the same with the CLI's rich progress bar drawn (forced into terminal
  mode and rendered to /dev/null, so its refreshes cost what they cost on a terminal).

Ring 1 is off (``--no-guard``) so the figures compare the write path alone. The model is
loaded before the first timed run, and runs alternate between the settings (``--repeats``)
so that a machine that gets busier mid-run does not favour one of them. Figures only, no
pass/fail; they also go to ``benchmarks/results/ingest_progress.json`` (git-ignored).

    HF_HUB_OFFLINE=1 PYTHONPATH=src .venv/bin/python benchmarks/studies/ingest_progress.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

from rich.console import Console

from trishield.cli_documents import IngestProgressBar
from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import wiki5k_documents
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder

RESULTS = Path(__file__).resolve().parent / "results" / "ingest_progress.json"


def _sample(size: int, seed: int) -> list[Document]:
    documents = wiki5k_documents()
    return sorted(random.Random(seed).sample(documents, size), key=lambda d: d.id)


def _run(documents: list[Document], setting: str, batch_size: int | None,
         commit_seconds: float) -> dict[str, float]:
    """One ingest; ``batched`` settings commit every ``batch_size`` documents when it is
    given, else about every ``commit_seconds`` (the CLI's default)."""
    batching = ({"batch_size": batch_size} if batch_size is not None
                else {"commit_seconds": commit_seconds})
    with tempfile.TemporaryDirectory() as directory, \
            KnowledgeBase.open(Path(directory) / "kb", create=True) as kb:
        bar = None
        started = time.perf_counter()
        cpu = time.process_time()
        if setting == "batched + bar":
            with open(os.devnull, "w") as sink:
                bar = IngestProgressBar(Console(file=sink, force_terminal=True, width=120))
                with bar.progress:
                    report = kb.ingest(documents, writer="bench", on_progress=bar.on_progress,
                                       **batching)
        elif setting == "batched + callback":
            report = kb.ingest(documents, writer="bench", on_progress=lambda state: None,
                               **batching)
        elif setting == "one batch":
            report = kb.ingest(documents, writer="bench")
        else:
            report = kb.ingest(documents, writer="bench", **batching)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    return {"seconds": wall, "embed_seconds": report.embed_seconds,
            "documents_per_s": len(report.added) / wall,
            "chunks_per_s": report.chunks_added / wall, "chunks": report.chunks_added,
            "batches": len(report.batch_ids), "cpu_per_wall": cpu / wall}


def _bar_cost(seconds: float = 5.0) -> dict[str, float]:
    """The bar's own cost, free of the machine's noise: CPU milliseconds per redraw, and the
    share of one core its refresh thread takes while the bar is shown."""
    from trishield.kb.ingest_report import IngestProgress

    with open(os.devnull, "w") as sink:
        bar = IngestProgressBar(Console(file=sink, force_terminal=True, width=120))
        with bar.progress:
            bar.on_file(3, 3)
            bar.on_progress(IngestProgress(500, 200, 600, 300, 3, 1, 30.0))
            cpu = time.process_time()
            for _ in range(200):
                bar.progress.refresh()
            per_redraw = (time.process_time() - cpu) / 200
            cpu = time.process_time()
            time.sleep(seconds)  # only the refresh thread runs
            thread_share = (time.process_time() - cpu) / seconds
    return {"cpu_ms_per_redraw": per_redraw * 1000, "refresh_thread_core_share": thread_share}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="commit every N documents (default: about every "
                             "--commit-every seconds, as `trishield ingest` does)")
    parser.add_argument("--commit-every", type=float, default=30.0,
                        help="seconds between commits when no --batch-size is given")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    documents = _sample(args.documents, args.seed)
    load_embedder(DEFAULT_EMBEDDING_MODEL)
    if args.batch_size is not None and args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    if args.commit_every <= 0:
        parser.error("--commit-every must be positive")
    # warm-up: the first encode, the thread pools
    _run(documents[:32], "one batch", args.batch_size, args.commit_every)
    settings = ("one batch", "batched", "batched + callback", "batched + bar")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
    for repeat in range(args.repeats):
        for name in settings if repeat % 2 == 0 else reversed(settings):
            runs[name].append(_run(documents, name, args.batch_size, args.commit_every))
            print(f"  {name:<18} run {repeat + 1}: {runs[name][-1]['seconds']:.1f}s", flush=True)
    load = os.getloadavg()[0]
    batching = (f"{args.batch_size}-document batches" if args.batch_size is not None
                else f"commits about every {args.commit_every:g} s")
    print(f"\n{args.documents} wiki5k passages (seed {args.seed}), {batching}, "
          f"{args.repeats} run(s) each, load average {load:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"{'setting':<20}{'seconds':>9}{'docs/s':>9}{'chunks/s':>10}{'batches':>9}"
          f"{'cpu/wall':>10}")
    summary = {}
    for name, results in runs.items():
        mean = {key: sum(r[key] for r in results) / len(results) for key in results[0]}
        summary[name] = mean | {"runs": results}
        print(f"{name:<20}{mean['seconds']:>9.1f}{mean['documents_per_s']:>9.1f}"
              f"{mean['chunks_per_s']:>10.1f}{mean['batches']:>9.0f}{mean['cpu_per_wall']:>10.2f}")
    bar_cost = summary["batched + bar"]["seconds"] / summary["batched"]["seconds"] - 1
    batch_cost = summary["batched"]["seconds"] / summary["one batch"]["seconds"] - 1
    print(f"progress bar: {bar_cost:+.1%} wall time vs batched without it; batching: "
          f"{batch_cost:+.1%} vs one batch")
    own = _bar_cost()
    print(f"the bar itself: {own['cpu_ms_per_redraw']:.2f} ms CPU per redraw, its refresh "
          f"thread {own['refresh_thread_core_share']:.2%} of one core")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"documents": args.documents, "seed": args.seed,
                                   "batch_size": args.batch_size,
                                   "commit_seconds": args.commit_every, "load_average": load,
                                   "settings": summary, "bar_cost": bar_cost,
                                   "batch_cost": batch_cost, "bar_itself": own},
                                  indent=2) + "\n")


if __name__ == "__main__":
    main()
