"""TriShield as a LlamaIndex node postprocessor (``pip install 'trishield[llamaindex]'``).

LlamaIndex's slot between retrieval and synthesis is the node postprocessor: a query engine
calls ``postprocess_nodes(nodes, query_bundle)`` on what its retriever found. This one runs
Rings 1 and 2 (:func:`trishield.screen`) on those nodes, with the provenance their metadata
records (:mod:`trishield.integrations.metadata`)::

    from trishield.integrations.llamaindex import TriShieldPostprocessor

    engine = index.as_query_engine(similarity_top_k=20,
                                   node_postprocessors=[TriShieldPostprocessor()])

It returns the nodes to answer from, most trusted first, each a copy whose ``score`` is its
trust and whose ``metadata["trishield"]`` holds the rings' decisions (left out of what the
LLM and the embedder see); the nodes Ring 1 blocked are gone. ``last_screening`` keeps the
full result: the trace, the removed ids and, per node, why.
"""

from __future__ import annotations

from typing import Any

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
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("trishield.integrations.llamaindex needs LlamaIndex: "
                      "pip install 'trishield[llamaindex]'") from error


class TriShieldPostprocessor(BaseNodePostprocessor):
    """Rings 1 and 2 over the retrieved nodes (see the module docstring).

    ``k`` (default 5) nodes are kept at most; ``default_tier`` is the tier of a node whose
    metadata names none; ``keys`` renames the metadata keys read; ``settings`` configures the
    rings. Retrieve more than ``k`` (20 is what Ring 1's outlier score needs) so that the
    rings have a pool to choose from.
    """

    k: int | None = Field(default=None, description="nodes to keep (default 5)")
    default_tier: str = Field(default="neutral", description="tier of nodes that name none")
    keys: MetadataKeys = Field(default_factory=MetadataKeys)
    settings: Settings | None = Field(default=None, exclude=True)
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    _options: ScreenOptions = PrivateAttr()
    _last: Screened | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._options = ScreenOptions(self.k, self.default_tier, self.keys, self.settings,
                                      self.embedding_model)

    @classmethod
    def class_name(cls) -> str:
        return "TriShieldPostprocessor"

    @property
    def last_screening(self) -> Screened | None:
        """The last call's screening (``None`` before the first, or when it got no nodes)."""
        return self._last

    @property
    def last_trace(self) -> Trace | None:
        return None if self._last is None else self._last.screening.trace

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("TriShieldPostprocessor needs the query: Ring 1 looks for "
                             "passages that quote it and Ring 2 ranks by relevance to it")
        self._last = None
        if not nodes:
            return []
        by_id = {}
        found = []
        for item in nodes:
            node = item.node
            by_id[node.node_id] = item
            found.append(Found(node.node_id, node.get_content(metadata_mode=MetadataMode.NONE),
                               node.metadata, item.score, node.ref_doc_id, node.embedding))
        self._last = screened = screen_found(query_bundle.query_str, found, self._options)
        kept = []
        for passage in screened.screening.kept:
            node = by_id[passage.id].node
            copy = node.model_copy(update={
                "metadata": {**node.metadata, TRISHIELD_KEY: screened.decisions[passage.id]},
                "excluded_llm_metadata_keys": _with(node.excluded_llm_metadata_keys),
                "excluded_embed_metadata_keys": _with(node.excluded_embed_metadata_keys)})
            kept.append(NodeWithScore(node=copy, score=passage.trust))
        return kept


def _with(excluded: list[str]) -> list[str]:
    """``excluded`` plus TriShield's entry: the LLM and the embedder never see the decisions."""
    return list(dict.fromkeys([*excluded, TRISHIELD_KEY]))
