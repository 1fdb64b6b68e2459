"""Retrievers: where a defense's candidates come from.

:class:`KBRetriever` reads a TriShield knowledge base with one retrieval backend.
:class:`PassageRetriever` holds passages that another system retrieved (a LangChain or
LlamaIndex retriever, a vector database), so that the rings can screen them: they are ranked
by the score they came with, and embedded with the same model a knowledge base would use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trishield.errors import InputError
from trishield.kb import KnowledgeBase
from trishield.kb.documents import TIERS
from trishield.kb.indexes.retrieval import BACKENDS, Candidate
from trishield.kb.store import StoredChunk
from trishield.kb.store.disputes import Dispute, Recorded
from trishield.models.embedders import (
    DEFAULT_EMBEDDING_MODEL,
    get_embedding_model,
    load_embedder,
)
from trishield.text import index_terms


class KBRetriever:
    """A knowledge base searched with one backend (``dense``, ``bm25`` or ``hybrid``)."""

    def __init__(self, kb: KnowledgeBase, backend: str = "dense"):
        if backend not in BACKENDS:
            raise InputError(f"unknown retrieval backend {backend!r}; choose from "
                             f"{', '.join(BACKENDS)}")
        self.kb = kb
        self.name = backend
        self.embedding_model = kb.settings.embedding_model

    def retrieve(self, query: str, k: int) -> list[Candidate]:
        return self.kb.search(query, backend=self.name, k=k)

    def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
        vectors = self.kb.embeddings_for(candidates)
        if not vectors:
            return None
        return np.stack([vectors[c.chunk.pk] for c in candidates])

    def unknown_terms(self, query: str) -> list[str]:
        return self.kb.unknown_terms(query)

    def writer_records(self) -> tuple[dict[str, int], dict[str, float]]:
        return self.kb.writer_records()

    def record_dispute(self, dispute: Dispute) -> Recorded:
        return self.kb.record_dispute(dispute)


@dataclass(frozen=True)
class Passage:
    """A passage from someone else's retriever, with the provenance TriShield should assume.

    ``tier`` is what your system knows about the writer (``trusted`` for your own signed
    documents, ``untrusted`` for anything a user could have written); ``score`` is your
    retriever's relevance score (higher is better; the given order is used when absent);
    ``ingested_at`` when the passage entered your store (Unix seconds), which Ring 2's evidence
    reads for precedence: a source that stood before any opposing one weighs more.
    ``embedding`` is the passage's vector if your retriever has it, from the same model the
    rings embed with (the screening's ``embedding_model``; its dimension is checked): it is
    used as given (L2-normalised) instead of embedding the text again.
    """

    id: str
    text: str
    tier: str = "neutral"
    doc_id: str | None = None
    title: str = ""
    writer: str = ""
    score: float | None = None
    ingested_at: float | None = None
    embedding: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InputError(f"a passage needs a non-empty string id, got {self.id!r}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise InputError(f"passage {self.id!r} has no text")
        if self.tier not in TIERS:
            raise InputError(f"passage {self.id!r}: tier must be one of {', '.join(TIERS)}, "
                             f"got {self.tier!r}")
        if self.score is not None and (isinstance(self.score, bool)
                                       or not isinstance(self.score, int | float)
                                       or not np.isfinite(self.score)):
            raise InputError(f"passage {self.id!r}: score must be a finite number")
        if self.ingested_at is not None and (isinstance(self.ingested_at, bool)
                                             or not isinstance(self.ingested_at, int | float)
                                             or not np.isfinite(self.ingested_at)):
            raise InputError(f"passage {self.id!r}: ingested_at must be a finite number of "
                             f"Unix seconds")
        if self.embedding is not None:
            object.__setattr__(self, "embedding", _unit_vector(self.embedding, self.id))


def _unit_vector(value: Any, passage_id: str) -> np.ndarray:
    """A given embedding as a read-only, L2-normalised float32 vector (the rings compare
    vectors by inner product, as the KB's own normalised ones)."""
    try:
        vector = np.array(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise InputError(f"passage {passage_id!r}: embedding must be a sequence of numbers, "
                         f"got {type(value).__name__}") from None
    if vector.ndim != 1 or len(vector) == 0 or not np.all(np.isfinite(vector)):
        raise InputError(f"passage {passage_id!r}: embedding must be one non-empty row of "
                         f"finite numbers, got shape {vector.shape}")
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise InputError(f"passage {passage_id!r}: embedding is all zeros")
    vector /= norm
    vector.setflags(write=False)
    return vector


class PassageRetriever:
    """Passages already retrieved elsewhere, as candidates (see the module docstring)."""

    name = "given"

    def __init__(self, passages: Sequence[Passage],
                 embedding_model: str = DEFAULT_EMBEDDING_MODEL):
        if not passages:
            raise InputError("no passages to screen")
        ids = [p.id for p in passages]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise InputError(f"passage id {duplicate!r} appears twice")
        self.passages = list(passages)
        self.embedding_model = embedding_model
        order = sorted(range(len(passages)),
                       key=lambda i: (-(passages[i].score if passages[i].score is not None
                                        else -i), i))
        ordinals: dict[str, int] = {}
        index_in_doc = []
        for passage in passages:  # a passage is chunk n of its document, in the given order
            doc_id = passage.doc_id or passage.id
            index_in_doc.append(ordinals.get(doc_id, 0))
            ordinals[doc_id] = index_in_doc[-1] + 1
        self._candidates = [self._candidate(passages[i], rank, pk=i, index=index_in_doc[i])
                            for rank, i in enumerate(order, start=1)]
        self._vocabulary = {term for p in passages for term in index_terms(p.text)}
        dimension = get_embedding_model(embedding_model).dimension
        self._vectors: dict[int, np.ndarray] = {}
        for pk, passage in enumerate(passages):
            if passage.embedding is None:
                continue
            if len(passage.embedding) != dimension:
                raise InputError(f"passage {passage.id!r}: its embedding has "
                                 f"{len(passage.embedding)} dimensions, {embedding_model} "
                                 f"gives {dimension}: give vectors of the model the rings "
                                 "use (embedding_model), or none")
            self._vectors[pk] = passage.embedding
        self.encoded = 0
        """Passages this retriever embedded itself (those given without an embedding)."""

    @staticmethod
    def _candidate(passage: Passage, rank: int, *, pk: int, index: int) -> Candidate:
        """``pk`` is the passage's position in the input, which maps results back to it."""
        chunk = StoredChunk(pk=pk, doc_id=passage.doc_id or passage.id, chunk_index=index,
                            text=passage.text, title=passage.title, tier=passage.tier,
                            writer=passage.writer, char_start=0, char_end=len(passage.text),
                            ingested_at=(None if passage.ingested_at is None
                                         else float(passage.ingested_at)))
        score = passage.score if passage.score is not None else 1.0 / rank
        return Candidate(chunk, float(score), rank, "given")

    def retrieve(self, query: str, k: int) -> list[Candidate]:
        return self._candidates[:k]

    def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
        """The given embeddings; the others encoded once per passage, in one batch: Ring 1
        and Ring 2 both ask for the same passages, and encoding them is most of what a
        screening costs."""
        if not candidates:
            return None
        missing = list({c.chunk.pk: c for c in candidates
                        if c.chunk.pk not in self._vectors}.values())
        if missing:
            encoder = load_embedder(self.embedding_model)
            vectors = np.asarray(encoder.encode([c.chunk.text for c in missing]),
                                 dtype=np.float32)
            self._vectors.update(zip((c.chunk.pk for c in missing), vectors, strict=True))
            self.encoded += len(missing)
        return np.stack([self._vectors[c.chunk.pk] for c in candidates])

    def unknown_terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(t for t in index_terms(query) if t not in self._vocabulary))
