"""Embeddings the caller's retriever already has are used, not recomputed: through
``trishield.screen`` and each library's own objects (LlamaIndex nodes' ``embedding``,
Haystack documents' ``embedding``, LangChain documents' ``metadata["embedding"]``).

The given vectors are the real model's, as a retriever built on the same model stores them,
so a screening with them must decide exactly as one that embeds every passage itself, while
embedding none (``Screening.embedded``).
"""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document as HaystackDocument
from langchain_core.documents import Document as LangChainDocument
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from rag_passages import PASSAGES, QUESTION

import trishield
from trishield.errors import InputError
from trishield.integrations.haystack import TriShieldRanker
from trishield.integrations.langchain import TriShieldCompressor
from trishield.integrations.llamaindex import TriShieldPostprocessor
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder


@pytest.fixture(scope="module")
def vectors() -> dict[str, list[float]]:
    encoded = load_embedder(DEFAULT_EMBEDDING_MODEL).encode([p["text"] for p in PASSAGES])
    return {p["id"]: row.tolist() for p, row in zip(PASSAGES, encoded, strict=True)}


def _passages(vectors: dict[str, list[float]] | None, given: set[str]) -> list[dict]:
    return [{"id": p["id"], "text": p["text"], "score": p["score"],
             "tier": p["meta"].get("tier", "neutral")}
            | ({"embedding": vectors[p["id"]]} if vectors and p["id"] in given else {})
            for p in PASSAGES]


def _outcome(screening: trishield.Screening) -> tuple:
    return ([(p.id, round(p.trust, 6)) for p in screening.kept], sorted(screening.removed),
            screening.refusal)


def test_screen_embeds_only_the_passages_given_without_one(
        vectors: dict[str, list[float]]) -> None:
    every = {p["id"] for p in PASSAGES}
    alone = trishield.screen(QUESTION, _passages(None, set()))
    assert alone.embedded == len(PASSAGES)
    given = trishield.screen(QUESTION, _passages(vectors, every))
    assert given.embedded == 0 and _outcome(given) == _outcome(alone)
    half = {p["id"] for p in PASSAGES[::2]}
    mixed = trishield.screen(QUESTION, _passages(vectors, half))
    assert mixed.embedded == len(PASSAGES) - len(half) and _outcome(mixed) == _outcome(alone)


def test_given_embeddings_are_checked(vectors: dict[str, list[float]]) -> None:
    short = _passages(vectors, {"wiki-1"})
    short[0]["embedding"] = short[0]["embedding"][:100]
    with pytest.raises(InputError, match="100 dimensions"):
        trishield.screen(QUESTION, short)
    for bad, message in (([0.0] * 384, "all zeros"), ([float("nan")] * 384, "finite"),
                         ("vector", "numbers")):
        passages = _passages(vectors, set())
        passages[0]["embedding"] = bad
        with pytest.raises(InputError, match=message):
            trishield.screen(QUESTION, passages)


def test_llamaindex_nodes_bring_their_embeddings_and_scores(
        vectors: dict[str, list[float]]) -> None:
    nodes = [NodeWithScore(node=TextNode(id_=p["id"], text=p["text"], metadata=p["meta"],
                                         embedding=vectors[p["id"]]), score=p["score"])
             for p in PASSAGES]
    postprocessor = TriShieldPostprocessor()
    kept = postprocessor.postprocess_nodes(nodes, QueryBundle(QUESTION))
    assert "poison" not in {n.node.node_id for n in kept}
    assert postprocessor.last_screening.screening.embedded == 0
    bare = [NodeWithScore(node=TextNode(id_=p["id"], text=p["text"], metadata=p["meta"]),
                          score=p["score"]) for p in PASSAGES]
    postprocessor.postprocess_nodes(bare, QueryBundle(QUESTION))
    assert postprocessor.last_screening.screening.embedded == len(PASSAGES)


def test_haystack_documents_bring_their_embeddings_and_scores(
        vectors: dict[str, list[float]]) -> None:
    documents = [HaystackDocument(id=p["id"], content=p["text"], meta=dict(p["meta"]),
                                  score=p["score"], embedding=vectors[p["id"]])
                 for p in PASSAGES]
    ranker = TriShieldRanker()
    out = ranker.run(query=QUESTION, documents=documents)
    assert "poison" not in {d.id for d in out["documents"]}
    assert ranker.last_screening.screening.embedded == 0


def test_langchain_documents_bring_embeddings_in_their_metadata(
        vectors: dict[str, list[float]]) -> None:
    """No scores: relevance is the cosine of the question with the given vectors (only the
    question is embedded), and the rings embed nothing more."""
    documents = [LangChainDocument(id=p["id"], page_content=p["text"],
                                   metadata={**p["meta"], "embedding": vectors[p["id"]]})
                 for p in PASSAGES]
    compressor = TriShieldCompressor()
    kept = compressor.compress_documents(documents, QUESTION)
    assert "poison" not in {d.id for d in kept}
    screening = compressor.last_screening.screening
    assert screening.embedded == 0
    question = load_embedder(DEFAULT_EMBEDDING_MODEL).encode([QUESTION])[0]
    relevance = {row.chunk_id: row.score for row in screening.trace.candidates}
    for passage_id, trace_id in screening.trace_ids.items():
        expected = float(np.dot(question, vectors[passage_id]))
        assert relevance[trace_id] == pytest.approx(expected, abs=1e-4)
