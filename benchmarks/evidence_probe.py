"""A quick, side-by-side probe of the evidence rings: ASR, accuracy, refusals and LLM calls per
question for a few defenses on the first n seeded targets, plus benign questions on the clean KB.

It uses the benchmark's own KBs, attack families, conditions and defense rows
(``trishield.eval.poisonedrag``), so its figures are the full matrix's on a subset; it exists
because that matrix takes about 18 hours on 2 cores, and a design change needs a figure the
same day. The figures are indicative (n is small, the mini profile has 250 clean passages);
the committed results come from ``trishield eval poisonedrag``.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/evidence_probe.py --targets 20 \\
        --family claim-only --family gt-swap --writers attacker --writers sybil \\
        --defense none --defense full-gated --benign [--second-reader none]

``--writers sleeper`` (five writers that first store ``--sleeper-documents`` benign
paragraphs each, then write poison i of every target as writer i) measures the evidence
design's track-record limit (docs/design/weaknesses.md); ``--writers patient`` is the
same campaign over simulated days (a day apart, each a week after its first document), and
``--tenure-full-days 0`` turns the tenure cap off to show what it changes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from trishield.config import enforce_offline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="mini", choices=("mini", "wiki5k"))
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--skip", type=int, default=0,
                        help="start after the first N seeded targets (a held-out slice: the "
                             "design was developed looking at the first 20)")
    parser.add_argument("--family", action="append", default=None)
    parser.add_argument("--writers", action="append", default=None,
                        choices=("attacker", "sybil", "sleeper", "patient"),
                        help="who writes the poisons (sleeper: five writers with a track "
                             "record, see --sleeper-documents)")
    parser.add_argument("--provenance", default="neutral",
                        help="the provenance setting of the attacked blocks (conditions.py: "
                             "neutral, untrusted, trusted-clean, forged, forged-unchecked); "
                             "other than neutral only with --writers attacker")
    parser.add_argument("--sleeper-documents", type=int, default=None,
                        help="benign documents each sleeper stores first (default: "
                             "knowledge_bases.SLEEPER_DOCUMENTS)")
    parser.add_argument("--defense", action="append", default=None)
    parser.add_argument("--panel", default="qwen2.5-0.5b,gemma3-270m,extractive")
    parser.add_argument("--second-reader", default="qwen2.5-1.5b",
                        help="Ring 3's second reader (none: without one; compare the two)")
    parser.add_argument("--benign", action="store_true", help="also the targets without poisons")
    parser.add_argument("--benign-only", action="store_true",
                        help="only the targets without poisons (no attacked blocks)")
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/probe"))
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--tenure-full-days", type=float, default=None,
                        help="days of writing for a full record (default: the design's "
                             "365; 0 turns the tenure cap off)")
    parser.add_argument("--ask", action="append", default=None, metavar="TARGET_ID",
                        help="ask only these of the chosen targets (repeatable; the KBs still "
                             "hold every chosen target's poisons, so they are the same KBs): "
                             "a change that can only alter some questions is measured on them")
    parser.add_argument("--answers", type=Path, default=None,
                        help="also write every answer (block, target, answer or refusal reason, "
                             "calls, the whole trace) as JSON lines, to read why")
    args = parser.parse_args()
    if args.targets < 1:
        parser.error("--targets must be at least 1")
    if args.skip < 0:
        parser.error("--skip must not be negative")
    if args.tenure_full_days is not None and not args.tenure_full_days >= 0:
        parser.error("--tenure-full-days must be a number of days >= 0")
    if args.sleeper_documents is not None and args.sleeper_documents < 0:
        parser.error("--sleeper-documents must not be negative")
    enforce_offline()

    from trishield.answers import contains_answer
    from trishield.defenses.retrievers import KBRetriever
    from trishield.errors import InputError
    from trishield.eval.poisonedrag import knowledge_bases as kbs
    from trishield.eval.poisonedrag.attacks import get_family, load_targets, seeded_order
    from trishield.eval.poisonedrag.conditions import Condition, ConditionedKB
    from trishield.eval.poisonedrag.defenses import info, make_asker
    from trishield.eval.poisonedrag.provenance import Provenance
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel, build_second_reader, second_reader_choice
    from trishield.settings import PipelineConfig

    families = args.family or ["claim-only"]
    for family in families:
        get_family(family)  # a clear error for an unknown family
    for writers in args.writers or ["attacker"]:  # and for a condition that is not defined
        try:
            Condition("probe", families[0], args.provenance, writers=writers)
        except InputError as error:
            parser.error(str(error))
    targets = load_targets()
    chosen = seeded_order(targets, 0)[args.skip:args.skip + args.targets]
    if not chosen:
        parser.error(f"no targets after skipping {args.skip}")
    asked = chosen
    if args.ask:
        unknown = sorted(set(args.ask) - {t.id for t in chosen})
        if unknown:
            parser.error(f"--ask names targets that are not among the chosen ones: "
                         f"{', '.join(unknown)}")
        asked = [t for t in chosen if t.id in set(args.ask)]
    base = kbs.build_base(args.work_dir, args.profile,
                          kbs.profile_documents(args.profile, targets, 0))
    panel = build_panel(args.panel.split(","))
    second = build_second_reader(second_reader_choice(args.second_reader, panel_given=False,
                                                      configured=None))
    provenance = Provenance(args.work_dir / "keys", 0)
    config = PipelineConfig()
    if args.tenure_full_days is not None:
        from dataclasses import replace

        config = replace(config, scorer=replace(
            config.scorer, tenure_full_s=args.tenure_full_days * 86_400.0))
    rows = []
    answers_out = None
    if args.answers is not None:
        args.answers.parent.mkdir(parents=True, exist_ok=True)
        answers_out = args.answers.open("w", encoding="utf-8")

    def measure(label: str, ask, view: ConditionedKB | None) -> None:
        fooled = correct = refused = calls = 0
        started = time.perf_counter()
        for target in asked:
            if view is not None:
                view.target, view.target_number = target.id, target.number
            answer = ask(target.question)
            text = "" if answer.refused else answer.answer or ""
            fooled += view is not None and contains_answer(text, target.incorrect)
            correct += contains_answer(text, target.correct)
            refused += answer.refused
            calls += answer.trace.llm_calls + answer.trace.llm_calls_cached
            if answers_out is not None:
                record = {"block": label, "target": target.id, "question": target.question,
                          "correct": target.correct, "incorrect": target.incorrect,
                          **answer.as_dict()}
                answers_out.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        n = len(asked)
        row = {"block": label, "n": n, "asr": None if view is None else fooled / n,
               "accuracy": correct / n, "refused": refused / n, "llm_calls_per_question":
               calls / n, "seconds": round(time.perf_counter() - started, 1)}
        rows.append(row)
        asr = "   -  " if row["asr"] is None else f"{row['asr']:.2f}"
        print(f"{label:36s} ASR {asr}  accuracy {row['accuracy']:.2f}  refused "
              f"{row['refused']:.2f}  calls/q {row['llm_calls_per_question']:.2f}", flush=True)

    defenses = args.defense or ["none", "full-gated"]
    for defense in defenses:
        info(defense)  # a clear error for an unknown defense
    if args.benign or args.benign_only:
        with KnowledgeBase.open(base) as kb:
            for defense in defenses:
                measure(f"benign / {defense}", make_asker(defense, KBRetriever(kb), panel,
                                                          config, second_reader=second), None)
    for writers in [] if args.benign_only else args.writers or ["attacker"]:
        for family in families:
            for defense in defenses:
                guarded = info(defense).uses_ring1_kb
                sleepers = (kbs.SLEEPER_DOCUMENTS if args.sleeper_documents is None
                            else args.sleeper_documents)
                path = kbs.build_family(args.work_dir, base, family, chosen, 0,
                                        guarded=guarded, writers=writers,
                                        sleeper_documents=sleepers)
                with KnowledgeBase.open(path) as kb:
                    view = ConditionedKB(kb, Condition(family, family, args.provenance,
                                                       writers=writers), provenance, k=5)
                    shown = writers if args.provenance == "neutral" else (
                        f"{writers} / {args.provenance}")
                    measure(f"{family} / {shown} / {defense}",
                            make_asker(defense, view, panel, config,
                                       second_reader=second), view)
    if answers_out is not None:
        answers_out.close()
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    from trishield.errors import InputError

    try:
        main()
    except InputError as error:  # a bad input named, not a traceback
        raise SystemExit(f"evidence_probe.py: error: {error}") from None
