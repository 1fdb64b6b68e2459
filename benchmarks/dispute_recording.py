"""What recording a dispute costs a question (docs/design/ring3-consensus.md, "Disputes").

A KB with a conflict between two new writers (the Halden bridge of
``tests/dispute_support.py``: a year of a library's filler, then two designers minutes apart),
``full`` with the extractive reader (no LLM). The contested question is asked ``--repeats``
times with the disputes queue (the KB retriever records the conflict: one upsert, the first a
new row, every other one the deduplicated count) and as often without it (the same retriever
with its ``record_dispute`` hidden), interleaved so that load drifts hit both alike. Then the
recording alone: ``--repeats`` upserts of the same dispute and as many of new ones (distinct
questions). Prints medians and p90 in milliseconds, the ratio of the ask's median with the
queue to the one without, the load average before and after, and the rows in the queue (1
for the repeated question: no flood). Figures only, never pass/fail.

    HF_HUB_OFFLINE=1 PYTHONPATH=src:tests .venv/bin/python benchmarks/dispute_recording.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


class WithoutQueue:
    """The KB retriever, its disputes queue hidden: what a question costs without recording."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def retrieve(self, query, k):
        return self.inner.retrieve(query, k)

    def embeddings(self, candidates):
        return self.inner.embeddings(candidates)

    def unknown_terms(self, query):
        return self.inner.unknown_terms(query)

    def writer_records(self):
        return self.inner.writer_records()


class Capturing(WithoutQueue):
    """The KB retriever with its queue, keeping the last dispute it recorded."""

    seen = None

    def record_dispute(self, dispute):
        self.seen = dispute
        return self.inner.record_dispute(dispute)


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(values) * 1000:.2f} ms, p90 {p90 * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    if args.repeats < 2:
        parser.error("--repeats must be at least 2")

    from dispute_support import QUESTION, conflict_kb
    from trishield.defenses import build_defense
    from trishield.defenses.retrievers import KBRetriever
    from trishield.kb import KnowledgeBase
    from trishield.llm import ExtractiveReader

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as work, \
            KnowledgeBase.open(conflict_kb(Path(work) / "kb")) as kb:
        reader = [ExtractiveReader()]
        queued = build_defense("full", kb, reader)
        capturing = Capturing(KBRetriever(kb, queued.retriever.name))
        queued.retriever = capturing
        plain = build_defense("full", kb, reader)
        plain.retriever = WithoutQueue(KBRetriever(kb, plain.retriever.name))
        for pipeline in (queued, plain):  # warm-up: models, indexes, lexicons
            pipeline.ask(QUESTION)
        times: dict[str, list[float]] = {"with the queue": [], "without": []}
        for _ in range(args.repeats):
            for label, pipeline in (("with the queue", queued), ("without", plain)):
                started = time.perf_counter()
                answer = pipeline.ask(QUESTION)
                times[label].append(time.perf_counter() - started)
                assert answer.refused, answer.reason
        note = queued.ask(QUESTION).trace.evidence.dispute
        dispute = capturing.seen
        same, new = [], []
        for number in range(args.repeats):
            started = time.perf_counter()
            kb.record_dispute(dispute)
            same.append(time.perf_counter() - started)
            started = time.perf_counter()
            kb.record_dispute(replace(dispute, question=f"{QUESTION} ({number})"))
            new.append(time.perf_counter() - started)
        rows = len(kb.disputes(state="all", limit=10_000))
    load_after = os.getloadavg()
    with_queue, without = times["with the queue"], times["without"]
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"(2 cores, shared)")
    print(f"ask, with the queue:  {_ms(with_queue)}")
    print(f"ask, without:         {_ms(without)}")
    print(f"ratio of medians:     {statistics.median(with_queue) / statistics.median(without):.3f}")
    print(f"record, same dispute: {_ms(same)}")
    print(f"record, new dispute:  {_ms(new)}")
    print(f"the repeated question is dispute {note.id}, met {note.occurrences}x; "
          f"{rows} rows in the queue after {args.repeats} new ones")


if __name__ == "__main__":
    main()
