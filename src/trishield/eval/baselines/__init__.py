"""Baseline and peer defenses that the PoisonedRAG benchmark compares TriShield with.

Every defense is built from a knowledge base, one reader (an ``LLMReader`` or the extractive
reader), a retrieval backend and ``k``, and answers with ``ask(question) -> Answer`` whose trace
follows the pipeline's conventions (see :mod:`trishield.eval.baselines.base`).

=====================  ====================================================================
name                   what it does
=====================  ====================================================================
perplexity-filter      PoisonedRAG: drop retrieved passages a real LM finds too perplexing
paraphrase             PoisonedRAG: an LLM paraphrases the question before retrieval
expansion-k50          PoisonedRAG: retrieve 50 and answer from all of them
ragdefender-top5       RAGDefender 0.2.0 on the top 5 alone
ragdefender-pool20     RAGDefender 0.2.0 on 20 candidates, top 5 survivors answer
robustrag-keyword      RobustRAG: isolated answers, secure keyword aggregation
=====================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trishield.errors import InputError
from trishield.eval.baselines.base import BaselineDefense, check_k
from trishield.eval.baselines.expansion import KnowledgeExpansion
from trishield.eval.baselines.paraphrase import QueryParaphrase
from trishield.eval.baselines.perplexity import (
    PerplexityCalibration,
    PerplexityFilter,
    PerplexityScorer,
    calibrate_perplexity,
)
from trishield.eval.baselines.ragdefender import RAGDefenderDefense
from trishield.eval.baselines.robustrag import RobustRAGKeyword, aggregate_keywords
from trishield.kb import KnowledgeBase

BASELINES: tuple[str, ...] = ("perplexity-filter", "paraphrase", "expansion-k50",
                              "ragdefender-top5", "ragdefender-pool20", "robustrag-keyword")

_CONFIG_KEYS: dict[str, frozenset[str]] = {
    "perplexity-filter": frozenset({"threshold", "model", "percentile", "sample", "seed",
                                    "max_tokens", "batch_size", "threads", "pool"}),
    "paraphrase": frozenset({"paraphraser", "max_tokens"}),
    "expansion-k50": frozenset({"k", "n_ctx"}),
    "ragdefender-top5": frozenset({"task_type"}),
    "ragdefender-pool20": frozenset({"task_type", "pool"}),
    "robustrag-keyword": frozenset({"alpha", "beta"}),
}


def build_baseline(name: str, kb: KnowledgeBase, reader: object, *, backend: str = "dense",
                   k: int = 5, config: Mapping[str, Any] | None = None) -> BaselineDefense:
    """The defense called ``name``, answering with ``reader`` from ``kb``.

    ``k`` is the number of passages the reader is given (5 in the PoisonedRAG setting);
    ``expansion-k50`` retrieves 50 whatever ``k`` is (``config={"k": n}`` changes that) and
    ``ragdefender-pool20`` screens 20 candidates. ``perplexity-filter`` calibrates its
    threshold on clean passages unless ``config["threshold"]`` is given (scores are cached,
    so calibrating again costs nothing after the first time). Unknown names or config keys
    are refused.
    """
    if name not in _CONFIG_KEYS:
        raise InputError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    config = dict(config or {})
    unknown = sorted(set(config) - _CONFIG_KEYS[name])
    if unknown:
        raise InputError(f"unknown config key(s) for {name}: {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(_CONFIG_KEYS[name]))}")
    k = check_k(k)
    common = {"backend": backend, "k": k}
    if name == "perplexity-filter":
        scorer_options = {key: config[key] for key in ("max_tokens", "batch_size", "threads")
                          if key in config}
        scorer = PerplexityScorer(config.get("model", "smollm2-135m"), **scorer_options)
        threshold = config.get("threshold")
        if threshold is None:
            threshold = calibrate_perplexity(scorer, sample=config.get("sample", 300),
                                             seed=config.get("seed", 0),
                                             percentile=config.get("percentile", 99.0))
        return PerplexityFilter(kb, reader, **common, threshold=threshold, scorer=scorer,
                                pool=config.get("pool"))
    if name == "paraphrase":
        return QueryParaphrase(kb, reader, **common, **config)
    if name == "expansion-k50":
        return KnowledgeExpansion(kb, reader, backend=backend, k=config.get("k", 50),
                                  **({"n_ctx": config["n_ctx"]} if "n_ctx" in config else {}))
    if name == "ragdefender-top5":
        return RAGDefenderDefense(kb, reader, **common, pool=k, **config)
    if name == "ragdefender-pool20":
        return RAGDefenderDefense(kb, reader, **common, pool=config.pop("pool", 20), **config)
    return RobustRAGKeyword(kb, reader, **common, **config)


__all__ = [
    "BASELINES",
    "BaselineDefense",
    "KnowledgeExpansion",
    "PerplexityCalibration",
    "PerplexityFilter",
    "PerplexityScorer",
    "QueryParaphrase",
    "RAGDefenderDefense",
    "RobustRAGKeyword",
    "aggregate_keywords",
    "build_baseline",
    "calibrate_perplexity",
]
