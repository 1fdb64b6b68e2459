"""TriShield in LangChain (``pip install 'trishield[langchain]'``).

Three ways in, by how much of the chain TriShield should run:

* :class:`TriShieldCompressor`, a document compressor: Rings 1 and 2 on the documents a
  retriever returned. It fits LangChain's ``ContextualCompressionRetriever`` (package
  ``langchain``) as ``base_compressor``, or call ``compress_documents(docs, query)``.
* :class:`TriShieldRetriever`, a retriever that screens another: the same, needing only
  ``langchain-core``, usable wherever a retriever is (``retriever.invoke(question)``, LCEL)::

      from trishield.integrations.langchain import TriShieldRetriever

      safe = TriShieldRetriever(retriever=vectorstore.as_retriever(search_kwargs={"k": 20}))
      docs = safe.invoke("When did the tower open?")

* :class:`TriShieldRunnable`, a Runnable from a question to an answer: a whole TriShield
  defense (``full``: Rings 1, 2 and 3's cross-model consensus) over your retriever.

Provenance comes from each document's metadata (:mod:`trishield.integrations.metadata`:
``tier``, ``writer``, ``doc_id``, ``title``, ``ingested_at``, else ``source``). A LangChain
document carries no score: ``metadata["score"]`` is read when your retriever puts one there,
else TriShield scores relevance itself (the question's cosine similarity with each document,
with the model the rings embed with). Returned documents are
copies, most trusted first, with ``metadata["trishield"]`` holding the rings' decisions;
those Ring 1 blocked are gone. ``last_screening`` keeps the full result (trace included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trishield.api import defend
from trishield.errors import InputError
from trishield.integrations.metadata import (
    TRISHIELD_KEY,
    Found,
    MetadataKeys,
    Screened,
    ScreenOptions,
    screen_found,
)
from trishield.integrations.source import FoundRetriever
from trishield.llm.base import Reader
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL
from trishield.settings import Settings
from trishield.trace import Trace

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import Runnable, RunnableConfig
    from pydantic import ConfigDict, Field, PrivateAttr
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("trishield.integrations.langchain needs LangChain: "
                      "pip install 'trishield[langchain]'") from error


def found_documents(documents: Sequence[Document]) -> list[Found]:
    """LangChain documents as found passages; one without an ``id`` is named by its place
    in the list (``document-3``), which is how its decisions are found again."""
    found = []
    for position, document in enumerate(documents):
        if not isinstance(document, Document):
            raise InputError(f"document {position}: expected a langchain Document, got "
                             f"{type(document).__name__}")
        found.append(Found(document.id or f"document-{position}", document.page_content,
                           document.metadata))
    return found


class TriShieldCompressor(BaseDocumentCompressor):
    """Rings 1 and 2 over retrieved documents (see the module docstring).

    ``k`` (default 5) documents are kept at most; ``default_tier`` is the tier of a document
    whose metadata names none; ``keys`` renames the metadata keys read; ``settings``
    configures the rings. Retrieve 20 or so, so that the rings have a pool to choose from.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    k: int | None = None
    default_tier: str = "neutral"
    keys: MetadataKeys = Field(default_factory=MetadataKeys)
    settings: Settings | None = None
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    _options: ScreenOptions = PrivateAttr()
    _last: Screened | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._options = ScreenOptions(self.k, self.default_tier, self.keys, self.settings,
                                      self.embedding_model)

    @property
    def last_screening(self) -> Screened | None:
        """The last call's screening (``None`` before the first, or when it got nothing)."""
        return self._last

    @property
    def last_trace(self) -> Trace | None:
        return None if self._last is None else self._last.screening.trace

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        self._last = None
        if not documents:
            return []
        found = found_documents(documents)
        by_id = dict(zip((f.id for f in found), documents, strict=True))
        self._last = screened = screen_found(query, found, self._options)
        return [Document(page_content=by_id[p.id].page_content, id=by_id[p.id].id,
                         metadata={**by_id[p.id].metadata,
                                   TRISHIELD_KEY: screened.decisions[p.id]})
                for p in screened.screening.kept]


class TriShieldRetriever(BaseRetriever):
    """``retriever``'s documents, screened by ``compressor`` (what LangChain's
    ``ContextualCompressionRetriever`` does, without needing the ``langchain`` package)."""

    retriever: BaseRetriever
    compressor: TriShieldCompressor = Field(default_factory=TriShieldCompressor)

    @property
    def last_screening(self) -> Screened | None:
        return self.compressor.last_screening

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        documents = self.retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        return list(self.compressor.compress_documents(documents, query,
                                                       callbacks=run_manager.get_child()))


class TriShieldRunnable(Runnable[str | Mapping[str, Any], dict[str, Any]]):
    """A question (a string, or a mapping with ``"question"``) -> TriShield's answer over
    ``retriever``'s documents: ``{"answer", "refused", "reason", "citations", "trace"}``.

    ``defense`` is a TriShield defense (``full``: Rings 1, 2 and 3; ``ring12``: one reader
    after Rings 1 and 2; see ``trishield.DEFENSES``); ``panel`` its readers (default: the
    configured panel of three local models). ``citations`` are document ids (metadata
    ``doc_id``, else ``source``, else the document's own id); the trace names passages
    ``doc_id#n``. One question at a time per instance (the retriever keeps the last result).
    """

    def __init__(self, retriever: BaseRetriever, *, defense: str = "full",
                 panel: Sequence[Reader] | None = None, settings: Settings | None = None,
                 default_tier: str = "neutral", keys: MetadataKeys | None = None,
                 embedding_model: str = DEFAULT_EMBEDDING_MODEL):
        if not isinstance(retriever, BaseRetriever):
            raise InputError(f"retriever must be a langchain BaseRetriever, got "
                             f"{type(retriever).__name__}")
        # checks the options before anything is built (the retriever below takes them as-is)
        ScreenOptions(None, default_tier, keys or MetadataKeys(), settings, embedding_model)
        self.retriever = retriever
        self.source = FoundRetriever(lambda query: found_documents(retriever.invoke(query)),
                                     keys=keys, default_tier=default_tier,
                                     embedding_model=embedding_model)
        self.pipeline = defend(self.source, defense, panel=panel, settings=settings)

    def invoke(self, input: str | Mapping[str, Any], config: RunnableConfig | None = None,
               **kwargs: Any) -> dict[str, Any]:
        return self._call_with_config(self._answer, input, config)

    def _answer(self, input: str | Mapping[str, Any]) -> dict[str, Any]:
        question = input.get("question") if isinstance(input, Mapping) else input
        if not isinstance(question, str) or not question.strip():
            raise InputError("TriShieldRunnable takes a question: a non-empty string or a "
                             "mapping with a 'question'")
        answer = self.pipeline.ask(question)
        return {"answer": answer.answer, "refused": answer.refused, "reason": answer.reason,
                "citations": answer.citations, "trace": answer.trace}
