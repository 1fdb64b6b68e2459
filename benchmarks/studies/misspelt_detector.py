"""Ring 1's ``misspelt_query`` detector, measured without a model (docs/benchmarks.md,
"Misspelt poisons").

* **Catch**: the ``misspelt`` family's poisons (all 100 targets), each read against its own
  target question: how many the detector blocks, and how many of them hide from Ring 2's claim
  reader (they hold less than half of the question's terms letter for letter).
* **The matrix's texts**: every (question, text) pair of the PoisonedRAG matrix that a pool
  can hold (the questions of its plan: 100 targets, 100 SQuAD, 100 NQ; every wiki5k chunk and
  every poison of every family the plan attacks with). The detector's minimum of two
  misspelt words was chosen looking at these pairs, so they show the matrix's answers stand
  (the detector fires on none of them), not its precision.
* **The safety suite**: its questions against its policy documents and poisons (its committed
  answers stand too when the detector fires on none).
* **Held out**: corpora and questions not looked at while choosing it: SQuADShifts
  "new wiki" (``--squadshifts`` questions, seeded, against all 1,581 paragraphs), HotpotQA and
  MuSiQue (their 100 questions each against their whole corpus).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/misspelt_detector.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trishield.config import enforce_offline


def fires(questions: Sequence[str], texts: Sequence[str]) -> dict[str, object]:
    """How many (question, text) pairs the detector fires on, with the first few."""
    from trishield.rings.misspelling import misspelt_question_words
    from trishield.rings.patterns import _query_words, text_signals

    signals = [text_signals(text) for text in texts]
    found = []
    for question in questions:
        asked = _query_words(question)
        for n, passage in enumerate(signals):
            misspelt = misspelt_question_words(passage.words, passage.unknown, asked)
            if misspelt:
                found.append({"question": question, "text": texts[n][:160],
                              "misspelt": misspelt})
    return {"questions": len(questions), "texts": len(texts),
            "pairs": len(questions) * len(texts), "fired": len(found), "examples": found[:5]}


def catch() -> dict[str, object]:
    """The ``misspelt`` poisons against their own target questions."""
    from trishield.eval.poisonedrag.attacks import get_family, load_targets
    from trishield.rings.claims import MIN_RELEVANCE, relevance
    from trishield.rings.misspelling import misspelt_question_words
    from trishield.rings.patterns import _query_words, text_signals

    family = get_family("misspelt")
    poisons = caught = hidden = hidden_caught = 0
    for target in load_targets():
        asked = _query_words(target.question)
        for poison in family.poisons(target, 0):
            poisons += 1
            signals = text_signals(poison.text)
            hit = bool(misspelt_question_words(signals.words, signals.unknown, asked))
            caught += hit
            if relevance(target.question, poison.text) < MIN_RELEVANCE:
                hidden += 1
                hidden_caught += hit
    return {"poisons": poisons, "caught": caught, "hidden_from_claim_reader": hidden,
            "hidden_and_caught": hidden_caught}


def matrix_texts(work_dir: Path) -> tuple[list[str], list[str]]:
    """The questions of the matrix's plan, and every chunk its pools can hold: the wiki5k
    base's chunks and every poison of every family the plan attacks with, chunked as the KB
    stores them."""
    from trishield.eval.poisonedrag import knowledge_bases as kbs
    from trishield.eval.poisonedrag.attacks import get_family, load_targets, seeded_order
    from trishield.eval.poisonedrag.plan import families_of, full_plan
    from trishield.eval.poisonedrag.runner import block_questions
    from trishield.kb import KnowledgeBase
    from trishield.kb.chunking import ChunkingConfig, chunk_document

    targets = load_targets()
    base = kbs.build_base(work_dir, "wiki5k", kbs.profile_documents("wiki5k", targets, 0))
    with KnowledgeBase.open(base) as kb:
        stored = set(kb.document_ids())
    plan = full_plan()
    order = seeded_order(targets, 0)
    questions = list(dict.fromkeys(question.text for block in plan
                                   for question in block_questions(block, order, stored, 0)))
    with sqlite3.connect(base / "kb.sqlite") as db:
        texts = [row[0] for row in db.execute("SELECT text FROM chunks ORDER BY pk")]
    for name in sorted({family for family, _ in families_of(plan)}):
        family = get_family(name)
        texts += [chunk.text for target in targets for doc in family.poisons(target, 0)
                  for chunk in chunk_document(doc, ChunkingConfig(strategy="window"))]
    return questions, texts


def safety_texts() -> tuple[list[str], list[str]]:
    """The safety suite's questions, and its policy documents and poisons."""
    from trishield.eval.safety_cases import load_qa_slice, load_safety_suite

    suite = load_safety_suite()
    questions = [case.question for group in (suite.attacks, suite.unanswerable, suite.benign,
                                             suite.bystanders) for case in group]
    texts = [paragraph["context"] for article in load_qa_slice()["data"]
             for paragraph in article["paragraphs"]]
    return questions, texts + [doc.text for doc in suite.poison_documents()]


def held_out(squadshifts: int, seed: int) -> dict[str, dict[str, object]]:
    """Corpora and questions the detector's minimum was not chosen on."""
    from trishield.config import data_dir
    from trishield.kb.datasets import load_named

    root = data_dir()
    shifts = json.loads((root / "squadshifts/new_wiki_v1.0.json").read_text("utf-8"))
    asked = [qa["question"] for article in shifts["data"] for paragraph in article["paragraphs"]
             for qa in paragraph["qas"]]
    sets = {"squadshifts-new-wiki": (random.Random(seed).sample(asked, squadshifts),
                                     [d.text for d in load_named("squadshifts-new-wiki")])}
    for name in ("hotpotqa", "musique"):
        rows = json.loads((root / f"hipporag/{name}_train.json").read_text("utf-8"))
        sets[name] = ([row["question"] for row in rows], [d.text for d in load_named(name)])
    return {name: fires(questions, texts) for name, (questions, texts) in sets.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/poisonedrag"))
    parser.add_argument("--squadshifts", type=int, default=300,
                        help="SQuADShifts questions drawn (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args()
    if args.squadshifts < 1:
        parser.error("--squadshifts must be at least 1")
    enforce_offline()

    started = time.perf_counter()
    figures: dict[str, object] = {"catch": catch()}
    questions, texts = matrix_texts(args.work_dir)
    figures["matrix"] = fires(questions, texts)
    figures["safety"] = fires(*safety_texts())
    figures["held_out"] = held_out(args.squadshifts, args.seed)
    caught = figures["catch"]
    print(f"misspelt poisons blocked against their own question: {caught['caught']} of "
          f"{caught['poisons']} ({caught['hidden_and_caught']} of the "
          f"{caught['hidden_from_claim_reader']} that hide from the claim reader)")
    for name, found in [("matrix", figures["matrix"]), ("safety suite", figures["safety"]),
                        *figures["held_out"].items()]:
        print(f"{name}: fired on {found['fired']} of {found['pairs']:,} (question, text) "
              f"pairs ({found['questions']} questions x {found['texts']:,} texts)")
        for example in found["examples"]:
            print(f"    {example['misspelt']}  {example['question']!r}")
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n",
                            encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
