"""Chunking: word windows, or the document's own sections.

Sizes are counted in whitespace-separated words, because that is what the retrieval
literature (and PoisonedRAG's 100-word passages) measures. A chunk's text is a slice of the
original document, so its character offsets always point at the exact words it holds.

Two strategies (:class:`ChunkingConfig.strategy`):

* ``window``: overlapping windows of ``words`` words, blind to structure;
* ``sections``: the document is read as headed sections of paragraphs (a heading is a short
  line standing alone: a Markdown ``#`` line, an rST or HTML title, a man page's ``OPTIONS``);
  paragraphs of one section are packed into chunks of up to ``words`` words, a chunk never
  crosses a heading, and a paragraph longer than ``words`` is cut into windows. Each chunk
  carries its :attr:`~trishield.kb.documents.Chunk.section` (the document's title and the
  headings above it), which is embedded and indexed with it: an option entry of a man page
  says "-p port Port to connect to on the remote host" and never names ``ssh``, and a
  documentation paragraph leaves its subject to its heading. A document with no structure
  (one paragraph) is cut exactly as ``window`` cuts it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from trishield.errors import InputError
from trishield.kb.documents import Chunk, Document

_WORD = re.compile(r"\S+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_MARKDOWN_HEADING = re.compile(r"#{1,6}[ \t]+(\S.*)")
_UNDERLINE = re.compile(r"([=\-~^\"'`#*+])\1{2,}")
HEADING_MAX_WORDS = 10
"""A standalone line of more words is a paragraph, not a heading."""
Strategy = Literal["window", "sections"]
STRATEGIES: tuple[str, ...] = ("window", "sections")


@dataclass(frozen=True)
class ChunkingConfig:
    """How documents are cut. A KB records this and refuses to mix configurations."""

    words: int = 120
    overlap: int = 20
    strategy: Strategy = "sections"
    """``sections`` for new KBs: on documentation it found more answers in the top 5 than
    windows did, and it cuts a one-paragraph passage exactly as windows do
    (docs/answers.md); a KB built before it records no strategy and is read as ``window``."""

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InputError(f"chunking strategy must be one of {', '.join(STRATEGIES)}, "
                             f"got {self.strategy!r}")
        if self.words < 1:
            raise InputError(f"chunk size must be at least 1 word, got {self.words}")
        if not 0 <= self.overlap < self.words:
            raise InputError(
                f"chunk overlap must be between 0 and chunk size - 1 ({self.words - 1}), "
                f"got {self.overlap}"
            )

    def as_dict(self) -> dict[str, int | str]:
        shown: dict[str, int | str] = {"words": self.words, "overlap": self.overlap}
        if self.strategy != "window":  # the older KBs' record stays as it was
            shown["strategy"] = self.strategy
        return shown


def embedding_text(chunk: Chunk) -> str:
    """What is embedded (and lexically indexed) for ``chunk``: its section, then its text."""
    return f"{chunk.section}\n{chunk.text}" if chunk.section else chunk.text


def chunk_document(document: Document, config: ChunkingConfig) -> list[Chunk]:
    """Cut ``document`` as ``config`` says (see the module docstring)."""
    spans = [match.span() for match in _WORD.finditer(document.text)]
    if not spans:
        return []
    if config.strategy == "sections":
        return _by_sections(document, spans, config)
    return _windows(document, spans, 0, len(spans), config, "", [])


def _windows(document: Document, spans: list[tuple[int, int]], first: int, last: int,
             config: ChunkingConfig, section: str, chunks: list[Chunk]) -> list[Chunk]:
    """Overlapping windows of ``config.words`` over words ``first:last``, appended to
    ``chunks``. The last window ends at the last word; none adds nothing new."""
    step = config.words - config.overlap
    start = first
    while True:
        end = min(start + config.words, last)
        chunks.append(_chunk(document, spans, start, end, len(chunks), section))
        if end == last:
            return chunks
        start += step


def _chunk(document: Document, spans: list[tuple[int, int]], start: int, end: int,
           index: int, section: str) -> Chunk:
    char_start, char_end = spans[start][0], spans[end - 1][1]
    return Chunk(doc_id=document.id, index=index, text=document.text[char_start:char_end],
                 char_start=char_start, char_end=char_end, word_start=start, word_end=end,
                 section=section)


@dataclass(frozen=True)
class _Block:
    """A paragraph of the document: words ``start:end``; ``heading`` when it opens a
    section, ``body`` when it holds more than its heading (a man page's ``OPTIONS`` line
    over its indented text)."""

    start: int
    end: int
    heading: str | None
    body: bool = True
    entry: bool = False
    """A term over its indented description (a man page's ``-p port`` entry, a definition
    list item): a unit of its own, never packed after the entry before it, or a question
    about ``-p`` reads ``-o``'s list of settings too."""


