"""Rings 1 and 2 as stages: the query-aware Ingest Guard as a filter, the Retrieval Scorer as
a reranker with its two refusals.

The rings themselves (:mod:`trishield.rings`) score; these adapters decide what a pipeline
keeps, write the ring's section of the trace, and leave the gate its signals.
"""

from __future__ import annotations

import numpy as np

from trishield.kb.indexes.retrieval import Candidate
from trishield.models.embedders import get_embedding_model, load_embedder
from trishield.rings.analysis import DEFAULT_ANALYSER, PassageAnalyser
from trishield.rings.evidence import Evidence, EvidenceConfig, Item
from trishield.rings.ingest_guard import GuardConfig, IngestGuard, outlier_scores
from trishield.rings.retrieval_scorer import RetrievalScorer, ScorerConfig, out_of_scope_terms
from trishield.rings.tamper import pool_tampered_copies
from trishield.stages import ContextPassage, Reranked, Run, WriterRecords
from trishield.trace import (
    EvidenceTrace,
    RelevanceFloor,
    Ring1Trace,
    Ring2Trace,
)


class Ring1Filter:
    """Query-aware Ring 1: each passage alone (with the question known, so a passage that
    quotes it stands out), plus its distance from the rest of the retrieved set, plus
    whether it copies another writer's retrieved passage with a fact changed."""

    name = "ring1"

    def __init__(self, config: GuardConfig | None = None,
                 analyser: PassageAnalyser | None = None):
        self.config = config or GuardConfig()
        self.guard = IngestGuard(self.config)
        self.analyser = analyser or DEFAULT_ANALYSER

    def screen(self, run: Run, question: str, candidates: list[Candidate]) -> list[Candidate]:
        """Each passage's query-independent analysis comes with it from the KB (stored at
        ingest, :mod:`trishield.rings.analysis`) or is computed now when none of the current
        version is stored; only the question's part is computed per question."""
        matrix = run_embeddings(run, candidates)
        outliers = None if matrix is None else outlier_scores(matrix, matrix)
        scores = ([None] * len(candidates) if outliers is None
                  else [float(o) for o in outliers])
        # each column read once: a chunk id is formatted anew on every read
        chunks = [c.chunk for c in candidates]
        ids = [chunk.chunk_id for chunk in chunks]
        texts = [chunk.text for chunk in chunks]
        tiers = [chunk.tier for chunk in chunks]
        analyses = [self.analyser.of(chunk.text, chunk.analysis) for chunk in chunks]
        copies = pool_tampered_copies(
            ids, [chunk.doc_id for chunk in chunks], texts, tiers,
            [chunk.writer for chunk in chunks], self.config.tamper,
            tokenised=[a.tokens for a in analyses])
        verdicts = self.guard.judge_many(ids, texts, scores, query=question, tiers=tiers,
                                         extras=[() if copy is None else (copy.hit(),)
                                                 for copy in copies],
                                         analyses=analyses)
        config = self.config
        # one validation of the whole section: a call per row cost more than the rows
        run.trace.ring1 = Ring1Trace.model_validate({
            "config": {"theta": config.theta, "flag_theta": config.flag_theta,
                       "weights": {"perp": config.w_perp, "pat": config.w_pat,
                                   "out": config.w_out}},
            "verdicts": [v.as_dict() for v in verdicts],
            "blocked": [v.subject for v in verdicts if v.blocked],
            "flagged": [v.subject for v in verdicts if v.flagged]})
        run.signals.flagged = sorted(v.subject for v in verdicts if v.flagged or v.blocked)
        return [c for c, v in zip(candidates, verdicts, strict=True) if not v.blocked]


def read_evidence(run: Run, question: str, candidates: list[Candidate],
                  config: EvidenceConfig, analyser: PassageAnalyser | None = None) -> Evidence:
    """The pool as evidence for ``question`` (claims, independence, track records), left on
    the run for Ring 3 to weigh its answer against. Each passage's reading comes with it from
    the KB (stored at ingest, :mod:`trishield.rings.analysis`) when a current one is stored,
    else Ring 2 reads the text (memoised)."""
    analyser = analyser or DEFAULT_ANALYSER
    retriever = run.retriever
    records, since = (retriever.writer_records() if isinstance(retriever, WriterRecords)
                      else (None, None))
    items = []
    for c in candidates:
        stored = analyser.ring2_of(c.chunk.analysis)
        items.append(Item(c.chunk_id, c.doc_id, c.chunk.writer, c.chunk.tier, c.chunk.text,
                          c.chunk.batch, c.chunk.ingested_at,
                          None if stored is None else stored.reading,
                          None if stored is None else stored.numbers, c.chunk.title))
    embeddings = run_embeddings(run, candidates)
    about_cosine, asked = question_embedding(retriever, question, embeddings)
    evidence = Evidence(question, items, embeddings, records, config, writers_since=since,
                        question_embedding=asked, about_cosine=about_cosine)
    run.evidence = evidence
    return evidence


