"""TriShield inside the RAG stack you already have: LlamaIndex, LangChain and Haystack.

Each module plugs Rings 1 and 2 into its library's slot for "look at what the retriever
found before the LLM sees it", on the passages *your* retriever returns, with the provenance
your metadata records:

* :mod:`trishield.integrations.llamaindex`: ``TriShieldPostprocessor``, a node postprocessor
  (``pip install 'trishield[llamaindex]'``);
* :mod:`trishield.integrations.langchain`: ``TriShieldCompressor``, a document compressor,
  ``TriShieldRetriever``, a retriever that screens another, and ``TriShieldRunnable``, a
  Runnable that answers with all three rings (``pip install 'trishield[langchain]'``);
* :mod:`trishield.integrations.haystack`: ``TriShieldRanker``, a pipeline component
  (``pip install 'trishield[haystack]'``).

This package imports none of those libraries: ``import trishield`` never needs them, and
importing one module without its library raises an ``ImportError`` naming the extra. How
metadata becomes provenance is the same everywhere (:mod:`trishield.integrations.metadata`).
"""
