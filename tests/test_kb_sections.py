"""``sections`` chunking through a real KB: a chunk's section is stored, embedded and indexed
with it, and the KB remembers the strategy it was built with."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_chunking import MAN_PAGE

from trishield.errors import KnowledgeBaseError
from trishield.kb import KnowledgeBase
from trishield.kb.chunking import ChunkingConfig
from trishield.kb.documents import Document


def test_a_section_is_searchable_with_its_chunk(tmp_path: Path) -> None:
    sections = ChunkingConfig(strategy="sections")
    with KnowledgeBase.open(tmp_path / "kb", create=True, chunking=sections) as kb:
        kb.ingest([Document(id="man/ssh", text=MAN_PAGE, title="ssh"),
                   Document(id="notes", text="The port of the office printer is 9100.")],
                  tier="trusted", writer="docs")
        # "ssh" is in no chunk's text but the title's: the section carries it
        found = kb.search("ssh", backend="bm25", k=20)
        assert any(c.chunk.text.startswith("-p port") for c in found)
        assert all(c.doc_id == "man/ssh" for c in found)
        rows = kb.store.connection.execute(
            "SELECT section FROM chunks ORDER BY pk").fetchall()
        assert ("ssh > DESCRIPTION",) in rows and ("",) in rows  # a one-paragraph note
    with KnowledgeBase.open(tmp_path / "kb") as reopened:
        assert reopened.settings.chunking == sections
    with pytest.raises(KnowledgeBaseError, match="chunking"):
        KnowledgeBase.open(tmp_path / "kb", chunking=ChunkingConfig(strategy="window")).close()


def test_identifiers_and_options_are_found_by_exact_match(tmp_path: Path) -> None:
    texts = {
        "expat": "XML_ParserCreate constructs a new parser. XML_ParserFree frees it.",
        "expat-features": "XML_GetFeatureList returns the parser features; the parser "
                          "library reports XML_Parser versions.",
        "ssh": "-p port Port to connect to on the remote host.",
        "ssh-upper": "-P tag Specify a tag name to select a configuration; the port is not it.",
        "cmake": "POSITION_INDEPENDENT_CODE Whether to create a position-independent target.",
    }
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.ingest([Document(id=i, text=t) for i, t in texts.items()], tier="trusted",
                  writer="docs")
        assert kb.search("What does XML_ParserCreate do?", backend="bm25", k=1)[0].doc_id \
            == "expat"
        # -p and -P are different options; only the chunk holding -p shares its term
        assert kb.search("what is -p for", backend="bm25", k=1)[0].doc_id == "ssh"
        assert kb.search("what is -P for", backend="bm25", k=1)[0].doc_id == "ssh-upper"
        assert kb.search("POSITION_INDEPENDENT_CODE", backend="bm25", k=1)[0].doc_id == "cmake"
        # camel-case names give their words: "creates a parser" reaches XML_ParserCreate
        assert kb.search("which function creates a parser", backend="bm25",
                         k=1)[0].doc_id == "expat"
