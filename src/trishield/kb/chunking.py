"""Word-window chunking.

Windows are counted in whitespace-separated words, because that is what the retrieval
literature (and PoisonedRAG's 100-word passages) measures. A chunk's text is a slice of the
original document, so its character offsets always point at the exact words it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trishield.errors import InputError
from trishield.kb.documents import Chunk, Document

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class ChunkingConfig:
    """How documents are cut. A KB records this and refuses to mix configurations."""

    words: int = 120
    overlap: int = 20

    def __post_init__(self) -> None:
        if self.words < 1:
            raise InputError(f"chunk size must be at least 1 word, got {self.words}")
        if not 0 <= self.overlap < self.words:
            raise InputError(
                f"chunk overlap must be between 0 and chunk size - 1 ({self.words - 1}), "
                f"got {self.overlap}"
            )

    def as_dict(self) -> dict[str, int]:
        return {"words": self.words, "overlap": self.overlap}


def chunk_document(document: Document, config: ChunkingConfig) -> list[Chunk]:
    """Cut ``document`` into overlapping windows of ``config.words`` words.

    The last window ends at the last word; no window is emitted that adds nothing new.
    """
    spans = [match.span() for match in _WORD.finditer(document.text)]
    if not spans:
        return []
    step = config.words - config.overlap
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = min(start + config.words, len(spans))
        char_start, char_end = spans[start][0], spans[end - 1][1]
        chunks.append(
            Chunk(
                doc_id=document.id,
                index=len(chunks),
                text=document.text[char_start:char_end],
                char_start=char_start,
                char_end=char_end,
                word_start=start,
                word_end=end,
            )
        )
        if end == len(spans):
            return chunks
        start += step
