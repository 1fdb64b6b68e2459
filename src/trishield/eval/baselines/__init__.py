"""Baseline and peer defenses that the PoisonedRAG benchmark compares TriShield with.

Each is a composition of stages registered in :data:`trishield.defenses.DEFENSES`, built from a
retriever (a knowledge base or the benchmark's conditioned view of it), one reader (an
``LLMReader`` or the extractive reader) and ``k``, and answers through
:class:`~trishield.pipeline.Pipeline` with the same trace schema as TriShield.

=====================  ====================================================================
name                   composition
=====================  ====================================================================
perplexity-filter      retrieve pool (k) -> PerplexityFilter -> top k -> one reader
paraphrase             QueryParaphrase -> retrieve k -> one reader (answers the paraphrase)
expansion-k50          retrieve 50 -> FitToContext -> one reader with a widened context
ragdefender-top5       retrieve k -> RAGDefenderFilter -> one reader
ragdefender-pool20     retrieve 20 -> RAGDefenderFilter -> top k -> one reader
robustrag-keyword      retrieve k -> RobustRAGKeyword (isolated answers, keyword aggregation)
=====================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trishield.defenses import DEFENSES, DefenseSpec, build_defense
from trishield.errors import InputError
from trishield.eval.baselines.base import (
    baseline_reader,
    check_backend,
    check_k,
    check_pool,
    check_reader,
)
from trishield.eval.baselines.expansion import (
    DEFAULT_K,
    DEFAULT_N_CTX,
    FitToContext,
    check_n_ctx,
    widened_reader,
)
from trishield.eval.baselines.paraphrase import QueryParaphrase
from trishield.eval.baselines.perplexity import (
    PerplexityCalibration,
    PerplexityFilter,
    PerplexityScorer,
    calibrate_perplexity,
)
from trishield.eval.baselines.ragdefender import RAGDefenderFilter
from trishield.eval.baselines.robustrag import RobustRAGKeyword, aggregate_keywords
from trishield.kb import KnowledgeBase
from trishield.llm.base import Reader
from trishield.pipeline import Pipeline
from trishield.rings.retrieval_scorer import ScorerConfig
from trishield.settings import PipelineConfig
from trishield.stages import Retriever


def _k(spec: DefenseSpec) -> int:
    return check_k(spec.config.scorer.context)


def _reader(spec: DefenseSpec) -> Reader:
    return check_reader(spec.panel[0])


@DEFENSES.register("perplexity-filter", suite="baseline", family="poisonedrag",
                   summary="PoisonedRAG: drop retrieved passages a real LM finds too perplexing",
                   options=frozenset({"threshold", "model", "percentile", "sample", "seed",
                                      "max_tokens", "batch_size", "threads", "pool"}))
def build_perplexity(name: str, spec: DefenseSpec) -> Pipeline:
    """Calibrates its threshold on clean passages unless ``threshold`` is given (scores are
    cached, so calibrating again costs nothing after the first time)."""
    options, k = spec.options, _k(spec)
    reader = _reader(spec)
    scorer_options = {key: options[key] for key in ("max_tokens", "batch_size", "threads")
                      if key in options}
    scorer = PerplexityScorer(options.get("model", "smollm2-135m"), **scorer_options)
    threshold = options.get("threshold")
    if threshold is None:
        threshold = calibrate_perplexity(scorer, sample=options.get("sample", 300),
                                         seed=options.get("seed", 0),
                                         percentile=options.get("percentile", 99.0))
    stage = PerplexityFilter(threshold, scorer=scorer)
    return Pipeline(name, spec.retriever, baseline_reader(reader), k=k,
                    pool=check_pool(options.get("pool"), k), filters=[stage],
                    reports_removed=True)


@DEFENSES.register("paraphrase", suite="baseline", family="poisonedrag",
                   summary="PoisonedRAG: an LLM paraphrases the question before retrieval",
                   options=frozenset({"paraphraser", "max_tokens"}))
def build_paraphrase(name: str, spec: DefenseSpec) -> Pipeline:
    """The paraphraser is the reader's own LLM backend unless ``paraphraser`` is given."""
    reader = _reader(spec)
    paraphraser = spec.options.get("paraphraser", getattr(reader, "backend", None))
    rewriter = QueryParaphrase(paraphraser, max_tokens=spec.options.get("max_tokens", 64))
    return Pipeline(name, spec.retriever, baseline_reader(reader), k=_k(spec),
                    rewriter=rewriter, reports_removed=True)


