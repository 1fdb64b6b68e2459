"""What the candidate pool buys against poisoning (issue 19): Rings 1 and 2 at query time with
pools of different sizes, on the PoisonedRAG matrix's poisoned wiki5k KBs.

Issue 19 asks that Rings 1 and 2 add at most 10% to undefended retrieval.
``ring_latency.py --pool 20 --pool 10`` measures the price of the pool side by side; this
measures what a smaller pool gives up, so that the choice rests on both figures. No LLM is
asked (the extractive reader answers), so it runs in minutes; the question is what reaches
the context, which is the rings' job, not how a model reads it.

For each attack family, each of its two KBs and each pool, ``ring12`` (a pool of candidates,
Ring 1 after retrieval, Ring 2's trust ranking, the top 5 as context) asks the seeded targets
under the matrix's ``neutral`` provenance and counts:

- ``poisoned``: the context holds one of *this target's* poisons (another target's poison
  in the context is no attack on this question; the matrix's ``context_exposure`` counts any);
- ``refused``: no answer, with the refusals' reasons;
- ``incorrect`` / ``correct``: the extractive answer holds the target's false / true answer.

The ``plain`` KB stores every poison, i.e. it is what reaches query time when the ingest
screen lets poisons through; ``guarded`` is the KB that had Ring 1 at ingest (the one the
matrix's ``ring12`` reads). The ``mixed`` family puts ten poisons per target (the published
and the template texts), twice the others' five: more than a pool of 10 can hold beside them.
Then the clean base answers the seeded wiki5k questions (SQuAD + NQ) at each pool: the gold
answer found, and refusals.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/pool_margin.py --work-dir ...

Family KBs missing from the work dir are built (the matrix builds them: ``trishield eval
poisonedrag``); about two minutes each on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wiki5k_questions import question_arguments

FAMILIES = ("published", "question-moved", "claim-only", "gt-swap", "refute", "diverse",
            "mixed")
TARGETS = 100


def refusal_kind(reason: str | None) -> str:
    """A refusal's reason up to its first colon: the kind, without the passage ids."""
    return (reason or "").split(":", 1)[0].strip() or "(none given)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, nargs="+", default=[20, 10])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--targets", type=int, default=TARGETS,
                        help=f"attacked targets per KB, in the matrix's seeded order "
                             f"(at most {TARGETS})")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    args = question_arguments(parser, questions=200)
    if not 1 <= args.targets <= TARGETS:
        parser.error(f"--targets must be between 1 and {TARGETS}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trishield.answers import contains_answer
    from trishield.defenses.retrievers import KBRetriever
    from trishield.errors import TriShieldError
    from trishield.eval.poisonedrag import knowledge_bases as kbs
    from trishield.eval.poisonedrag.attacks import (
        get_family,
        is_poison,
        load_targets,
        poison_target,
        seeded_order,
    )
    from trishield.eval.poisonedrag.conditions import Condition, ConditionedKB
    from trishield.eval.poisonedrag.defenses import make_asker
    from trishield.eval.poisonedrag.provenance import Provenance
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel
    from trishield.settings import PipelineConfig
    from wiki5k_questions import pooled_configs, seeded_question_records, wiki5k_base

    try:
        for family in args.families:
            get_family(family)
    except TriShieldError as error:
        parser.error(str(error))
    configs = pooled_configs(parser, PipelineConfig(backend="dense"), args.pools)
    panel = build_panel(["extractive"])
    attacked = seeded_order(load_targets(), args.seed)[:TARGETS]  # as the matrix builds them
    targets = attacked[:args.targets]
    base = wiki5k_base(args.work_dir)
    provenance = Provenance(args.work_dir / "keys", args.seed)
    rows = []

    def report(row: dict) -> None:
        rows.append(row)
        reasons = ", ".join(f"{kind} {n}" for kind, n in sorted(row["refusals"].items()))
        print(f"{row['kb']:30s} {row['pool']:4d} {row.get('poisoned', ''):>8} "
              f"{row['refused']:7d} {row.get('incorrect', ''):>9} {row['correct']:7d}"
              f"  {reasons}", flush=True)

    print(f"{'kb':30s} {'pool':>4s} {'poisoned':>8s} {'refused':>7s} {'incorrect':>9s} "
          f"{'correct':>7s}  refusals by kind")
    for family in args.families:
        for guarded in (False, True):
            path = kbs.build_family(args.work_dir, base, family, attacked, args.seed,
                                    guarded=guarded, say=print)
            with KnowledgeBase.open(path) as kb:
                view = ConditionedKB(kb, Condition(family, family), provenance)
                for pool, pooled in configs.items():
                    ask = make_asker("ring12", view, panel, pooled)
                    counts = Counter()
                    refusals = Counter()
                    for target in targets:
                        view.target, view.target_number = target.id, target.number
                        answer = ask(target.question)
                        shown = {row.id for row in answer.trace.context}
                        counts["poisoned"] += any(
                            is_poison(c.doc_id) and poison_target(c.doc_id) == target.id
                            for c in answer.trace.candidates if c.chunk_id in shown)
                        if answer.refused:
                            counts["refused"] += 1
                            refusals[refusal_kind(answer.reason)] += 1
                            continue
                        counts["incorrect"] += contains_answer(answer.answer or "",
                                                               target.incorrect)
                        counts["correct"] += contains_answer(answer.answer or "",
                                                             target.correct)
                    report({"kb": path.name, "family": family, "guarded": guarded,
                            "pool": pool, "targets": len(targets),
                            **{k: counts[k] for k in ("poisoned", "refused", "incorrect",
                                                      "correct")},
                            "refusals": dict(refusals)})
    with KnowledgeBase.open(base) as kb:
        questions = seeded_question_records(kb, args.questions, args.seed)
        for pool, pooled in configs.items():
            ask = make_asker("ring12", KBRetriever(kb), panel, pooled)
            counts = Counter()
            refusals = Counter()
            for question in questions:
                answer = ask(question.text)
                if answer.refused:
                    counts["refused"] += 1
                    refusals[refusal_kind(answer.reason)] += 1
                else:
                    counts["correct"] += any(contains_answer(answer.answer or "", gold)
                                             for gold in question.golds)
            report({"kb": f"{base.name} (benign)", "family": None, "guarded": None,
                    "pool": pool, "questions": len(questions), "refused": counts["refused"],
                    "correct": counts["correct"], "refusals": dict(refusals)})
    if args.out is not None:
        args.out.write_text(json.dumps({"seed": args.seed, "targets": len(targets),
                                        "rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
