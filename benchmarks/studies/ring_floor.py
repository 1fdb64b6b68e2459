"""What Rings 1 and 2 would cost on wiki5k if reading each passage were free (issue 19).

Issue 19 asks that Rings 1 and 2 add at most 10% to undefended retrieval. The open route was
compiling the per-passage reading (docs/design/weaknesses.md). This measures how far
that route can go, before anyone writes it: it times ``ring12`` as ``ring_latency.py`` does
(interleaved with ``none``, question by question, extractive reader, a pool of 20), first as
it is, then with every per-passage step served from a memo filled by an earlier pass over
the same questions:

- decoding a candidate's stored analysis (``PassageAnalyser.of`` and ``.ring2_of``),
- Ring 1's verdict on a passage (``IngestGuard.judge``: its patterns with the question,
  the misspelt question words, the weights, the reasons),
- Ring 2's reading of a passage's claim for the question (``claim_of`` in the evidence).

A memo hit costs a dictionary lookup, so what is left is what an infinitely fast compiled
reader would leave: the pool's embeddings and ``S_out``, the tampered-copy comparison, the
evidence's pairwise structure, the writer records, the scoring and the trace sections.

The memo must not change what the rings decide: every answer of a later pass, with its whole
trace (timings and durations aside), is compared with the first plain pass's, and the
script exits non-zero if one differs. Prints p50s and the ratio per pass, never a pass/fail.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/studies/ring_floor.py --questions 200

The KB is the benchmark's wiki5k base (built by ``trishield eval poisonedrag`` or here).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wiki5k_questions import question_arguments

PASSES = ("plain", "fill", "free reading", "plain", "free reading")
"""The passes, in order: each plain pass is followed by memo passes, so that drift in the
machine's speed shows in the plain figures rather than in the comparison."""


@contextmanager
def free_reading(question_of: Callable[[], str], memo: dict) -> Iterator[None]:
    """Every per-passage step served from ``memo`` (filled on a miss; see the module
    docstring) while the context is open; ``question_of`` gives the question being asked (a
    claim and a verdict depend on it)."""
    from trishield.rings import evidence, ingest_guard
    from trishield.rings.analysis import PassageAnalyser

    originals = (evidence.claim_of, ingest_guard.IngestGuard.judge, PassageAnalyser.of,
                 PassageAnalyser.ring2_of)
    claim_of, judge, analysis_of, ring2_of = originals

    def remembered(key, compute):
        found = memo.get(key)
        if found is None:
            found = memo[key] = compute()
        return found

    def memo_claim_of(asked, text, stored=None, subject=""):
        return remembered(("claim", question_of(), text, subject),
                          lambda: claim_of(asked, text, stored, subject))

    def memo_judge(self, subject, text, **options):
        key = ("verdict", subject, text, *sorted((k, v if not isinstance(v, list) else tuple(v))
                                                 for k, v in options.items()
                                                 if k != "analysis"))
        return remembered(key, lambda: judge(self, subject, text, **options))

    def memo_of(self, text, stored):
        return remembered(("analysis", text, stored), lambda: analysis_of(self, text, stored))

    def memo_ring2_of(self, stored):
        return remembered(("reading", stored), lambda: ring2_of(self, stored))

    evidence.claim_of = memo_claim_of
    ingest_guard.IngestGuard.judge = memo_judge
    PassageAnalyser.of, PassageAnalyser.ring2_of = memo_of, memo_ring2_of
    try:
        yield
    finally:
        (evidence.claim_of, ingest_guard.IngestGuard.judge, PassageAnalyser.of,
         PassageAnalyser.ring2_of) = originals


def without_durations(value):
    """``value`` (a trace dumped as JSON data) without its timings and durations: the
    ``timings_s`` section and every ``seconds`` field (a call's, a reader's, a vote's)."""
    if isinstance(value, dict):
        return {key: without_durations(item) for key, item in value.items()
                if key not in ("timings_s", "seconds")}
    if isinstance(value, list):
        return [without_durations(item) for item in value]
    return value


def decided(answer) -> str:
    """An answer with its whole trace, durations aside."""
    return repr((answer.answer, answer.refused, answer.reason, answer.citations,
                 without_durations(answer.trace.model_dump(mode="json"))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = question_arguments(parser, questions=200)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trishield.defenses.retrievers import KBRetriever
    from trishield.eval.poisonedrag.defenses import make_asker
    from trishield.kb import KnowledgeBase
    from trishield.llm.panel import build_panel
    from trishield.settings import PipelineConfig
    from wiki5k_questions import seeded_questions, wiki5k_base

    base = wiki5k_base(args.work_dir)
    panel = build_panel(["extractive"])
    config = PipelineConfig(backend="dense")
    asking: list[str] = [""]
    differing = compared = 0
    with KnowledgeBase.open(base) as kb:
        questions = seeded_questions(kb, args.questions, args.seed)
        none = make_asker("none", KBRetriever(kb), panel, config)
        ring12 = make_asker("ring12", KBRetriever(kb), panel, config)
        for question in questions[:5]:  # warm-up: models loaded, caches filled
            none(question)
            ring12(question)
        print(f"wiki5k, {len(questions)} questions (SQuAD + NQ, seed {args.seed}), dense, "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'pass':14s} {'none retrieval':>15s} {'ring12 retrieval':>17s} "
              f"{'ring1':>7s} {'ring2':>7s} {'ratio median':>13s}")
        plain: dict[str, str] = {}
        memo: dict = {}  # kept across the memo passes: the first fills it
        for name in PASSES:
            stages: dict[str, list[float]] = {"none": [], "retrieval": [], "ring1": [],
                                              "ring2": [], "ratio": []}
            with (nullcontext() if name == "plain"
                  else free_reading(lambda: asking[0], memo)):
                for question in questions:
                    asking[0] = question
                    undefended = none(question).trace.timings_s["retrieval"]
                    answer = ring12(question)
                    timings = answer.trace.timings_s
                    if question not in plain:  # the first pass: plain
                        plain[question] = decided(answer)
                    else:
                        compared += 1
                        differing += decided(answer) != plain[question]
                    defended = timings["retrieval"] + timings["ring1"] + timings["ring2"]
                    for stage, value in (("none", undefended),
                                         ("retrieval", timings["retrieval"]),
                                         ("ring1", timings["ring1"]),
                                         ("ring2", timings["ring2"]),
                                         ("ratio", defended / undefended)):
                        stages[stage].append(value)
            p50 = {stage: statistics.median(values) for stage, values in stages.items()}
            print(f"{name:14s} {p50['none'] * 1000:12.2f} ms {p50['retrieval'] * 1000:14.2f} "
                  f"ms {p50['ring1'] * 1000:4.2f} ms {p50['ring2'] * 1000:4.2f} ms "
                  f"{p50['ratio']:13.3f}")
    print(f"answers and traces of the later passes that differ from the first: "
          f"{differing} of {compared}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
