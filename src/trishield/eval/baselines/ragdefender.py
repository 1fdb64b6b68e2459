"""RAGDefender (Kim, Lee and Koo, ACSAC 2025), the PyPI package ``ragdefender`` 0.2.0 (MIT).

A post-retrieval filter with no LLM: stage 1 estimates how many retrieved passages are
adversarial (``single_hop``: two-cluster agglomerative clustering of the embeddings plus a
TF-IDF vote on which cluster is the attack), stage 2 drops the passages that take part in the
most similar pairs. It exploits what PoisonedRAG's poisons have in common: several
near-duplicates of each other.

Two modes, measured on the same setup in docs/benchmarks.md ("Baselines"):

* ``ragdefender-top5``: applied to the top ``k`` alone (when every one of them is a poison
  there is nothing clean to keep, which is why it barely helps);
* ``ragdefender-pool20``: applied to ``pool=20`` candidates, the reader gets the top ``k``
  survivors in retrieval order.

Offline: the package would load its embedder from the model hub by name, but it accepts an
instantiated SentenceTransformer and returns it unchanged, so it is handed the knowledge base's
own hash-verified model (all-MiniLM-L6-v2 by default, RAGDefender's own default checkpoint).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from trishield.config import enforce_offline
from trishield.errors import InputError, ModelError, require_extra
from trishield.kb.indexes.retrieval import Candidate
from trishield.models.embedders import get_embedding_model, load_embedder
from trishield.stages import Run

TASK_TYPES = ("single_hop", "multi_hop")


@cache
def _defender(embedding_model: str, task_type: str) -> Any:
    """One RAGDefender per embedding model and task type (they hold no per-query state)."""
    enforce_offline()
    require_extra("the RAGDefender baseline", "eval", ["ragdefender"])
    import ragdefender
    from ragdefender import RAGDefender

    if ragdefender.__version__ != "0.2.0":
        # 0.1.1 truncated the list instead of running stage 2; other versions are unmeasured
        raise ModelError(f"ragdefender {ragdefender.__version__} is installed; TriShield's "
                         "comparison is pinned to 0.2.0")
    # an ONNX model (all-MiniLM-L6-v2-int8) has no SentenceTransformer: its fp32 twin is the
    # same model, which is what RAGDefender's own embeddings then use
    twin = get_embedding_model(embedding_model).twin
    encoder = load_embedder(twin or embedding_model).sentence_transformer
    return RAGDefender(embedder=encoder, task_type=task_type, device="cpu")


class RAGDefenderFilter:
    """A candidate filter: RAGDefender drops the passages it calls adversarial (the
    composition reads ``pool`` candidates and answers from the top ``k`` survivors)."""

    name = "ragdefender"

    def __init__(self, embedding_model: str, *, pool: int, task_type: str = "single_hop"):
        if task_type not in TASK_TYPES:
            raise InputError(f"unknown RAGDefender task type {task_type!r}; choose from "
                             f"{', '.join(TASK_TYPES)}")
        self.embedding_model = embedding_model
        self.pool = pool
        self.task_type = task_type

    def screen(self, run: Run, question: str, candidates: list[Candidate]) -> list[Candidate]:
        details: dict[str, Any] = {"package": "ragdefender 0.2.0", "task_type": self.task_type,
                                   "embedder": self.embedding_model, "pool": self.pool}
        removed_indices: list[int] = []
        if len(candidates) < 2:
            # its clustering needs two passages; one passage has no near-duplicate to find
            details["skipped"] = f"only {len(candidates)} candidate(s): nothing to group"
        else:
            defender = _defender(self.embedding_model, self.task_type)
            _, removed_indices = defender.defend(question, [c.chunk.text for c in candidates],
                                                 task_type=self.task_type,
                                                 return_indices=True)
            removed_indices = sorted(int(i) for i in removed_indices)
        details["n_adv"] = len(removed_indices)
        details["removed_ranks"] = [candidates[i].rank for i in removed_indices]
        run.trace.details[self.name] = details
        dropped = set(removed_indices)
        for i in removed_indices:
            run.removed(candidates[i], f"RAGDefender ({self.task_type}) estimated "
                                       f"{len(dropped)} adversarial passage(s) of "
                                       f"{len(candidates)} and picked this one")
        return [c for i, c in enumerate(candidates) if i not in dropped]
