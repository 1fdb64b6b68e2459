"""What Ring 2's writer cap costs benign questions in a knowledge base with several writers.

The context takes at most ``per_writer`` passages from one writer while other writers'
passages remain in the pool (docs/design/ring2-retrieval-scorer.md), so that one attacker cannot
fill it. In a
KB written by one writer the cap never binds; in a KB of many writers it does, on every
question. This benchmark re-attributes each wiki5k document to one of ``--writers`` writers
(by a hash of its id, every tier neutral, at retrieval: the KB is not rebuilt) and answers the
same seeded SQuAD + NQ questions with ``ring12`` and the extractive reader (no LLM), with the
cap as configured and with it lifted, printing contains-answer accuracy and how many contexts
the cap changed.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/writer_cap.py --writers 5 --questions 400
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import zlib
from pathlib import Path

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/poisonedrag"))
    parser.add_argument("--writers", type=int, default=5)
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.writers < 1 or args.questions < 1:
        parser.error("--writers and --questions must be at least 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trishield.defenses.retrievers import KBRetriever
    from trishield.eval.metrics import answer_quality
    from trishield.eval.poisonedrag.defenses import make_asker
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel
    from trishield.settings import PipelineConfig
    from wiki5k_questions import seeded_question_records, wiki5k_base

    class Reattributed(KBRetriever):
        """The KB's candidates, each document's writer replaced by one of ``writers``."""

        def retrieve(self, query, k):
            return [dataclasses.replace(c, chunk=dataclasses.replace(
                c.chunk, writer=f"writer-{zlib.crc32(c.chunk.doc_id.encode()) % args.writers}"))
                for c in super().retrieve(query, k)]

    base = wiki5k_base(args.work_dir)
    panel = build_panel(["extractive"])
    with KnowledgeBase.open(base) as kb:
        questions = seeded_question_records(kb, args.questions, args.seed)
        default = PipelineConfig(backend="dense")
        caps = {"capped": default.scorer.per_writer, "uncapped": default.scorer.pool}
        contexts: dict[str, list[list[str]]] = {}
        for name, cap in caps.items():
            config = dataclasses.replace(default, scorer=dataclasses.replace(
                default.scorer, per_writer=cap))
            ask = make_asker("ring12", Reattributed(kb), panel, config)
            right, contexts[name] = 0.0, []
            for question in questions:
                answer = ask(question.text)
                contexts[name].append([c.id for c in answer.trace.context])
                right += answer_quality(answer.answer, question.golds)["contains"]
            print(f"{name:9s} (per_writer={cap:2d}): accuracy {right / len(questions):.4f} "
                  f"({right:.0f} of {len(questions)})")
    changed = sum(a != b for a, b in zip(contexts["capped"], contexts["uncapped"], strict=True))
    print(f"wiki5k, {args.writers} writers, {len(questions)} questions (SQuAD + NQ, seed "
          f"{args.seed}), dense ring12, extractive reader: the cap changed {changed} contexts")


if __name__ == "__main__":
    sys.exit(main())
