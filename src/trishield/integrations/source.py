"""Your retriever as a TriShield :class:`~trishield.stages.Retriever`, so that a whole defense
(Rings 1, 2 and 3 with :func:`trishield.defend`) can run over it.

:func:`trishield.screen` takes passages already found; a defense asks its retriever itself.
:class:`FoundRetriever` bridges the two: each ``retrieve(query, k)`` calls your search, reads
the provenance from the metadata (:mod:`trishield.integrations.metadata`) and serves the
candidates, embeddings and vocabulary of that one result set. It keeps the last result set
between ``retrieve`` and the rings' calls, as a pipeline makes them in turn: one question at a
time per instance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from trishield.defenses.retrievers import PassageRetriever
from trishield.errors import InputError
from trishield.integrations.metadata import Found, MetadataKeys, to_passage, with_relevance
from trishield.kb.indexes.retrieval import Candidate
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL


class FoundRetriever:
    """``search(query)`` (your retriever) as candidates with provenance."""

    name = "given"

    def __init__(self, search: Callable[[str], Sequence[Found]], *,
                 keys: MetadataKeys | None = None, default_tier: str = "neutral",
                 embedding_model: str = DEFAULT_EMBEDDING_MODEL):
        if not callable(search):
            raise InputError("search must be a callable from a query to found passages")
        self.search = search
        self.keys = keys or MetadataKeys()
        self.default_tier = default_tier
        self.embedding_model = embedding_model
        self._current: PassageRetriever | None = None

    def retrieve(self, query: str, k: int) -> list[Candidate]:
        found = list(self.search(query))
        if not all(isinstance(f, Found) for f in found):
            raise InputError("search must return Found passages")
        passages = with_relevance(query, [to_passage(f, self.keys, self.default_tier)
                                          for f in found], self.embedding_model)
        self._current = PassageRetriever(passages, self.embedding_model) if passages else None
        return [] if self._current is None else self._current.retrieve(query, k)

    def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
        return None if self._current is None else self._current.embeddings(candidates)

    def unknown_terms(self, query: str) -> list[str]:
        return [] if self._current is None else self._current.unknown_terms(query)

