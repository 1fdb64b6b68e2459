"""The knowledge base: documents in, chunks indexed, candidates out."""

from trishield.kb.chunking import ChunkingConfig, chunk_document
from trishield.kb.documents import Chunk, Document, Tier, content_hash
from trishield.kb.ingest_report import IngestInterrupted, IngestProgress, IngestReport
from trishield.kb.knowledge_base import KBSettings, KnowledgeBase
from trishield.kb.loaders import LoadedBatch, load_path
from trishield.kb.read_limits import ReadLimits
from trishield.kb.retrieval import BACKENDS, Candidate
from trishield.kb.screening import Screener, ScreeningVerdict

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
