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
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

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
from trishield.trace import TRACE_VERSION, CallRow, PanelMember, Tokens, Trace

__all__ = ["TRACE_VERSION", "Answer", "Pipeline", "PipelineObserver", "StageReport",
           "StageRole"]

StageRole = Literal["rewrite", "retrieve", "filter", "rerank", "answer"]


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


@dataclass(frozen=True)
class StageReport:
    """What one stage just did, for an observer: enough to summarise it without knowing which
    trace section the stage writes (the trace so far is there for that)."""

    stage: str
    """The stage's name, as the trace's ``timings_s`` names it (``retrieval``, ``ring1``...)."""
    role: StageRole
    seconds: float
    inputs: int
    """Candidates the stage was given (0 for the rewriter and the retriever)."""
    outputs: int
    """Candidates kept (a filter), retrieved (the retriever) or passages of context (a
    reranker, the answerer's context)."""
    trace: Trace
    """The trace as the stage left it (still being written: read it, do not keep it)."""
    calls: list[CallRow] = field(default_factory=list)
    """The model calls this stage paid for."""
    refusal: str | None = None
    """Set when the stage ended the question with a refusal (a reranker, the answerer)."""


class PipelineObserver(Protocol):
    """Told as a question goes through the stages: the service streams each stage's summary
    to the client and the telemetry turns each into a span, without a second pipeline.

    Called on the thread that runs the question; an observer that raises stops the question
    (an observer's bug must not pass silently)."""

    def question_started(self, trace: Trace) -> None:
        """Before the first stage (the trace holds the request)."""
        ...

    def stage_started(self, stage: str, role: StageRole) -> None:
        ...

    def stage_finished(self, report: StageReport) -> None:
        ...

    def question_finished(self, answer: Answer | None, error: BaseException | None) -> None:
        """After the last stage: the answer, or the error that ended the question."""
        ...


class _Observed:
    """Times a stage and reports it to the observer (when there is one)."""

    def __init__(self, run: Run, observer: PipelineObserver | None):
        self.run = run
        self.observer = observer

    def start(self, stage: str, role: StageRole) -> tuple[float, int]:
        if self.observer is not None:
            self.observer.stage_started(stage, role)
        return time.perf_counter(), len(self.run.calls)

    def finish(self, stage: str, role: StageRole, since: tuple[float, int], *, inputs: int,
               outputs: int, refusal: str | None = None) -> None:
        mark, calls = since
        seconds = time.perf_counter() - mark
        self.run.timings[stage] = self.run.timings.get(stage, 0.0) + seconds
        if self.observer is not None:
            self.observer.stage_finished(StageReport(
                stage=stage, role=role, seconds=seconds, inputs=inputs,
                outputs=outputs, trace=self.run.trace, calls=self.run.calls[calls:],
                refusal=refusal))


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

    def ask(self, question: str, *, observer: PipelineObserver | None = None) -> Answer:
        """Answer ``question``; ``observer`` (optional) is told of every stage as it ends."""
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
        if observer is None:
            return self._run(run, question, _Observed(run, None))
        observer.question_started(run.trace)
        try:
            answer = self._run(run, question, _Observed(run, observer))
        except BaseException as error:
            observer.question_finished(None, error)
            raise
        observer.question_finished(answer, None)
        return answer

    def _run(self, run: Run, question: str, observed: _Observed) -> Answer:
        query = question
        if self.rewriter is not None:
            since = observed.start(self.rewriter.name, "rewrite")
            query = self.rewriter.rewrite(run, question)
            observed.finish(self.rewriter.name, "rewrite", since, inputs=0, outputs=0)

        since = observed.start("retrieval", "retrieve")
        candidates = self.retriever.retrieve(query, self.pool)
        run.trace.pool = self.pool
        run.trace.candidates = [candidate_row(c) for c in candidates]
        observed.finish("retrieval", "retrieve", since, inputs=0, outputs=len(candidates))

        survivors = list(candidates)
        for stage in self.filters:
            since = observed.start(stage.name, "filter")
            given = len(survivors)
            survivors = stage.screen(run, query, survivors)
            observed.finish(stage.name, "filter", since, inputs=given, outputs=len(survivors))

        if self.reranker is not None:
            since = observed.start(self.reranker.name, "rerank")
            reranked = self.reranker.rerank(run, query, survivors, self.k)
            if reranked.refusal is not None:
                run.trace.context = []
            else:
                run.trace.context = [p.row() for p in reranked.context]
            observed.finish(self.reranker.name, "rerank", since, inputs=len(survivors),
                            outputs=len(reranked.context) if reranked.refusal is None else 0,
                            refusal=reranked.refusal)
            if reranked.refusal is not None:
                return self._finish(run, Outcome.refusal(reranked.refusal))
            context = reranked.context
        else:
            context = [ContextPassage.of(c) for c in survivors[:self.k]]
            run.trace.context = [p.row() for p in context]

        since = observed.start("answer", "answer")
        outcome = self.answerer.answer(run, query, context)
        observed.finish("answer", "answer", since, inputs=len(context), outputs=len(context),
                        refusal=outcome.reason if outcome.refused else None)
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
