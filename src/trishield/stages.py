"""The stages every defense is built from, and the per-question state they share.

A defense is one composition (:class:`trishield.pipeline.Pipeline`)::

    question -> [QueryRewriter] -> Retriever -> CandidateFilter* -> [Reranker] -> Answerer

* :class:`QueryRewriter` changes the query before retrieval (PoisonedRAG's paraphrase defense).
* :class:`Retriever` returns ranked candidates: TriShield's knowledge base, the benchmark's
  conditioned view of it, or passages that came from someone else's retriever.
* :class:`CandidateFilter` removes candidates, one at a time, with a reason (Ring 1, the
  perplexity filter, RAGDefender).
* :class:`Reranker` orders the survivors by trust, picks the context and may refuse outright
  (Ring 2: nothing relevant, a term the KB never mentions).
* :class:`Answerer` answers from the context or refuses (Ring 3's panel, one reader, RobustRAG's
  keyword aggregation).

Each stage records its own decisions in the run's typed :class:`~trishield.trace.Trace`, so a
new stage needs no change to the pipeline. The protocols are structural: anything with the
method and a ``name`` is a stage, no base class needed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from trishield.kb.indexes.retrieval import Candidate
from trishield.kb.store.disputes import Dispute, Recorded
from trishield.llm.base import LLMResponse, Reader, ReaderAnswer
from trishield.trace import CallRow, CandidateRow, ContextRow, RemovedRow, Trace


@dataclass(frozen=True)
class ContextPassage:
    """What an answerer knows of a context passage: identity, provenance, trust and text."""

    id: str
    doc_id: str
    tier: str
    trust: float
    text: str
    writer: str = ""
    title: str = ""
    """Its document's title (the evidence reads it as the passage's subject)."""

    @classmethod
    def of(cls, candidate: Candidate, trust: float = 1.0) -> ContextPassage:
        """A retrieved candidate as context; without a reranker every passage has trust 1."""
        return cls(candidate.chunk_id, candidate.doc_id, candidate.chunk.tier, trust,
                   candidate.chunk.text, candidate.chunk.writer, candidate.chunk.title)

    def row(self) -> ContextRow:
        return ContextRow(id=self.id, doc_id=self.doc_id, tier=self.tier,
                          trust=round(self.trust, 4), text=self.text)


@dataclass
class GateSignals:
    """What the rings before Ring 3 found uncertain; the gate reads it (unrounded)."""

    flagged: list[str] = field(default_factory=list)
    """Candidates Ring 1 flagged or blocked."""


@dataclass
class Run:
    """One question on its way through a defense: the trace being written, the model calls
    paid for, the time each stage took, and the signals one stage leaves for a later one."""

    trace: Trace
    retriever: Retriever | None = None
    """Where the candidates came from (Ring 1 asks it for embeddings, Ring 2 for terms)."""
    signals: GateSignals = field(default_factory=GateSignals)
    evidence: object | None = None
    """Ring 2's reading of the pool as evidence (a :class:`trishield.rings.evidence.Evidence`,
    a layer above this one), which Ring 3 weighs its answer against."""
    calls: list[CallRow] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)
    """The candidates' embeddings fetched so far, by chunk id: Ring 1 asks for the pool's,
    Ring 2 for its survivors', and the retriever is asked once (``run_embeddings``)."""

    def timed(self, phase: str, since: float) -> None:
        self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - since

    def paid(self, purpose: str, reader: Reader, reply: ReaderAnswer) -> None:
        """Record one reader call."""
        self.calls.append(CallRow(purpose=purpose, model=reply.model, llm=reader.uses_llm,
                                  cached=bool(reply.cached), prompt_tokens=reply.prompt_tokens,
                                  completion_tokens=reply.completion_tokens,
                                  seconds=round(reply.seconds, 3)))

    def paid_chat(self, purpose: str, response: LLMResponse) -> None:
        """Record one raw chat call (a paraphrase, a keyword answer)."""
        self.calls.append(CallRow(purpose=purpose, model=response.model, llm=True,
                                  cached=response.cached, prompt_tokens=response.prompt_tokens,
                                  completion_tokens=response.completion_tokens,
                                  seconds=round(response.seconds, 3)))

    def removed(self, subject: Candidate | ContextPassage, reason: str) -> None:
        """A stage removed ``subject``: what detection precision and recall count."""
        if self.trace.removed is None:
            self.trace.removed = []
        identity = subject.chunk_id if isinstance(subject, Candidate) else subject.id
        self.trace.removed.append(RemovedRow(id=identity, doc_id=subject.doc_id,
                                             reason=reason))


@dataclass(frozen=True)
class Outcome:
    """An answerer's result: an answer or a refusal with its reason, and the cited documents."""

    answer: str | None
    refused: bool
    reason: str
    citations: list[str] = field(default_factory=list)

    @classmethod
    def refusal(cls, reason: str) -> Outcome:
        return cls(None, True, reason, [])


@dataclass(frozen=True)
class Reranked:
    """A reranker's context (most trusted first), or a refusal before any model is asked."""

    context: list[ContextPassage]
    refusal: str | None = None


@runtime_checkable
class QueryRewriter(Protocol):
    name: str

    def rewrite(self, run: Run, question: str) -> str:
        """The query to retrieve and answer with (record how it was made in the trace)."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """Ranked candidates for a query, and what the rings need to know about them."""

    name: str
    """The retrieval backend, as the trace reports it."""

    def retrieve(self, query: str, k: int) -> list[Candidate]:
        ...

    def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
        """One unit-norm row per candidate (Ring 1's outlier score), or ``None``."""
        ...

    def unknown_terms(self, query: str) -> list[str]:
        """Content words of ``query`` that no stored passage contains (closed-domain mode)."""
        ...


@runtime_checkable
class WriterRecords(Protocol):
    """A retriever that knows its writers' track records (a knowledge base does; passages
    from elsewhere do not, and then every writer counts as established)."""

    def writer_records(self) -> tuple[dict[str, int], dict[str, float]]:
        """Each writer's stored documents and its first stored document's time (its tenure
        starts there), read together: Ring 2 asks once per question."""
        ...


@runtime_checkable
class DisputeLog(Protocol):
    """A retriever that keeps a disputes queue (a knowledge base does; passages from
    elsewhere have nowhere to keep one): Ring 3 records there the conflicts between writers
    it weighed (docs/design/ring3-consensus.md, "Disputes")."""

    def record_dispute(self, dispute: Dispute) -> Recorded:
        """Record (or count again) ``dispute``; never raises for the store's state."""
        ...


@runtime_checkable
class CandidateFilter(Protocol):
    name: str

    def screen(self, run: Run, question: str, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates kept, in their order; record what was removed and why."""
        ...


@runtime_checkable
class Reranker(Protocol):
    name: str

    def rerank(self, run: Run, question: str, candidates: list[Candidate],
               k: int) -> Reranked:
        ...


@runtime_checkable
class Answerer(Protocol):
    name: str
    readers: Sequence[Reader]
    """Who may answer (the trace's panel)."""

    def answer(self, run: Run, question: str, context: list[ContextPassage]) -> Outcome:
        ...


def candidate_row(candidate: Candidate) -> CandidateRow:
    """A retrieved candidate as the trace lists it (the text is in the context rows)."""
    row = candidate.as_dict()
    row.pop("text")
    return CandidateRow.model_validate(row)
