"""The Haystack component in a real Haystack pipeline: an in-memory document store, its BM25
retriever, then TriShield (``trishield/integrations/haystack.py``)."""

from __future__ import annotations

import pytest
from haystack import Document, Pipeline
from haystack.components.preprocessors import DocumentSplitter
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from rag_passages import PASSAGES, QUESTION, assert_screened

from trishield.errors import InputError
from trishield.integrations.haystack import TriShieldRanker
from trishield.integrations.metadata import TRISHIELD_KEY, MetadataKeys


def pipeline(documents: list[Document], ranker: TriShieldRanker) -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents(documents)
    built = Pipeline()
    built.add_component("retriever", InMemoryBM25Retriever(store, top_k=20))
    built.add_component("trishield", ranker)
    built.connect("retriever.documents", "trishield.documents")
    return built


def documents() -> list[Document]:
    return [Document(id=p["id"], content=p["text"], meta=dict(p["meta"])) for p in PASSAGES]


def ask(built: Pipeline) -> dict:
    return built.run({"retriever": {"query": QUESTION}, "trishield": {"query": QUESTION}})[
        "trishield"]


def test_pipeline_drops_the_poison_and_ranks_by_trust() -> None:
    ranker = TriShieldRanker()
    out = ask(pipeline(documents(), ranker))
    kept = [(d.id, d.score, d.meta[TRISHIELD_KEY]) for d in out["documents"]]
    assert_screened(kept, {d.id: d.meta[TRISHIELD_KEY] for d in out["removed"]})
    assert out["removed"][0].content.startswith("When did the Eiffel Tower open")
    assert out["trace"]["ring1"]["blocked"] == ["poison#0"]
    assert out["trace"] == ranker.last_trace.as_dict()


def test_split_documents_keep_their_parent_as_doc_id() -> None:
    article = Document(id="article", meta={"tier": "trusted", "writer": "encyclopedia"},
                       content=PASSAGES[0]["text"] + "\n\n" + PASSAGES[1]["text"])
    chunks = DocumentSplitter(split_by="passage", split_length=1).run([article])["documents"]
    rest = [d for d in documents() if not d.id.startswith("wiki")]
    out = ask(pipeline(chunks + rest, TriShieldRanker(k=3)))
    decisions = [d.meta[TRISHIELD_KEY] for d in out["documents"]]
    assert len(decisions) == 3
    assert [d["doc_id"] for d in decisions if d["tier"] == "trusted"] == ["article"] * 2


def test_serialises_and_loads_back_in_a_pipeline() -> None:
    keys = MetadataKeys(tier="trust_level", sources=("url",))
    built = pipeline(documents(), TriShieldRanker(k=3, default_tier="untrusted", keys=keys))
    loaded = Pipeline.loads(built.dumps(), allowed_modules=["trishield.integrations.haystack"])
    options = loaded.get_component("trishield").options
    assert (options.k, options.default_tier, options.keys) == (3, "untrusted", keys)


def test_bad_metadata_fails_clearly_and_leaves_no_screening() -> None:
    ranker = TriShieldRanker()
    bad = documents()
    bad[4] = Document(id="burst-1", content=PASSAGES[4]["text"], meta={"tier": "gold"})
    with pytest.raises(InputError, match="passage 'burst-1': metadata 'tier' must be one of"):
        ranker.run(QUESTION, bad)
    assert ranker.last_screening is None
    with pytest.raises(InputError, match="has no text content"):
        ranker.run(QUESTION, [Document(id="empty")])
    with pytest.raises(InputError, match="k must be a positive integer"):
        ranker.run(QUESTION, documents(), k=0)
    assert ranker.run(QUESTION, []) == {"documents": [], "removed": [], "trace": {}}