def _is_heading_line(line: str) -> bool:
    return not (len(line.split()) > HEADING_MAX_WORDS
                or line.endswith((".", ",", ";", ":", "!", "?"))
                or not any(ch.isalpha() for ch in line) or bool(_UNDERLINE.fullmatch(line))
                or line.startswith(("-", "*", "+", "[", "(", "$", ">", "%", "|")))


def heading_of(paragraph: str) -> tuple[str | None, bool]:
    """``(heading, has body)`` of a paragraph: a Markdown ``#`` line, a title over an rST
    underline, one short line that does not end like a sentence, or such a line flush left
    over indented lines (a man page's section); ``(None, True)`` for a plain paragraph."""
    raw = [line for line in paragraph.strip("\n").splitlines() if line.strip()]
    lines = [line.strip() for line in raw]
    if len(lines) == 2 and _UNDERLINE.fullmatch(lines[1]):
        lines = lines[:1]
    if not lines:
        return None, True
    found = _MARKDOWN_HEADING.fullmatch(lines[0])
    if found and len(lines) == 1:
        return found.group(1).strip().rstrip("#").strip(), False
    if len(lines) == 1:
        return (lines[0], False) if _is_heading_line(lines[0]) else (None, True)
    indent = [len(line) - len(line.lstrip()) for line in raw]
    if indent[0] < min(indent[1:]) and _is_heading_line(lines[0]):
        return lines[0], True
    return None, True


def _is_entry(paragraph: str) -> bool:
    """A first line less indented than every line after it (a term and its description)."""
    raw = [line for line in paragraph.strip("\n").splitlines() if line.strip()]
    indent = [len(line) - len(line.lstrip()) for line in raw]
    return len(raw) > 1 and indent[0] < min(indent[1:])


def _blocks(text: str, spans: list[tuple[int, int]]) -> list[_Block]:
    """The document's paragraphs in word positions, headings and entries marked."""
    blocks: list[_Block] = []
    word = 0
    start = 0
    for end in [m.start() for m in _PARAGRAPH_BREAK.finditer(text)] + [len(text)]:
        first = word
        while word < len(spans) and spans[word][1] <= end:
            word += 1
        if word > first:
            paragraph = text[start:end]
            heading, body = heading_of(paragraph)
            blocks.append(_Block(first, word, heading, body,
                                 heading is None and _is_entry(paragraph)))
        start = end
    if blocks and not blocks[-1].body:  # a short last line heads nothing: it is text
        blocks[-1] = _Block(blocks[-1].start, blocks[-1].end, None)
    return blocks


def _by_sections(document: Document, spans: list[tuple[int, int]],
                 config: ChunkingConfig) -> list[Chunk]:
    blocks = _blocks(document.text, spans)
    if len(blocks) <= 1:
        return _windows(document, spans, 0, len(spans), config, "", [])
    title = " ".join(document.title.split())
    least = max(1, config.words // 3)
    chunks: list[Chunk] = []
    heading = ""  # the heading in force
    named = ""  # the heading the pending chunk's text starts under
    pending: list[_Block] = []

    def body_words() -> int:
        return sum(b.end - b.start for b in pending if b.body)

    def flush() -> None:
        section = " > ".join(part for part in (title, named) if part)
        if pending:
            first, last = pending[0].start, pending[-1].end
            if last - first > config.words:
                _windows(document, spans, first, last, config, section, chunks)
            else:
                chunks.append(_chunk(document, spans, first, last, len(chunks), section))
        pending.clear()

    for block in blocks:
        size = block.end - (pending[0].start if pending else block.start)
        full = size > config.words and body_words() > 0
        if block.heading is not None or block.entry:
            # a heading or an entry opens a chunk once the pending one says enough; a
            # heading over nothing yet (nested headings) names the section instead
            full = full or body_words() >= least
        if full:
            flush()
        if block.heading is not None:
            heading = block.heading
        if not any(b.body for b in pending):
            named = heading
        pending.append(block)
    flush()
    return chunks
