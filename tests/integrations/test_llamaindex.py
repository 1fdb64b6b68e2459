"""The LlamaIndex node postprocessor, run by LlamaIndex's own query engine over a real
LlamaIndex retriever (``trishield/integrations/llamaindex.py``)."""

from __future__ import annotations

import pytest
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers.no_text import NoText
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from rag_passages import PASSAGES, QUESTION, assert_screened

from trishield.errors import InputError
from trishield.integrations.llamaindex import TriShieldPostprocessor
from trishield.integrations.metadata import TRISHIELD_KEY, MetadataKeys
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder


class MiniLM(BaseEmbedding):
    """TriShield's embedder as LlamaIndex's embed model (the index needs one; no download)."""

    def _get_text_embedding(self, text: str) -> list[float]:
        return load_embedder(DEFAULT_EMBEDDING_MODEL).encode([text])[0].tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)


class ListRetriever(BaseRetriever):
    """A LlamaIndex retriever over fixed nodes, best score first (what a vector index's
    retriever returns, without building one)."""

    def __init__(self, nodes: list[NodeWithScore]):
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return sorted(self.nodes, key=lambda n: -(n.score or 0.0))


def nodes(rename: dict[str, str] | None = None) -> list[NodeWithScore]:
    """The shared passages as nodes; LlamaIndex's file readers record ``file_path``."""
    rename = {"source": "file_path", **(rename or {})}
    return [NodeWithScore(node=TextNode(id_=p["id"], text=p["text"],
                                        metadata={rename.get(k, k): v
                                                  for k, v in p["meta"].items()}),
                          score=p["score"]) for p in PASSAGES]


def engine(postprocessor: TriShieldPostprocessor) -> RetrieverQueryEngine:
    # NoText returns the postprocessed nodes without synthesising: MockLLM only fills the
    # synthesiser's LLM slot (Rings 1-2 need no LLM) and is never called
    synthesizer = NoText(llm=MockLLM())
    return RetrieverQueryEngine(ListRetriever(nodes()), response_synthesizer=synthesizer,
                                node_postprocessors=[postprocessor])


def test_query_engine_drops_the_poison_and_ranks_by_trust() -> None:
    postprocessor = TriShieldPostprocessor()
    response = engine(postprocessor).query(QUESTION)
    kept = [(n.node.node_id, n.score, n.node.metadata[TRISHIELD_KEY])
            for n in response.source_nodes]
    screening = postprocessor.last_screening
    assert_screened(kept, {i: screening.decisions[i] for i in screening.removed})
    assert postprocessor.last_trace.ring1.blocked == ["poison#0"]
    # the decisions stay out of what the LLM and the embedder read; the input is untouched
    node = response.source_nodes[0].node
    assert TRISHIELD_KEY not in node.get_content(metadata_mode=MetadataMode.LLM)
    assert TRISHIELD_KEY not in node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "tier: trusted" in node.get_content(metadata_mode=MetadataMode.LLM)
    assert all(TRISHIELD_KEY not in n.node.metadata for n in nodes())


def test_vector_index_query_engine_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/integrations.md's example: as_query_engine(node_postprocessors=[...]) over a real
    # VectorStoreIndex. "no_text" synthesises nothing, so the LLM slot holds LlamaIndex's
    # MockLLM, never called (and restored after the test)
    monkeypatch.setattr(Settings, "_llm", MockLLM())
    index = VectorStoreIndex([n.node for n in nodes()], embed_model=MiniLM())
    postprocessor = TriShieldPostprocessor()
    engine = index.as_query_engine(similarity_top_k=20, response_mode="no_text",
                                   node_postprocessors=[postprocessor])
    response = engine.query(QUESTION)
    kept = [(n.node.node_id, n.score, n.node.metadata[TRISHIELD_KEY])
            for n in response.source_nodes]
    screening = postprocessor.last_screening
    assert_screened(kept, {i: screening.decisions[i] for i in screening.removed})
    assert len(screening.screening.trace.candidates) == len(PASSAGES)


def test_postprocess_nodes_with_renamed_keys_and_k() -> None:
    postprocessor = TriShieldPostprocessor(k=2, keys=MetadataKeys(tier="trust_level"))
    kept = postprocessor.postprocess_nodes(nodes({"tier": "trust_level"}),
                                           query_str=QUESTION)
    assert [n.node.node_id for n in kept] == ["wiki-2", "wiki-1"]
    assert kept[0].node.metadata[TRISHIELD_KEY]["tier"] == "trusted"
    assert postprocessor.postprocess_nodes([], query_str=QUESTION) == []
    assert postprocessor.last_screening is None


def test_bad_metadata_or_settings_fail_clearly() -> None:
    postprocessor = TriShieldPostprocessor()
    bad = nodes()
    bad[0].node.metadata["tier"] = "gold"
    with pytest.raises(InputError, match="passage 'wiki-1': metadata 'tier' must be one of "
                                         "trusted, neutral, untrusted, got 'gold'"):
        postprocessor.postprocess_nodes(bad, query_str=QUESTION)
    assert postprocessor.last_screening is None
    with pytest.raises(ValueError, match="needs the query"):
        postprocessor.postprocess_nodes(nodes())
    with pytest.raises(InputError, match="default_tier must be one of"):
        TriShieldPostprocessor(default_tier="gold")
    with pytest.raises(InputError, match="k must be a positive integer"):
        TriShieldPostprocessor(k=0)
