"""Right answers on real documentation: retrieval recall@5 and answer accuracy on docqa.

The documentation QA set (``trishield.eval.docqa``: 150 questions written from man pages,
CMake's and npm's docs, HTML manuals, PDFs and Debian's policy, split dev/test) is asked of a
KB built from its corpus the way a user builds one (``trishield ingest FOLDER --tier
trusted``), once per chunking strategy.

* ``retrieval`` (no LLM): recall@5 per backend (dense, bm25, hybrid) and chunking: a question
  is found when one of the top 5 chunks comes from its source document and holds an accepted
  answer (the set's own scorer, :func:`~trishield.eval.docqa.is_correct`).
* ``answers`` (``--answers``): each defense (``--defenses``, e.g. none and full) with each
  reader (``--readers``, the first panel member) answers a split; accuracy (the set's scorer),
  refusals, errors (with their messages), LLM calls and seconds per question.

Figures go to ``--out`` (JSON, timings apart from the counts) and a table on stdout with the
load average. Tune only on ``--split dev``; report both.

    PYTHONPATH=src .venv/bin/python benchmarks/docqa.py --work-dir /work/scratch/docqa
    PYTHONPATH=src .venv/bin/python benchmarks/docqa.py --work-dir /work/scratch/docqa \\
        --answers --split dev --readers qwen2.5-0.5b qwen2.5-1.5b --defenses none full
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from interleaved import ask_in_turn, timing
from trishield.api import defend
from trishield.errors import TriShieldError
from trishield.eval.docqa import DocQuestion, build_corpus, is_correct, load_questions
from trishield.kb import KnowledgeBase
from trishield.kb.chunking import STRATEGIES, ChunkingConfig
from trishield.kb.indexes.retrieval import BACKENDS
from trishield.kb.loaders import load_path
from trishield.llm.cache import ResponseCache
from trishield.llm.panel import DEFAULT_PANEL, build_reader
from trishield.settings import Settings

K = 5


def source_id(question: DocQuestion) -> str:
    """The document id a folder ingest gives the question's source file (a PDF's pages are
    ``<id>:p<n>``)."""
    return question.source.rsplit(".", 1)[0] if "." in Path(question.source).name \
        else question.source


def from_source(doc_id: str, question: DocQuestion) -> bool:
    wanted = source_id(question)
    return doc_id == wanted or doc_id.startswith(f"{wanted}:p")


def open_kb(work_dir: Path, corpus: Path, strategy: str) -> KnowledgeBase:
    """The corpus's KB with ``strategy`` chunking, built on first use (trusted, as a user
    ingests their own documentation)."""
    directory = work_dir / f"kb-{strategy}"
    chunking = ChunkingConfig(strategy=strategy)  # type: ignore[arg-type]
    if (directory / "built.json").exists():
        return KnowledgeBase.open(directory, chunking=chunking)
    kb = KnowledgeBase.open(directory, create=True, chunking=chunking)
    batch = load_path(corpus)
    started = time.perf_counter()
    report = kb.ingest(batch.documents, tier="trusted", writer="docs", source=str(corpus))
    seconds = time.perf_counter() - started
    (directory / "built.json").write_text(json.dumps({
        "documents": len(batch.documents), "chunks": report.chunks_added,
        "failed_files": [f.path for f in batch.failed_files],
        "seconds": round(seconds, 1)}, indent=1))
    print(f"built {directory}: {len(batch.documents)} documents, {report.chunks_added} chunks "
          f"in {seconds:.0f} s", file=sys.stderr)
    return kb


def retrieval(kb: KnowledgeBase, questions: Sequence[DocQuestion]) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for backend in BACKENDS:
        hits = []
        for question in questions:
            top = kb.search(question.question, backend=backend, k=K)
            if any(from_source(c.doc_id, question) and is_correct(c.chunk.text, question)
                   for c in top):
                hits.append(question.id)
        found[backend] = {"hits": len(hits), "of": len(questions),
                          "recall_at_5": round(len(hits) / max(1, len(questions)), 3),
                          "found": hits}
    return found


def answers(kb: KnowledgeBase, questions: Sequence[DocQuestion], defenses: Sequence[str],
            reader: str, backend: str, cache_dir: Path) -> tuple[list[dict], dict]:
    """Every question by every defense in turn (the one that goes first alternates), so the
    seconds of the defenses are measured under the same load and their ratio is the figure.
    Each defense has its own response cache under ``cache_dir``: a rerun is free, but one
    defense never replays another's answer; seconds are compared only on questions where no
    defense was served from cache."""
    settings = Settings().with_overrides(backend=backend)
    shields = {}
    for defense in defenses:
        cache = ResponseCache(cache_dir / f"{reader}-{defense}")
        panel = [build_reader(spec, cache=cache) for spec in [reader, *DEFAULT_PANEL[1:]]]
        # as the product does: the default second reader, also where it is the reader's own
        # model (it is then asked for the context's exact words, D43)
        second = (build_reader(settings.second_reader, cache=cache)
                  if defense != "none" and settings.second_reader is not None else None)
        shields[defense] = defend(kb, defense, panel=panel if defense != "none" else panel[:1],
                                  settings=settings, second_reader=second)

    def asker(defense: str) -> Callable[[DocQuestion], dict]:
        def ask(question: DocQuestion) -> dict:
            try:
                answer = shields[defense].ask(question.question)
            except TriShieldError as error:
                return {"id": question.id, "error": f"{type(error).__name__}: {error}"}
            return {"id": question.id, "answer": answer.answer, "refused": answer.refused,
                    "correct": bool(answer.answer) and is_correct(answer.answer, question),
                    "llm_calls": answer.trace.llm_calls,
                    "cached_calls": answer.trace.llm_calls_cached, "reason": answer.reason}
        return ask

    rows = ask_in_turn(questions, {defense: asker(defense) for defense in defenses})
    summaries = []
    for defense in defenses:
        counted = [r for r in rows[defense] if "error" not in r]
        summaries.append({
            "defense": defense, "reader": reader, "backend": backend,
            "questions": len(rows[defense]),
            "correct": sum(r["correct"] for r in counted),
            "accuracy": round(sum(r["correct"] for r in counted)
                              / max(1, len(rows[defense])), 3),
            "refused": sum(r["refused"] for r in counted),
            "errors": len(rows[defense]) - len(counted),
            "llm_calls_per_question": round(sum(r["llm_calls"] + r["cached_calls"]
                                                for r in counted) / max(1, len(counted)), 3),
            "records": rows[defense]})
    timed = timing(rows, defenses[0], lambda row: row.get("cached_calls", 0) == 0)
    for row in (row for defense in defenses for row in rows[defense]):
        row.pop("seconds")  # timings live apart from the counts (they differ run to run)
    return summaries, {"reader": reader, **timed}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, required=True,
                        help="where the corpus and its KBs are built (reused when present)")
    parser.add_argument("--corpus", type=Path, help="a corpus built by "
                        "`python -m trishield.eval.docqa --build DIR` (default: WORK/corpus)")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument("--chunkings", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--answers", action="store_true", help="also answer the questions")
    parser.add_argument("--readers", nargs="+", default=[DEFAULT_PANEL[0]])
    parser.add_argument("--defenses", nargs="+", default=["none", "full"])
    parser.add_argument("--backend", choices=BACKENDS, default="hybrid",
                        help="the retrieval backend the answers use")
    parser.add_argument("--answer-chunking", choices=STRATEGIES, default="sections")
    parser.add_argument("--sample", type=int, help="N questions spread evenly over the split "
                        "(the set is ordered by genre, so the first N would be one genre)")
    parser.add_argument("--out", type=Path, help="JSON figures (default WORK/docqa.json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    corpus = args.corpus or args.work_dir / "corpus"
    if not (corpus / "corpus.json").exists():
        build_corpus(corpus)
    questions = load_questions(None if args.split == "all" else args.split)
    if args.sample and args.sample < len(questions):
        step = len(questions) / args.sample
        questions = [questions[int(i * step)] for i in range(args.sample)]
    figures: dict[str, object] = {
        "split": args.split, "questions": len(questions),
        "corpus_sha256": hashlib.sha256((corpus / "corpus.json").read_bytes()).hexdigest()}
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {len(questions)} "
          f"questions ({args.split})")
    recall: dict[str, dict] = {}
    for strategy in args.chunkings:
        with open_kb(args.work_dir, corpus, strategy) as kb:
            recall[strategy] = retrieval(kb, questions)
        for backend, row in recall[strategy].items():
            found = set(row["found"])
            by_split = "  ".join(
                f"{split} {sum(q.id in found for q in questions if q.split == split)}/"
                f"{sum(q.split == split for q in questions)}" for split in ("dev", "test"))
            print(f"recall@5  {strategy:9s} {backend:7s} {row['hits']:4d}/{row['of']:<4d} "
                  f"{row['recall_at_5']:.3f}   {by_split}")
    figures["recall"] = recall
    if args.answers:
        results, timings = [], []
        with open_kb(args.work_dir, corpus, args.answer_chunking) as kb:
            for reader in args.readers:
                summaries, timed = answers(kb, questions, args.defenses, reader, args.backend,
                                            args.work_dir / "response-cache")
                results.extend(summaries)
                timings.append(timed)
                ratios = timed[f"ratio_to_{args.defenses[0]}"]
                for summary in summaries:
                    defense = summary["defense"]
                    print(f"answers   {defense:6s} {reader:14s} {summary['correct']:3d}/"
                          f"{summary['questions']:<3d} acc {summary['accuracy']:.3f} refused "
                          f"{summary['refused']:3d} errors {summary['errors']} calls/q "
                          f"{summary['llm_calls_per_question']:.2f} "
                          f"{timed['seconds_per_question'][defense]:.1f} s/q "
                          f"(x{ratios[defense]} of {args.defenses[0]} on "
                          f"{timed['timed_questions']} fresh questions)", flush=True)
        figures["answers"] = results
        figures["timings"] = timings
    out = args.out or args.work_dir / "docqa.json"
    out.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
