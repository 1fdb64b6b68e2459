"""The orchestrator: retrieval, the three rings, the answer, and the trace of every decision.

``--defense`` selects which rings run, for ablations and for the undefended baseline:

* ``none``   retrieve top-k, send it straight to one reader (the normal RAG pipeline);
* ``ring1``  a larger candidate pool, Ring 1's query-aware check drops what it blocks, top-k by
             retrieval rank, one reader;
* ``ring2``  the pool re-ranked by Ring 2's trust, top-k by trust, one reader;
* ``ring3``  top-k by retrieval rank to Ring 3 (gate, panel vote, evidence checks);
* ``ring12`` Rings 1 and 2, one reader;
* ``full``   all three rings.

The trace is plain JSON (``Answer.as_dict()``): everything needed to explain the outcome.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trishield.answers import contains_answer
from trishield.errors import InputError
from trishield.kb import KnowledgeBase
from trishield.kb.retrieval import Candidate
from trishield.rings.consensus import (
    Consensus,
    ContextPassage,
    Reader,
    Vote,
    presented_to,
)
from trishield.rings.ingest_guard import GuardVerdict, IngestGuard, outlier_scores
from trishield.rings.retrieval_scorer import RetrievalScorer, ScorerResult
from trishield.settings import PipelineConfig
from trishield.text import QUESTION_PHRASING

RINGS_OF: dict[str, frozenset[int]] = {
    "none": frozenset(), "ring1": frozenset({1}), "ring2": frozenset({2}),
    "ring3": frozenset({3}), "ring12": frozenset({1, 2}), "full": frozenset({1, 2, 3})}
DEFENSES = tuple(RINGS_OF)
TRACE_VERSION = 1


@dataclass
class Answer:
    """The outcome of one question: an answer or a refusal, citations, and the trace."""

    answer: str | None
    refused: bool
    reason: str
    citations: list[str]
    trace: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "refused": self.refused, "reason": self.reason,
                "citations": self.citations, "trace": self.trace}


class Pipeline:
    def __init__(self, kb: KnowledgeBase, panel: Sequence[Reader],
                 config: PipelineConfig | None = None):
        if not panel:
            raise InputError("the pipeline needs at least one reader")
        self.kb = kb
        self.panel = list(panel)
        self.config = config or PipelineConfig()
        self.guard = IngestGuard(self.config.guard)
        self.scorer = RetrievalScorer(self.config.scorer)
        self.consensus = Consensus(self.panel, self.config.consensus)

    def ask(self, question: str, *, defense: str = "full") -> Answer:
        if defense not in DEFENSES:
            raise InputError(f"unknown defense {defense!r}; choose from {', '.join(DEFENSES)}")
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty")
        timings: dict[str, float] = {}
        started = time.perf_counter()
        k, pool = self.config.scorer.context, self.config.scorer.pool
        rings = RINGS_OF[defense]
        read = pool if rings - {3} else k  # Rings 1-2 need a pool larger than the context
        trace: dict[str, Any] = {
            "version": TRACE_VERSION, "question": question, "defense": defense,
            "backend": self.config.backend, "k": k,
            "rings": sorted(rings), "pool": read,
            "panel": [{"name": m.name, "vendor": m.vendor} for m in self.panel],
        }
        candidates = self.kb.search(question, backend=self.config.backend,
                                    k=read)
        timings["retrieval"] = time.perf_counter() - started
        trace["candidates"] = [_candidate_row(c) for c in candidates]

        verdicts: dict[str, GuardVerdict] = {}
        survivors = list(candidates)
        if 1 in rings:
            mark = time.perf_counter()
            verdicts = self._ring1(question, candidates)
            survivors = [c for c in candidates if not verdicts[c.chunk_id].blocked]
            timings["ring1"] = time.perf_counter() - mark
            trace["ring1"] = {
                "config": {"theta": self.config.guard.theta,
                           "flag_theta": self.config.guard.flag_theta,
                           "weights": {"perp": self.config.guard.w_perp,
                                       "pat": self.config.guard.w_pat,
                                       "out": self.config.guard.w_out}},
                "verdicts": [verdicts[c.chunk_id].as_dict() for c in candidates],
                "blocked": [c.chunk_id for c in candidates if verdicts[c.chunk_id].blocked],
                "flagged": [c.chunk_id for c in candidates if verdicts[c.chunk_id].flagged],
            }

        scored: ScorerResult | None = None
        if 2 in rings:
            mark = time.perf_counter()
            scored = self.scorer.score(survivors, context=k)
            timings["ring2"] = time.perf_counter() - mark
            context = [ContextPassage(p.candidate.chunk_id, p.candidate.doc_id,
                                      p.candidate.chunk.tier, p.trust, p.candidate.chunk.text)
                       for p in scored.context]
            trace["ring2"] = {
                "w_prov": self.config.scorer.w_prov,
                "ranked": [p.as_dict() for p in scored.ranked],
                "conflicts": [c.as_dict() for c in scored.conflicts],
                "dropped": [p.candidate.chunk_id for p in scored.ranked if not p.in_context],
            }
            floor = self.config.scorer.min_relevance.get(self.config.backend)
            if floor is not None:
                best = max((c.score for c in survivors), default=None)
                relevant = best is not None and best >= floor
                trace["ring2"]["relevance_floor"] = {
                    "backend": self.config.backend, "floor": floor,
                    "best_score": None if best is None else round(best, 6),
                    "passed": relevant}
                if not relevant:
                    trace["context"] = []
                    shown = "nothing" if best is None else f"{best:.4f}"
                    return self._finish(trace, timings, started, None, True,
                                        f"no relevant passage: best {self.config.backend} score "
                                        f"{shown} < calibrated floor {floor:.4f}", [], [])
            if self.config.scorer.refuse_unknown_terms:
                unknown = [t for t in self.kb.unknown_terms(question)
                           if t not in QUESTION_PHRASING]
                trace["ring2"]["unknown_terms"] = unknown
                if unknown:
                    trace["context"] = []
                    return self._finish(trace, timings, started, None, True,
                                        "out of scope: the knowledge base never mentions "
                                        f"{', '.join(repr(t) for t in unknown)}", [], [])
        else:
            context = [ContextPassage(c.chunk_id, c.doc_id, c.chunk.tier, 1.0, c.chunk.text)
                       for c in survivors[:k]]
        trace["context"] = [{"id": p.id, "doc_id": p.doc_id, "tier": p.tier,
                             "trust": round(p.trust, 4), "text": p.text} for p in context]

        mark = time.perf_counter()
        if 3 in rings:
            use_panel, reasons = self._gate(verdicts, scored, context)
            trace["gate"] = {"mode": self.config.consensus.gate, "use_panel": use_panel,
                             "reasons": reasons}
            result = self.consensus.decide(question, context, use_panel=use_panel)
            trace["ring3"] = result.as_dict()
            answer, refused, reason = result.answer, result.refused, result.reason
            citations = sorted({p.doc_id for p in context if p.id in set(result.support)})
            votes = [v.as_dict() for r in result.rounds for v in r.votes]
        else:
            answer, refused, reason, citations, votes = self._single(question, context, trace)
        timings["answer"] = time.perf_counter() - mark
        return self._finish(trace, timings, started, answer, refused, reason, citations, votes)

    @staticmethod
    def _finish(trace: dict[str, Any], timings: dict[str, float], started: float,
                answer: str | None, refused: bool, reason: str, citations: list[str],
                votes: list[dict]) -> Answer:
        timings["total"] = time.perf_counter() - started
        trace["llm_calls"] = sum(1 for v in votes if v["llm"] and not v["cached"])
        trace["llm_calls_cached"] = sum(1 for v in votes if v["llm"] and v["cached"])
        trace["tokens"] = {"prompt": sum(v["prompt_tokens"] for v in votes),
                           "completion": sum(v["completion_tokens"] for v in votes)}
        trace["timings_s"] = {name: round(value, 4) for name, value in timings.items()}
        return Answer(answer, refused, reason, citations, trace)

    # -- rings ------------------------------------------------------------------------------
    def _ring1(self, question: str, candidates: Sequence[Candidate]) -> dict[str, GuardVerdict]:
        """Query-aware Ring 1: each passage alone, plus its distance from the retrieved set."""
        vectors = self.kb.store.embeddings_of([c.chunk.pk for c in candidates], self.kb.dimension)
        outliers = None
        if vectors:
            matrix = np.stack([vectors[c.chunk.pk] for c in candidates])
            outliers = outlier_scores(matrix, matrix)
        scores = [None] * len(candidates) if outliers is None else [float(o) for o in outliers]
        judged = self.guard.judge_many([c.chunk_id for c in candidates],
                                       [c.chunk.text for c in candidates], scores,
                                       query=question, tiers=[c.chunk.tier for c in candidates])
        return {v.subject: v for v in judged}

    def _gate(self, verdicts: dict[str, GuardVerdict], scored: ScorerResult | None,
              context: Sequence[ContextPassage]) -> tuple[bool, list[str]]:
        """Whether Rings 1-2 left enough uncertainty to pay for the panel, and why."""
        mode = self.config.consensus.gate
        if mode == "always":
            return True, ["gate mode 'always'"]
        if mode == "never":
            return False, ["gate mode 'never'"]
        reasons = []
        flagged = sorted(v.subject for v in verdicts.values() if v.flagged or v.blocked)
        if flagged:
            reasons.append(f"Ring 1 flagged or blocked {len(flagged)} candidate(s)")
        if scored and scored.conflicts:
            reasons.append(f"{len(scored.conflicts)} numeric conflict(s) between passages")
        low = [p.id for p in context if p.tier in self.config.consensus.low_trust_tiers]
        if low:
            reasons.append(f"{len(low)} low-trust passage(s) in the context")
        if scored and len(scored.ranked) > len(context) and context:
            margin = scored.ranked[0].trust - scored.ranked[len(context)].trust
            if margin < self.config.consensus.trust_margin:
                reasons.append(f"thin trust margin {margin:.3f} < "
                               f"{self.config.consensus.trust_margin}")
        if not reasons:
            return False, ["Rings 1-2 confident: one model answers"]
        return True, reasons

    def _single(self, question: str, context: Sequence[ContextPassage],
                trace: dict[str, Any]) -> tuple[str | None, bool, str, list[str], list[dict]]:
        """One reader, no vote: the baseline and the single-ring ablations."""
        if not context:
            trace["reader"] = None
            return None, True, "no passage to answer from", [], []
        member = self.panel[0]
        # the undefended baseline reads in retrieval order, as a normal RAG pipeline does
        pairs = ([(p.id, p.text) for p in context] if trace["defense"] == "none"
                 else presented_to(member, context))
        reply = member.answer(question, pairs)
        vote = Vote.of(member, reply).as_dict()
        trace["reader"] = vote
        if vote["refused"]:
            return None, True, f"{member.name} declined: the context does not hold the answer", \
                [], [vote]
        cited = {p.doc_id for p in context if p.id in set(reply.citations)}
        cited |= {p.doc_id for p in context if contains_answer(p.text, reply.text)}
        return reply.text, False, "answered by one model (no consensus)", sorted(cited), [vote]


def _candidate_row(candidate: Candidate) -> dict[str, Any]:
    row = candidate.as_dict()
    row.pop("text")
    return row
