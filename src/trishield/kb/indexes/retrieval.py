"""Retrieval backends over a knowledge base: ``dense``, ``bm25`` and ``hybrid``.

Scores from different backends live on different scales (cosine, BM25, reciprocal-rank sums),
so every candidate says which backend scored it, and each backend's per-list rank is kept for
the trace. Anything that thresholds a score must calibrate per backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from trishield.registry import Registry

if TYPE_CHECKING:  # the store (numpy, the lexical index) is not needed to name the backends
    from trishield.kb.store import StoredChunk

RRF_CONSTANT = 60
"""The usual reciprocal-rank-fusion constant (Cormack et al., 2009)."""

HYBRID_DEPTH_FACTOR = 4
HYBRID_MIN_DEPTH = 50


@dataclass(frozen=True)
class Candidate:
    """One retrieved chunk with its score, rank, and each backend's view of it."""

    chunk: StoredChunk
    score: float
    rank: int
    backend: str
    components: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def doc_id(self) -> str:
        return self.chunk.doc_id

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id

    def as_dict(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "score": round(self.score, 6),
            "backend": self.backend,
            "doc_id": self.chunk.doc_id,
            "chunk_id": self.chunk.chunk_id,
            "title": self.chunk.title,
            "tier": self.chunk.tier,
            "writer": self.chunk.writer,
            "provenance": self.chunk.provenance,
            "char_start": self.chunk.char_start,
            "char_end": self.chunk.char_end,
            "text": self.chunk.text,
            "components": self.components,
        }


def reciprocal_rank_fusion(
    rankings: dict[str, Sequence[tuple[int, float]]], constant: int = RRF_CONSTANT
) -> list[tuple[int, float, dict[str, dict[str, float]]]]:
    """Fuse ranked ``(id, score)`` lists: ``sum(1 / (constant + rank))`` over the lists.

    Ties break by id so that the fused order is deterministic.
    """
    fused: dict[int, float] = {}
    components: dict[int, dict[str, dict[str, float]]] = {}
    for name, ranking in rankings.items():
        for rank, (item, score) in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (constant + rank)
            components.setdefault(item, {})[name] = {"rank": rank, "score": round(score, 6)}
    ordered = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
    return [(item, score, components[item]) for item, score in ordered]


def hybrid_depth(k: int) -> int:
    """How deep each list is read before fusion: deeper than k, so fusion has material."""
    return max(HYBRID_MIN_DEPTH, HYBRID_DEPTH_FACTOR * k)


Ranking = list[tuple[int, float, dict[str, dict[str, float]]]]
"""``(chunk pk, score, per-list components)`` in rank order."""


class Searchers(NamedTuple):
    """The two index searches a backend may combine: ``(query, depth) -> [(pk, score)]``."""

    dense: Callable[[str, int], list[tuple[int, float]]]
    lexical: Callable[[str, int], list[tuple[int, float]]]


RankingFunction = Callable[[Searchers, str, int, "int | None"], Ranking]
RETRIEVAL_BACKENDS: Registry[RankingFunction] = Registry(
    "retrieval backend", group="trishield.retrieval_backends")
"""Retrieval backends by name; a backend ranks chunks from the KB's indexes."""


def _single(name: str, ranking: list[tuple[int, float]]) -> Ranking:
    return [(item, score, {name: {"rank": rank, "score": round(score, 6)}})
            for rank, (item, score) in enumerate(ranking, start=1)]


@RETRIEVAL_BACKENDS.register("dense", summary="cosine similarity of sentence embeddings")
def dense_ranking(search: Searchers, query: str, k: int, depth: int | None) -> Ranking:
    return _single("dense", search.dense(query, k))


@RETRIEVAL_BACKENDS.register("bm25", summary="BM25 over stemmed words")
def bm25_ranking(search: Searchers, query: str, k: int, depth: int | None) -> Ranking:
    return _single("bm25", search.lexical(query, k))


@RETRIEVAL_BACKENDS.register("hybrid", summary="reciprocal-rank fusion of dense and bm25")
def hybrid_ranking(search: Searchers, query: str, k: int, depth: int | None) -> Ranking:
    read = depth or hybrid_depth(k)
    return reciprocal_rank_fusion({"dense": search.dense(query, read),
                                   "bm25": search.lexical(query, read)})[:k]


BACKENDS: tuple[str, ...] = RETRIEVAL_BACKENDS.names()
"""The registered backends' names (every CLI choice and config check reads this)."""