@DEFENSES.register("expansion-k50", suite="baseline", family="poisonedrag",
                   summary="PoisonedRAG: retrieve 50 and answer from all of them",
                   options=frozenset({"k", "n_ctx"}))
def build_expansion(name: str, spec: DefenseSpec) -> Pipeline:
    """Retrieves ``k`` (50) whatever the context size is; a local reader is re-opened with
    a context window large enough for them (see :mod:`.expansion`)."""
    k = check_k(spec.options.get("k", DEFAULT_K))
    reader = _reader(spec)
    wide, window = widened_reader(reader, check_n_ctx(spec.options.get("n_ctx",
                                                                       DEFAULT_N_CTX)))
    params = getattr(wide, "params", None)
    stage = FitToContext(window, params.max_tokens if params is not None else 0)
    return Pipeline(f"expansion-k{k}", spec.retriever, baseline_reader(wide), k=k,
                    filters=[stage], reports_removed=True)


def _ragdefender(name: str, spec: DefenseSpec, pool: int) -> Pipeline:
    k = _k(spec)
    pool = check_pool(pool, k)
    embedder = spec.options.get("embedding_model") or _embedding_model(spec.retriever)
    stage = RAGDefenderFilter(embedder, pool=pool,
                              task_type=spec.options.get("task_type", "single_hop"))
    return Pipeline(f"ragdefender-top{k}" if pool == k else f"ragdefender-pool{pool}",
                    spec.retriever, baseline_reader(_reader(spec)), k=k, pool=pool,
                    filters=[stage], reports_removed=True)


def _embedding_model(retriever: Retriever) -> str:
    """RAGDefender clusters with the knowledge base's own embedding model."""
    model = getattr(retriever, "embedding_model", None)
    if not isinstance(model, str):
        raise InputError("RAGDefender needs the retriever's embedding model name")
    return model


@DEFENSES.register("ragdefender-top5", suite="baseline", family="peer",
                   summary="RAGDefender 0.2.0 on the top k alone",
                   options=frozenset({"task_type"}))
def build_ragdefender_top(name: str, spec: DefenseSpec) -> Pipeline:
    return _ragdefender(name, spec, _k(spec))


@DEFENSES.register("ragdefender-pool20", suite="baseline", family="peer",
                   summary="RAGDefender 0.2.0 on 20 candidates, top k survivors answer",
                   options=frozenset({"task_type", "pool"}))
def build_ragdefender_pool(name: str, spec: DefenseSpec) -> Pipeline:
    return _ragdefender(name, spec, spec.options.get("pool", 20))


@DEFENSES.register("robustrag-keyword", suite="baseline", family="peer",
                   summary="RobustRAG: isolated answers, secure keyword aggregation",
                   options=frozenset({"alpha", "beta"}))
def build_robustrag(name: str, spec: DefenseSpec) -> Pipeline:
    k = _k(spec)
    answerer = RobustRAGKeyword(_reader(spec), k=k, **dict(spec.options))
    return Pipeline(name, spec.retriever, answerer, k=k, reports_removed=True)


BASELINES: tuple[str, ...] = DEFENSES.names(suite="baseline")


def build_baseline(name: str, kb: KnowledgeBase | Retriever, reader: Reader, *,
                   backend: str = "dense", k: int = 5,
                   config: Mapping[str, Any] | None = None) -> Pipeline:
    """The baseline called ``name``, answering with ``reader`` from ``kb`` (``k`` passages
    to the reader; ``config`` holds the defense's own options). Unknown names or options
    are refused."""
    if name not in BASELINES:
        raise InputError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    check_reader(reader)
    defaults = PipelineConfig()
    settings = PipelineConfig(check_backend(backend), defaults.guard,
                              _scorer_with_context(check_k(k)), defaults.consensus)
    return build_defense(name, kb, [reader], config=settings, options=config)


def _scorer_with_context(k: int) -> ScorerConfig:
    scorer = PipelineConfig().scorer
    return replace(scorer, context=k, pool=max(scorer.pool, k))


__all__ = [
    "BASELINES",
    "FitToContext",
    "PerplexityCalibration",
    "PerplexityFilter",
    "PerplexityScorer",
    "QueryParaphrase",
    "RAGDefenderFilter",
    "RobustRAGKeyword",
    "aggregate_keywords",
    "build_baseline",
    "calibrate_perplexity",
]
