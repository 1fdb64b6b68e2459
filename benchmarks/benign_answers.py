"""Benign answers on the matrix's SQuAD and NQ questions: accuracy, refusals, calls and time.

The PoisonedRAG matrix (``benchmarks/poisonedrag.py``) asks its benign blocks with the fast
panel over dense retrieval, so that its 7,000 answers stay affordable on 2 cores. This
benchmark asks the same questions (the matrix's seeded order over the same wiki5k KB) with
the product's defaults — the default panel, the default retrieval backend — or any other
choice, and answers one question at a time with every defense in turn (alternating which goes
first), so that the seconds of ``none`` and ``full-gated`` are measured under the same load:
their ratio is the figure, not either alone.

Each defense reads through its own response cache (``--cache-dir/<defense>``), so a rerun is
free but one defense never replays another's answer; seconds are compared only on questions
where neither defense was served from cache (the printed ``timed`` count).

    PYTHONPATH=src .venv/bin/python benchmarks/benign_answers.py --questions 40 \\
        --out benchmarks/results/benign-answers.json
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from interleaved import ask_in_turn, timing
from trishield.defenses.retrievers import KBRetriever
from trishield.eval.metrics import answer_quality
from trishield.eval.poisonedrag import knowledge_bases as kbs
from trishield.eval.poisonedrag.attacks import load_targets
from trishield.eval.poisonedrag.defenses import make_asker, validate
from trishield.eval.poisonedrag.questions import Question, nq_questions, squad_questions
from trishield.eval.poisonedrag.records import extract
from trishield.eval.poisonedrag.scoring import wilson_interval
from trishield.kb import KnowledgeBase
from trishield.kb.indexes.retrieval import BACKENDS
from trishield.llm.cache import ResponseCache
from trishield.llm.panel import DEFAULT_PANEL, DEFAULT_SECOND_READER, build_reader
from trishield.settings import PipelineConfig

K = 5
MATRIX_BLOCK = 100
"""The matrix asks each benign set's first 100 questions (``plan.Sizes``)."""


def ask_interleaved(kb: KnowledgeBase, questions: Sequence[Question], defenses: Sequence[str],
                    *, panel_specs: Sequence[str], second_reader: str | None, backend: str,
                    cache_dir: Path) -> dict[str, list[dict]]:
    """Every question by every defense in turn; the defense that goes first alternates."""
    config = PipelineConfig(backend=backend)
    config = replace(config, scorer=replace(config.scorer, context=K))
    retriever = KBRetriever(kb, backend)
    askers = {}
    for defense in defenses:
        cache = ResponseCache(cache_dir / defense)
        panel = [build_reader(spec, cache=cache) for spec in panel_specs]
        second = build_reader(second_reader, cache=cache) if second_reader else None
        askers[defense] = make_asker(defense, retriever, panel, config, second_reader=second)

    def asker(defense: str) -> Callable[[Question], dict]:
        def ask(question: Question) -> dict:
            return extract(askers[defense](question.text), k=K) | {"question": question.id}
        return ask

    def show(number: int, records: Mapping[str, list[dict]]) -> None:
        print(f"  {number + 1}/{len(questions)} " + "  ".join(
            f"{d}: {records[d][-1]['answer']!r:.40}" for d in defenses), flush=True)

    return ask_in_turn(questions, {d: asker(d) for d in defenses}, on_question=show)


def summarise(questions: Sequence[Question], records: Sequence[dict]) -> dict:
    contains = [answer_quality(None if r["refused"] else r["answer"], q.golds)["contains"]
                for q, r in zip(questions, records, strict=True)]
    correct = int(sum(contains))
    refused = sum(r["refused"] for r in records)
    return {"questions": len(records), "correct": correct,
            "accuracy": round(correct / max(1, len(records)), 3),
            "accuracy_ci95": wilson_interval(correct, len(records)),
            "false_refusals": refused,
            "false_refusal_rate": round(refused / max(1, len(records)), 3),
            "llm_calls_per_question": round(sum(r["llm_calls"] for r in records)
                                            / max(1, len(records)), 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/poisonedrag"),
                        help="where the matrix's wiki5k KB is (built on first use)")
    parser.add_argument("--sets", nargs="+", choices=("squad", "nq"), default=["squad", "nq"])
    parser.add_argument("--questions", type=int, default=40,
                        help="the first N of each set's seeded order (the matrix asks 100)")
    parser.add_argument("--defenses", nargs="+", default=["none", "full-gated"])
    parser.add_argument("--panel", nargs="+", default=list(DEFAULT_PANEL))
    parser.add_argument("--second-reader", default=DEFAULT_SECOND_READER)
    parser.add_argument("--backend", choices=BACKENDS, default="hybrid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, help="default WORK/benign-cache")
    parser.add_argument("--out", type=Path, help="JSON figures")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    defenses = validate(args.defenses)
    if args.questions < 1:
        parser.error("--questions must be at least 1")

    clean = kbs.profile_documents("wiki5k", load_targets(), args.seed)
    base = kbs.build_base(args.work_dir, "wiki5k", clean)
    load = os.getloadavg()
    figures: dict[str, object] = {
        "panel": args.panel, "second_reader": args.second_reader, "backend": args.backend,
        "defenses": list(defenses), "questions_per_set": args.questions, "seed": args.seed,
        "load_average_start": [round(x, 2) for x in load]}
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; panel "
          f"{','.join(args.panel)}; backend {args.backend}")
    with KnowledgeBase.open(base) as kb:
        stored = set(kb.document_ids())
        for name in args.sets:
            pick = squad_questions if name == "squad" else nq_questions
            # the matrix's block of 100 in its seeded order, then its first N
            questions = pick(stored, MATRIX_BLOCK, args.seed)[:args.questions]
            records = ask_interleaved(
                kb, questions, defenses, panel_specs=args.panel,
                second_reader=args.second_reader if args.second_reader != "none" else None,
                backend=args.backend, cache_dir=args.cache_dir or args.work_dir / "benign-cache")
            row = {d: summarise(questions, records[d]) for d in defenses}
            row["timing"] = timing(records, defenses[0],
                                   lambda r: r["llm_calls_uncached"] == r["llm_calls"])
            row["records"] = {d: [{k: r[k] for k in ("question", "answer", "refused", "reason",
                                                      "llm_calls")} for r in records[d]]
                              for d in defenses}
            figures[name] = row
            for d in defenses:
                s = row[d]
                print(f"{name:6s} {d:12s} {s['correct']:3d}/{s['questions']:<3d} acc "
                      f"{s['accuracy']:.2f} refused {s['false_refusals']} calls/q "
                      f"{s['llm_calls_per_question']:.2f} "
                      f"{row['timing']['seconds_per_question'][d]:.1f} s/q "
                      f"(x{row['timing']['ratio_to_' + defenses[0]][d]} of {defenses[0]} on "
                      f"{row['timing']['timed_questions']} fresh questions)")
    load = os.getloadavg()
    figures["load_average_end"] = [round(x, 2) for x in load]
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        print(f"figures: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
