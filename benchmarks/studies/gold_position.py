"""Where Rings 1-2 put the passage that holds the answer, without a model (docs/benchmarks.md,
"A passage's subject is its title").

Benign accuracy can only be as good as the context the reader gets. For each benign question
of the PoisonedRAG matrix (its ``benign-targets``, ``benign-squad`` and ``benign-nq`` blocks:
the same seeded questions, on the same wiki5k base KB) this retrieves the pool of 20 and
reports where the first passage containing a gold answer stands:

* ``retrieval``: the retriever's own order (what ``none`` hands the reader);
* ``ring12``: Ring 1's screen and Ring 2's trust order (what ``full-gated`` hands it);
* ``ring12, no titles``: the same with every passage's document title blanked, the reading
  before a title counted as the passage's subject: the ablation, measured in the same run.

Each line gives how many questions have that passage first, and in the context of ``k``.
No LLM is asked, so the figures are deterministic and take a few minutes.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/gold_position.py \\
        [--block benign-nq] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from trishield.kb.indexes.retrieval import Candidate

BLOCKS = ("benign-targets", "benign-squad", "benign-nq")


def first_gold(texts: list[str], golds: list[str]) -> int | None:
    """The position of the first text containing a gold answer, or ``None``."""
    from trishield.answers import contains_answer

    for position, text in enumerate(texts):
        if any(contains_answer(text, gold) for gold in golds):
            return position
    return None


def untitled(candidate: Candidate) -> Candidate:
    """The candidate with its document's title blanked (the ablation)."""
    return replace(candidate, chunk=replace(candidate.chunk, title=""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/poisonedrag"))
    parser.add_argument("--block", action="append", choices=BLOCKS,
                        help="a benign block of the matrix (repeatable; default: all three)")
    parser.add_argument("--pool", type=int, default=20)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the per-question positions as JSON")
    args = parser.parse_args()
    if args.k < 1 or args.pool < args.k:
        parser.error("need 1 <= --k <= --pool")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trishield.defenses.retrievers import KBRetriever
    from trishield.defenses.ring_stages import Ring1Filter, Ring2Reranker
    from trishield.eval.poisonedrag.attacks import load_targets, seeded_order
    from trishield.eval.poisonedrag.plan import full_plan
    from trishield.eval.poisonedrag.runner import PoisonedRAGOptions, block_questions
    from trishield.kb import KnowledgeBase
    from trishield.stages import Run
    from trishield.trace import TRACE_VERSION, Trace
    from wiki5k_questions import wiki5k_base

    plan = {b.name: b for b in full_plan(("none",), PoisonedRAGOptions(out=Path(".")).sizes)
            if b.condition is None}
    order = seeded_order(load_targets(), args.seed)
    ring1, ring2 = Ring1Filter(), Ring2Reranker()
    orders: dict[str, Callable] = {}
    report: dict[str, dict] = {}
    with KnowledgeBase.open(wiki5k_base(args.work_dir)) as kb:
        retriever = KBRetriever(kb)
        stored = set(kb.document_ids())

        def trusted(question: str, candidates: list) -> list[str]:
            run = Run(Trace(version=TRACE_VERSION, question=question, defense="ring12",
                            backend="dense", k=args.k, panel=[]), retriever=retriever)
            kept = ring1.screen(run, question, candidates)
            return [p.text for p in ring2.rerank(run, question, kept, args.k).context]

        orders = {
            "retrieval": lambda q, pool: [c.chunk.text for c in pool[:args.k]],
            "ring12": trusted,
            "ring12, no titles": lambda q, pool: trusted(q, [untitled(c) for c in pool]),
        }
        for name in args.block or BLOCKS:
            rows = []
            for question in block_questions(plan[name], order, stored, args.seed):
                pool = retriever.retrieve(question.text, args.pool)
                rows.append({"id": question.id, "in_pool": first_gold(
                                 [c.chunk.text for c in pool], question.golds)}
                            | {label: first_gold(read(question.text, pool), question.golds)
                               for label, read in orders.items()})
            report[name] = {"questions": len(rows), "rows": rows}
            print(f"{name}: {len(rows)} questions, "
                  f"{sum(r['in_pool'] is not None for r in rows)} with a gold passage "
                  f"in the pool of {args.pool}")
            for label in orders:
                first = sum(r[label] == 0 for r in rows)
                within = sum(r[label] is not None for r in rows)
                print(f"  {label:18s} gold passage first {first:3d}   in the context "
                      f"of {args.k} {within:3d}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
