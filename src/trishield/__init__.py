"""TriShield: three independent rings of defense around a RAG pipeline.

The public API is small on purpose::

    from trishield import KnowledgeBase, load_path

    with KnowledgeBase.open("my-kb", create=True) as kb:
        kb.ingest(load_path("docs/").documents, tier="trusted", writer="alice")
        for candidate in kb.search("refund window", backend="hybrid", k=3):
            print(candidate.doc_id, candidate.score)
"""

from trishield.errors import TriShieldError
from trishield.kb import BACKENDS, Candidate, ChunkingConfig, Document, KnowledgeBase, load_path

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "Candidate",
    "ChunkingConfig",
    "Document",
    "KnowledgeBase",
    "TriShieldError",
    "__version__",
    "load_path",
]
