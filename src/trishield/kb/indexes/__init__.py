"""What searches a KB's chunks, all derived from the store and rebuilt from it when damaged.

``dense`` (the FAISS dense index: flat, HNSW or IVF-PQ; ``half_scan``: its half-precision
copy that an exact scan reads first; ``lazy_faiss``: FAISS imported on first use),
``lexical`` (BM25 over the store's FTS5 table), ``backend`` (the seam an engine implements:
follow the chunk change log), ``snapshots`` (the dense index in memory, its snapshot files
and when one is saved), ``engines/`` (Milvus instead of the embedded indexes) with
``engine_link`` (how a KB handle follows and searches it), and ``retrieval`` (the registry
of ranking functions over the two searchers, and :class:`Candidate`). The indexes read the
store; the store never imports them.

Nothing is imported here: ``trishield.kb.indexes.retrieval`` is read by the CLI's start-up.
"""
