"""The LangChain compressor, screening retriever and answering Runnable, run through
LangChain's own Runnable machinery over a real ``BaseRetriever``
(``trishield/integrations/langchain.py``)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from rag_passages import PASSAGES, QUESTION, assert_screened

from trishield.errors import InputError
from trishield.integrations.langchain import (
    TriShieldCompressor,
    TriShieldRetriever,
    TriShieldRunnable,
)
from trishield.integrations.metadata import TRISHIELD_KEY
from trishield.llm import ExtractiveReader
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder


class MiniLM(Embeddings):
    """TriShield's embedder as LangChain's (the vector store needs one; no download)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return load_embedder(DEFAULT_EMBEDDING_MODEL).encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class ListRetriever(BaseRetriever):
    """A LangChain retriever over fixed documents, best first (a vector store's retriever,
    without the store); the score goes in the metadata, as relevance-scored searches do."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        return sorted(self.documents, key=lambda d: -d.metadata["score"])


def documents() -> list[Document]:
    return [Document(id=p["id"], page_content=p["text"],
                     metadata={**p["meta"], "score": p["score"]}) for p in PASSAGES]


def test_screening_retriever_drops_the_poison_and_ranks_by_trust() -> None:
    retriever = TriShieldRetriever(retriever=ListRetriever(documents=documents()))
    chain = retriever | RunnableLambda(lambda docs: [(d.id, d.metadata) for d in docs])
    kept = [(i, meta[TRISHIELD_KEY]["trust"], meta[TRISHIELD_KEY])
            for i, meta in chain.invoke(QUESTION)]
    screening = retriever.last_screening
    assert_screened(kept, {i: screening.decisions[i] for i in screening.removed})
    assert screening.screening.trace.question == QUESTION
    assert all(TRISHIELD_KEY not in d.metadata for d in documents())  # copies, not edits


def test_vector_store_retriever_as_documented() -> None:
    # docs/integrations.md's example over LangChain's own in-memory vector store, whose
    # documents carry no score: the store's order is the ranking
    store = InMemoryVectorStore(MiniLM())
    store.add_documents([Document(id=p["id"], page_content=p["text"], metadata=p["meta"])
                         for p in PASSAGES])
    retriever = TriShieldRetriever(retriever=store.as_retriever(search_kwargs={"k": 20}))
    kept = [(d.id, d.metadata[TRISHIELD_KEY]["trust"], d.metadata[TRISHIELD_KEY])
            for d in retriever.invoke(QUESTION)]
    screening = retriever.last_screening
    assert_screened(kept, {i: screening.decisions[i] for i in screening.removed})


def test_compressor_names_documents_without_ids_by_place() -> None:
    compressor = TriShieldCompressor(k=3)
    unnamed = [Document(page_content=d.page_content, metadata=d.metadata)
               for d in sorted(documents(), key=lambda d: -d.metadata["score"])]
    kept = compressor.compress_documents(unnamed, QUESTION)
    assert len(kept) == 3 and all(d.id is None for d in kept)
    assert compressor.last_screening.removed == ["document-0"]  # the poison ranked first
    assert compressor.last_trace.ring1.blocked == ["document-0#0"]
    assert compressor.compress_documents([], QUESTION) == []
    assert compressor.last_screening is None


def test_bad_metadata_fails_clearly_and_leaves_no_screening() -> None:
    compressor = TriShieldCompressor()
    bad = documents()
    bad[2].metadata["tier"] = "gold"
    with pytest.raises(InputError, match="passage 'guide-1': metadata 'tier' must be one of"):
        compressor.compress_documents(bad, QUESTION)
    assert compressor.last_screening is None
    bad = documents()
    bad[0].metadata["ingested_at"] = "last tuesday"
    with pytest.raises(InputError, match="'ingested_at' is not an ISO 8601 time"):
        compressor.compress_documents(bad, QUESTION)
    with pytest.raises(InputError, match="expected a langchain Document"):
        compressor.compress_documents(["text"], QUESTION)


def test_runnable_answers_with_all_three_rings_over_the_retriever() -> None:
    # the extractive reader (no LLM) stands in the panel: the rings run as they would
    runnable = TriShieldRunnable(ListRetriever(documents=documents()),
                                 panel=[ExtractiveReader()])
    result = (runnable | RunnableLambda(lambda r: r)).invoke({"question": QUESTION})
    assert not result["refused"] and "15 May 1889" in result["answer"]
    assert result["citations"] == ["eiffel-article"]
    trace = result["trace"]
    assert trace.ring1.blocked == ["poison#0"] and trace.ring3 is not None
    assert "eiffel-article" in {row.doc_id for row in trace.context}
    with pytest.raises(InputError, match="takes a question"):
        runnable.invoke({"query": QUESTION})
    nothing = TriShieldRunnable(ListRetriever(documents=[]), panel=[ExtractiveReader()])
    refused = nothing.invoke(QUESTION)
    assert refused["refused"] and refused["answer"] is None and refused["citations"] == []
    with pytest.raises(InputError, match="BaseRetriever"):
        TriShieldRunnable(documents())
