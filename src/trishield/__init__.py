"""TriShield: three independent rings of defense around a RAG pipeline.

Ask a guarded knowledge base::

    import trishield

    with trishield.open_kb("my-kb", create=True) as kb:       # Ring 1 screens every ingest
        kb.ingest(trishield.load_path("docs/").documents, tier="trusted", writer="alice")
        answer = trishield.defend(kb, "full").ask("What is the refund window?")
        print(answer.answer, answer.citations, answer.trace.ring3)

Screen passages from your own retriever (Rings 1 and 2, no LLM)::

    screening = trishield.screen(question, [trishield.Passage(id=..., text=..., tier=...)])
    context = [p.passage.text for p in screening.kept]

``trishield.DEFENSES`` lists the defenses (TriShield's settings and the baselines);
``trishield.stages`` holds the protocols to write your own retriever, filter, reranker or
answerer; ``trishield.load_settings`` reads the TOML configuration.

Importing ``trishield`` loads nothing but this file: each name below is imported from its
module on first use (PEP 562), so ``trishield --help`` and the other commands that need no
model start without numpy, torch or the indexes (docs/speed.md, "Start-up").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trishield.lazy import lazy_exports

if TYPE_CHECKING:
    from trishield.api import (
        PathIngest,
        ScreenedPassage,
        Screening,
        defend,
        delete_documents,
        discard_quarantined,
        ingest_path,
        list_documents,
        open_kb,
        release_quarantined,
        screen,
        show_document,
    )
    from trishield.defenses import DEFENSES, build_defense
    from trishield.defenses.retrievers import KBRetriever, Passage, PassageRetriever
    from trishield.errors import TriShieldError
    from trishield.kb import (
        BACKENDS,
        Candidate,
        ChunkingConfig,
        Document,
        KnowledgeBase,
        ReadLimits,
        load_path,
    )
    from trishield.llm.panel import build_panel
    from trishield.pipeline import Answer, Pipeline
    from trishield.settings import Settings, load_settings
    from trishield.trace import Trace

__version__ = "0.1.0"

_HOMES: dict[str, tuple[str, ...]] = {
    "trishield.api": ("PathIngest", "ScreenedPassage", "Screening", "defend",
                      "delete_documents", "discard_quarantined", "ingest_path",
                      "list_documents", "open_kb", "release_quarantined", "screen",
                      "show_document"),
    "trishield.defenses": ("DEFENSES", "build_defense"),
    "trishield.defenses.retrievers": ("KBRetriever", "Passage", "PassageRetriever"),
    "trishield.errors": ("TriShieldError",),
    "trishield.kb": ("BACKENDS", "Candidate", "ChunkingConfig", "Document", "KnowledgeBase",
                     "ReadLimits", "load_path"),
    "trishield.llm.panel": ("build_panel",),
    "trishield.pipeline": ("Answer", "Pipeline"),
    "trishield.settings": ("Settings", "load_settings"),
    "trishield.trace": ("Trace",),
}
__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())

__all__ = [
    "BACKENDS",
    "DEFENSES",
    "Answer",
    "Candidate",
    "ChunkingConfig",
    "Document",
    "KBRetriever",
    "KnowledgeBase",
    "Passage",
    "PassageRetriever",
    "PathIngest",
    "Pipeline",
    "ReadLimits",
    "ScreenedPassage",
    "Screening",
    "Settings",
    "Trace",
    "TriShieldError",
    "__version__",
    "build_defense",
    "build_panel",
    "defend",
    "delete_documents",
    "discard_quarantined",
    "ingest_path",
    "list_documents",
    "load_path",
    "load_settings",
    "open_kb",
    "release_quarantined",
    "screen",
    "show_document",
]
