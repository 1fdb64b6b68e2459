"""The knowledge base: documents in, chunks indexed, candidates out.

The names below are imported from their modules on first use (PEP 562): importing a light
submodule (``trishield.kb.documents`` for the tiers, ``trishield.kb.read_limits``) then costs
that module alone, not numpy, the indexes and the store, which the CLI's start-up relies on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trishield.lazy import lazy_exports

if TYPE_CHECKING:
    from trishield.kb.chunking import ChunkingConfig, chunk_document
    from trishield.kb.documents import Chunk, Document, Tier, content_hash
    from trishield.kb.indexes.retrieval import BACKENDS, Candidate
    from trishield.kb.ingest_report import IngestInterrupted, IngestProgress, IngestReport
    from trishield.kb.knowledge_base import KBSettings, KnowledgeBase
    from trishield.kb.loaders import LoadedBatch, load_path
    from trishield.kb.read_limits import ReadLimits
    from trishield.kb.screening import Screener, ScreeningVerdict

_HOMES: dict[str, tuple[str, ...]] = {
    "trishield.kb.chunking": ("ChunkingConfig", "chunk_document"),
    "trishield.kb.documents": ("Chunk", "Document", "Tier", "content_hash"),
    "trishield.kb.ingest_report": ("IngestInterrupted", "IngestProgress", "IngestReport"),
    "trishield.kb.knowledge_base": ("KBSettings", "KnowledgeBase"),
    "trishield.kb.loaders": ("LoadedBatch", "load_path"),
    "trishield.kb.read_limits": ("ReadLimits",),
    "trishield.kb.indexes.retrieval": ("BACKENDS", "Candidate"),
    "trishield.kb.screening": ("Screener", "ScreeningVerdict"),
}
__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())

__all__ = [
    "BACKENDS",
    "Candidate",
    "Chunk",
    "ChunkingConfig",
    "Document",
    "IngestInterrupted",
    "IngestProgress",
    "IngestReport",
    "KBSettings",
    "KnowledgeBase",
    "LoadedBatch",
    "ReadLimits",
    "Screener",
    "ScreeningVerdict",
    "Tier",
    "chunk_document",
    "content_hash",
    "load_path",
]
