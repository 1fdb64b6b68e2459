"""A search's candidates carry their stored embeddings (read with the row, one snapshot), and
``KnowledgeBase.embeddings_for`` returns exactly what the database stores for them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from trishield.demo import DEMO_WRITER
from trishield.errors import KnowledgeBaseError
from trishield.kb import Document, KnowledgeBase
from trishield.kb.indexes.retrieval import BACKENDS, Candidate


def _without_embedding(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates as a caller that built them without a search would hold them."""
    return [replace(c, chunk=replace(c.chunk, embedding=None)) for c in candidates]


def _stored(kb: KnowledgeBase) -> dict[int, np.ndarray]:
    pks, vectors = kb.store.all_embeddings(kb.dimension)
    return dict(zip(pks.tolist(), vectors, strict=True))


def _same(found: dict[int, np.ndarray], expected: dict[int, np.ndarray]) -> bool:
    return set(found) == set(expected) and all(
        found[pk].dtype == np.float32 and found[pk].shape == expected[pk].shape
        and np.array_equal(found[pk], expected[pk]) for pk in expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_carries_the_stored_embedding(demo_kb_dir: Path, backend: str) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        candidates = kb.search("how long do I have to return an item", backend=backend, k=8)
        stored = _stored(kb)
        assert candidates and all(c.chunk.embedding is not None for c in candidates)
        expected = {c.chunk.pk: stored[c.chunk.pk] for c in candidates}
        assert _same(kb.embeddings_for(candidates), expected)
        # the same floats as the database path (candidates that carry none)
        assert _same(kb.embeddings_for(_without_embedding(candidates)), expected)
        # some carried, some not: each from where it is
        mixed = candidates[:3] + _without_embedding(candidates[3:])
        assert _same(kb.embeddings_for(mixed), expected)
        assert kb.embeddings_for([]) == {}


def test_a_candidate_keeps_its_search_snapshot_after_a_delete_and_an_update(
        demo_kb_dir: Path) -> None:
    """The embedding comes from the search's snapshot: a document deleted or rewritten after
    the search still gives the vector the candidate was retrieved with, while a database read
    (a candidate without one) no longer finds it; a new search reads the new rows."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id="bikes", text="Bicycles can be returned within 14 days of "
                                              "delivery, unused and in the original box.")],
                  tier="trusted", writer=DEMO_WRITER)
        before = kb.search("can I return a bicycle", backend="bm25", k=5)
        bike = next(c for c in before if c.doc_id == "bikes")
        vector = _stored(kb)[bike.chunk.pk]

        kb.ingest([Document(id="bikes", text="Bicycles can never be returned once the box "
                                              "has been opened, whatever the reason.")],
                  tier="trusted", writer=DEMO_WRITER, update=True)
        stored = _stored(kb)
        assert not any(np.array_equal(v, vector) for v in stored.values())  # the row is gone
        assert np.array_equal(kb.embeddings_for([bike])[bike.chunk.pk], vector)
        # read now, the old candidate's pk finds nothing, or the new row that reuses it
        assert not any(np.array_equal(v, vector) for v in
                       kb.embeddings_for(_without_embedding([bike])).values())

        after = kb.search("can I return a bicycle", backend="bm25", k=5)
        new = next(c for c in after if c.doc_id == "bikes")
        assert np.array_equal(kb.embeddings_for([new])[new.chunk.pk], stored[new.chunk.pk])
        assert not np.array_equal(stored[new.chunk.pk], vector)

        kb.delete("bikes", by="test")
        assert new.chunk.pk not in _stored(kb)
        assert np.array_equal(kb.embeddings_for([new])[new.chunk.pk], stored[new.chunk.pk])
        assert kb.embeddings_for(_without_embedding([new])) == {}


def test_a_carried_embedding_of_the_wrong_size_is_refused(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        candidate = kb.search("refund", backend="bm25", k=1)[0]
        short = replace(candidate, chunk=replace(candidate.chunk,
                                                 embedding=candidate.chunk.embedding[:-4]))
        with pytest.raises(KnowledgeBaseError, match=f"not {4 * kb.dimension}"):
            kb.embeddings_for([candidate, short])
