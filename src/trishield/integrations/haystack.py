"""TriShield as a Haystack component (``pip install 'trishield[haystack]'``).

:class:`TriShieldRanker` sits where a Haystack ranker does, between a retriever and the
prompt builder, and runs Rings 1 and 2 (:func:`trishield.screen`) on the retrieved documents
with the provenance their ``meta`` records (:mod:`trishield.integrations.metadata`)::

    from trishield.integrations.haystack import TriShieldRanker

    pipeline.add_component("trishield", TriShieldRanker())
    pipeline.connect("retriever.documents", "trishield.documents")

Outputs: ``documents``, the ones to answer from, most trusted first, each a copy whose
``score`` is its trust and whose ``meta["trishield"]`` holds the rings' decisions;
``removed``, the ones Ring 1 blocked, with the reasons in the same entry; ``trace``, the full
trace as JSON (also on ``last_screening``, with the refusal when Ring 2 found nothing to
answer from). Documents split by Haystack's ``DocumentSplitter`` keep their parent as
``doc_id`` (its ``source_id``).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from trishield.errors import InputError
from trishield.integrations.metadata import (
    TRISHIELD_KEY,
    Found,
    MetadataKeys,
    Screened,
    ScreenOptions,
    screen_found,
)
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL
from trishield.settings import Settings
from trishield.trace import Trace

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("trishield.integrations.haystack needs Haystack: "
                      "pip install 'trishield[haystack]'") from error


@component
class TriShieldRanker:
    """Rings 1 and 2 over retrieved documents (see the module docstring).

    ``k`` (default 5) documents are kept at most; ``default_tier`` is the tier of a document
    whose meta names none; ``keys`` renames the meta keys read; ``settings`` configures the
    rings. Retrieve 20 or so (``top_k``), so that the rings have a pool to choose from.
    """

    def __init__(self, k: int | None = None, default_tier: str = "neutral",
                 keys: MetadataKeys | None = None, settings: Settings | None = None,
                 embedding_model: str = DEFAULT_EMBEDDING_MODEL):
        self.options = ScreenOptions(k, default_tier, keys or MetadataKeys(), settings,
                                     embedding_model)
        self.last_screening: Screened | None = None

    @property
    def last_trace(self) -> Trace | None:
        """The last call's trace (``None`` before the first, or when it got nothing)."""
        return None if self.last_screening is None else self.last_screening.screening.trace

    def to_dict(self) -> dict[str, Any]:
        """For ``Pipeline.dumps``: everything but ``settings``, which has no serialised form
        here (load them with ``trishield.load_settings`` in code instead)."""
        options = self.options
        if options.settings is not None:
            raise InputError("a TriShieldRanker with settings cannot be serialised: build it "
                             "in code with trishield.load_settings(...)")
        return default_to_dict(self, k=options.k, default_tier=options.default_tier,
                               keys=asdict(options.keys),
                               embedding_model=options.embedding_model)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TriShieldRanker:
        parameters = dict(data.get("init_parameters", {}))
        if isinstance(parameters.get("keys"), dict):
            keys = parameters["keys"]
            parameters["keys"] = MetadataKeys(
                **{**keys, "sources": tuple(keys.get("sources", MetadataKeys.sources))})
        return default_from_dict(cls, {**data, "init_parameters": parameters})

    @component.output_types(documents=list[Document], removed=list[Document],
                            trace=dict[str, Any])
    def run(self, query: str, documents: list[Document],
            k: int | None = None) -> dict[str, Any]:
        """Screen ``documents`` retrieved for ``query``; ``k`` overrides the context size."""
        options = self.options if k is None else replace(self.options, k=k)
        self.last_screening = None
        if not documents:
            return {"documents": [], "removed": [], "trace": {}}
        found = []
        for position, document in enumerate(documents):
            if not isinstance(document, Document):
                raise InputError(f"document {position}: expected a haystack Document, got "
                                 f"{type(document).__name__}")
            if document.content is None:
                raise InputError(f"document {document.id!r} has no text content")
            found.append(Found(document.id, document.content, document.meta, document.score,
                               _parent(document.meta.get("source_id")), document.embedding))
        by_id = {document.id: document for document in documents}
        self.last_screening = screened = screen_found(query, found, options)
        decided = screened.decisions
        kept = [replace(by_id[p.id], score=p.trust,
                        meta={**by_id[p.id].meta, TRISHIELD_KEY: decided[p.id]})
                for p in screened.screening.kept]
        removed = [replace(by_id[i], meta={**by_id[i].meta, TRISHIELD_KEY: decided[i]})
                   for i in screened.removed]
        return {"documents": kept, "removed": removed,
                "trace": screened.screening.trace.as_dict()}


def _parent(source_id: Any) -> str | None:
    """The parent document's id, if the splitter left one (anything else is not an id)."""
    return source_id if isinstance(source_id, str) and source_id.strip() else None
