"""The orchestrator: one composition of stages answers a question and traces every decision.

``Pipeline`` knows nothing about rings or baselines: it runs
``[rewrite] -> retrieve -> filters -> [rerank] -> answer`` (see :mod:`trishield.stages`),
times each stage, and closes the trace with the calls, tokens and timings. Every named defense,
TriShield's settings and the baselines alike, is a ``Pipeline`` built by the defense registry
(:mod:`trishield.defenses`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trishield.errors import InputError
from trishield.stages import (
    Answerer,
    CandidateFilter,
    ContextPassage,
    Outcome,
    QueryRewriter,
    Reranker,
    Retriever,
    Run,
    candidate_row,
)
from trishield.trace import TRACE_VERSION, PanelMember, Tokens, Trace

__all__ = ["TRACE_VERSION", "Answer", "Pipeline"]


@dataclass
class Answer:
    """The outcome of one question: an answer or a refusal, citations, and the trace."""

    answer: str | None
    refused: bool
    reason: str
    citations: list[str]
    trace: Trace

    def as_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "refused": self.refused, "reason": self.reason,
                "citations": self.citations, "trace": self.trace.as_dict()}


class Pipeline:
    """A defense: which stages run, how many candidates are read (``pool``) and how many
    passages the answerer gets (``k``).

    ``reports_removed``: the trace lists every removed candidate under ``removed`` even when
    there is none, the convention of the baselines, whose detections are measured on it
    (TriShield's rings record theirs in their own sections). ``rings`` is written to the trace
    for TriShield's settings.
    """

    def __init__(self, name: str, retriever: Retriever, answerer: Answerer, *, k: int,
                 pool: int | None = None, filters: Sequence[CandidateFilter] = (),
                 reranker: Reranker | None = None, rewriter: QueryRewriter | None = None,
                 reports_removed: bool = False, rings: Sequence[int] | None = None):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InputError(f"k must be a positive integer, got {k!r}")
        pool = k if pool is None else pool
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < k:
            raise InputError(f"pool ({pool!r}) must be an integer of at least k ({k})")
        if not answerer.readers:
            raise InputError("the pipeline needs at least one reader")
        self.name = name
        self.retriever = retriever
        self.answerer = answerer
        self.k = k
        self.pool = pool
        self.filters = list(filters)
        self.reranker = reranker
        self.rewriter = rewriter
        self.reports_removed = reports_removed
        self.rings = None if rings is None else sorted(rings)

    def ask(self, question: str) -> Answer:
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty")
        run = Run(Trace(version=TRACE_VERSION, question=question, defense=self.name,
                        backend=self.retriever.name, k=self.k, panel=[
                            PanelMember(name=m.name, vendor=m.vendor, llm=m.uses_llm)
                            for m in self.answerer.readers]), retriever=self.retriever)
        if self.rings is not None:
            run.trace.rings = self.rings
        if self.reports_removed:
            run.trace.removed = []
        query = question
        if self.rewriter is not None:
            mark = time.perf_counter()
            query = self.rewriter.rewrite(run, question)
            run.timed(self.rewriter.name, mark)

        mark = time.perf_counter()
        candidates = self.retriever.retrieve(query, self.pool)
        run.timed("retrieval", mark)
        run.trace.pool = self.pool
        run.trace.candidates = [candidate_row(c) for c in candidates]

        survivors = list(candidates)
        for stage in self.filters:
            mark = time.perf_counter()
            survivors = stage.screen(run, query, survivors)
            run.timed(stage.name, mark)

        if self.reranker is not None:
            mark = time.perf_counter()
            reranked = self.reranker.rerank(run, query, survivors, self.k)
            run.timed(self.reranker.name, mark)
            if reranked.refusal is not None:
                run.trace.context = []
                return self._finish(run, Outcome.refusal(reranked.refusal))
            context = reranked.context
        else:
            context = [ContextPassage.of(c) for c in survivors[:self.k]]
        run.trace.context = [p.row() for p in context]

        mark = time.perf_counter()
        outcome = self.answerer.answer(run, query, context)
        run.timed("answer", mark)
        return self._finish(run, outcome)

    @staticmethod
    def _finish(run: Run, outcome: Outcome) -> Answer:
        run.timings["total"] = time.perf_counter() - run.started
        trace = run.trace
        trace.calls = run.calls
        trace.llm_calls = sum(1 for c in run.calls if c.llm and not c.cached)
        trace.llm_calls_cached = sum(1 for c in run.calls if c.llm and c.cached)
        trace.tokens = Tokens(prompt=sum(c.prompt_tokens for c in run.calls),
                              completion=sum(c.completion_tokens for c in run.calls))
        trace.timings_s = {name: round(value, 4) for name, value in run.timings.items()}
        trace.mark_set("version", "candidates", "context", "details")
        return Answer(outcome.answer, outcome.refused, outcome.reason, outcome.citations, trace)