def question_embedding(retriever: object, question: str, embeddings: np.ndarray | None
                       ) -> tuple[float | None, np.ndarray | None]:
    """The embedding model's ``about_cosine`` and the question embedded with the model the
    passages were (one question, a few milliseconds), so that Ring 3 can read whether a
    passage is about the question by meaning; (None, None) when the passages have no
    embeddings or the model has no calibrated threshold."""
    name = getattr(retriever, "embedding_model", None)
    if embeddings is None or not isinstance(name, str):
        return None, None
    threshold = get_embedding_model(name).about_cosine
    if threshold is None:
        return None, None
    return threshold, np.asarray(load_embedder(name).encode_query(question), dtype=np.float32)


def run_embeddings(run: Run, candidates: list[Candidate]) -> np.ndarray | None:
    """The candidates' embeddings from the run's retriever (``None`` if it has none), asked
    only for those this run has not fetched yet: Ring 2's candidates are Ring 1's survivors,
    so the pool is read from the KB once per question."""
    retriever = run.retriever
    if retriever is None or not candidates:
        return None
    known = run.embeddings
    ids = [c.chunk_id for c in candidates]  # formatted once, not on every read
    missing = [n for n, chunk_id in enumerate(ids) if chunk_id not in known]
    if missing:
        fetched = retriever.embeddings([candidates[n] for n in missing])
        if fetched is None:
            return None
        if len(fetched) != len(missing):
            raise ValueError(f"the retriever returned {len(fetched)} embeddings for "
                             f"{len(missing)} candidates")
        known.update(zip((ids[n] for n in missing), fetched, strict=True))
        if len(missing) == len(candidates):
            return fetched
    return np.stack([known[chunk_id] for chunk_id in ids])


class Ring2Reranker:
    """Ring 2: trust = provenance-weighted corroboration + down-weighted relevance; the top
    ``k`` by trust form the context. Refuses before any model is asked when the best
    candidate is below the backend's calibrated relevance floor, or (closed-domain mode) when
    the question names something the knowledge base never mentions."""

    name = "ring2"

    def __init__(self, config: ScorerConfig | None = None, *, backend: str = "dense",
                 analyser: PassageAnalyser | None = None):
        self.config = config or ScorerConfig()
        self.scorer = RetrievalScorer(self.config)
        self.backend = backend
        self.analyser = analyser or DEFAULT_ANALYSER

    def rerank(self, run: Run, question: str, candidates: list[Candidate],
               k: int) -> Reranked:
        evidence = read_evidence(run, question, candidates, self.config, self.analyser)
        scored = self.scorer.score(candidates, context=k, evidence=evidence)
        context = [ContextPassage.of(p.candidate, p.trust) for p in scored.context]
        section = Ring2Trace.model_validate({  # one validation, not one a row
            "w_prov": self.config.w_prov,
            "ranked": [p.as_dict() for p in scored.ranked],
            "conflicts": [c.as_dict() for c in scored.conflicts],
            "dropped": [p.candidate.chunk_id for p in scored.ranked if not p.in_context]})
        run.trace.ring2 = section
        run.trace.evidence = EvidenceTrace.model_validate(evidence.as_dict())
        floor = self.config.min_relevance.get(self.backend)
        if floor is not None:
            best = max((c.score for c in candidates), default=None)
            relevant = best is not None and best >= floor
            section.relevance_floor = RelevanceFloor(
                backend=self.backend, floor=floor,
                best_score=None if best is None else round(best, 6), passed=relevant)
            if not relevant:
                shown = "nothing" if best is None else f"{best:.4f}"
                return Reranked([], f"no relevant passage: best {self.backend} score {shown} "
                                    f"< calibrated floor {floor:.4f}")
        if self.config.refuse_unknown_terms and run.retriever is not None:
            unknown = out_of_scope_terms(run.retriever.unknown_terms(question))
            section.unknown_terms = unknown
            if unknown:
                return Reranked([], "out of scope: the knowledge base never mentions "
                                    f"{', '.join(repr(t) for t in unknown)}")
        return Reranked(context)
