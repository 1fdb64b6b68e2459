"""Plain text out of PDF, HTML, DOCX and reStructuredText files, through kept parsers.

Each reader returns :class:`Extract` records (one per PDF page, one for the other formats) so
that :mod:`trishield.kb.loaders` can build documents whose origin names the file and, for a
PDF, the page: a citation must be able to send a reader back to the page it came from.

The parsers are third-party code run on untrusted files, so any exception they raise is
turned into an :class:`InputError` naming the file; nothing else escapes. Readers never fetch
or include anything outside the file (rST ``include``/``raw`` are disabled, HTML is parsed,
never rendered).
"""

from __future__ import annotations

import io
import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trishield.errors import InputError

if TYPE_CHECKING:
    from pypdf import PdfReader

_EXTRACT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_ENCRYPTED = "the PDF is encrypted and needs a password; save a decrypted copy to ingest it"
_SPACES = re.compile(r"\s+")
_HTML_BLOCKS = ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "dl", "dt",
                "dd", "table", "tr", "td", "th", "section", "article", "header", "footer",
                "main", "aside", "blockquote", "pre", "figure", "figcaption", "hr", "address")
_CSS_HIDDEN = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_HTML_DROPPED = ("script", "style", "nav", "noscript", "template", "svg", "iframe", "head")


@dataclass(frozen=True)
class Extract:
    """Text of a file (or of one PDF page) and the title the file itself gives, if any."""

    text: str
    title: str = ""
    page: int | None = None


def _clean(text: str) -> str:
    """Extractors emit form feeds and stray C0 controls (PDF fonts, Word fields); they are
    layout, not content, and the document validator refuses them, so they become spaces.
    Runs of blank lines collapse to one so chunks are not padded with layout."""
    text = text.replace("\x0c", "\n").replace("\r\n", "\n").replace("\r", "\n")
    text = _EXTRACT_CONTROL.sub(" ", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()


def _parser_failed(kind: str, path: Path, error: Exception) -> InputError:
    detail = str(error).strip() or type(error).__name__
    return InputError(f"cannot read this {kind} file ({type(error).__name__}: {detail}); "
                      "it is corrupt or not really a " + kind, path=str(path))


@contextmanager
def _pypdf_quiet() -> Iterator[None]:
    """pypdf logs repair warnings ("EOF marker not found") without the file's name; our own
    error names it, so its warnings are held back while one file is read."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def read_pdf(path: Path) -> list[Extract]:
    """One :class:`Extract` per page with text; pages without text (scans) are left out.

    An encrypted PDF is opened with the empty user password (many PDFs are encrypted only
    to restrict printing); one that needs a real password is refused, naming the file.
    """
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    try:
        with _pypdf_quiet():
            reader = PdfReader(io.BytesIO(path.read_bytes()))
            extracts = _pdf_pages(reader, path)
    except InputError:
        raise
    except FileNotDecryptedError:
        raise InputError(_ENCRYPTED, path=str(path)) from None
    except Exception as error:  # third-party parser on an untrusted file: see the docstring
        raise _parser_failed("PDF", path, error) from None
    if not extracts:
        raise InputError("the PDF has no extractable text (a scan? OCR is not supported)",
                         path=str(path))
    return extracts


def _pdf_pages(reader: PdfReader, path: Path) -> list[Extract]:
    if reader.is_encrypted and not reader.decrypt(""):
        raise InputError(_ENCRYPTED, path=str(path))
    title = ""
    metadata = reader.metadata
    if metadata is not None and isinstance(metadata.title, str):
        title = metadata.title.strip()
    extracts = []
    for number, page in enumerate(reader.pages, start=1):
        text = _clean(page.extract_text() or "")
        if text:
            extracts.append(Extract(text=text, title=title, page=number))
    return extracts


def read_html(path: Path) -> Extract:
    """Visible text of an HTML page: scripts, styles, navigation and hidden elements (the
    ``hidden`` attribute, inline ``display: none`` / ``visibility: hidden``) are dropped: they
    are not what a reader of the page sees, nav repeats on every page, and text hidden from
    the person who reviews a page is a classic way to slip instructions into a KB.
    Whitespace is read as a browser does (runs collapse; ``<pre>`` keeps its line breaks,
    not its indentation) and block elements become paragraphs. The title is the
    ``<title>``, else the first ``<h1>``."""
    from bs4 import BeautifulSoup, NavigableString, XMLParsedAsHTMLWarning

    try:
        with warnings.catch_warnings():
            # XHTML pages (libxslt's and Debian Policy's docs) are read as the HTML they are
            # served as; bs4's advice to parse them as XML would keep their markup's text.
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            soup = BeautifulSoup(path.read_bytes(), "lxml")
        title_tag = soup.find("title")
        title = title_tag.get_text(" ", strip=True) if title_tag else ""
        for element in soup.find_all(_HTML_DROPPED):
            element.decompose()
        for element in soup.find_all(attrs={"hidden": True}):
            element.decompose()
        for element in soup.find_all(style=_CSS_HIDDEN):
            element.decompose()
        if not title:
            heading = soup.find("h1")
            title = heading.get_text(" ", strip=True) if heading else ""
        for string in list(soup.find_all(string=True)):
            # Exactly NavigableString: comments and CDATA are subclasses and stay hidden.
            if type(string) is NavigableString and string.find_parent("pre") is None:
                string.replace_with(_SPACES.sub(" ", str(string)))
        for element in soup.find_all("br"):
            element.replace_with("\n")
        for element in soup.find_all(_HTML_BLOCKS):
            element.insert_before("\n\n")
            element.insert_after("\n\n")
        text = soup.get_text("")
    except Exception as error:  # third-party parser on an untrusted file
        raise _parser_failed("HTML", path, error) from None
    lines = (line.strip(" ") for line in text.split("\n"))
    return Extract(text=_clean("\n".join(lines)), title=" ".join(title.split()))


def read_docx(path: Path) -> Extract:
    """Paragraphs and table cells of a Word document, in body order; the title is the core
    properties' title, else the first paragraph styled ``Title`` or ``Heading 1``."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(path.read_bytes()))
        title = (document.core_properties.title or "").strip()
        blocks: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                blocks.append(block.text)
                style = block.style.name if block.style is not None else ""
                if not title and style in ("Title", "Heading 1") and block.text.strip():
                    title = block.text.strip()
            elif isinstance(block, Table):
                for row in block.rows:
                    blocks.append(" | ".join(cell.text.strip() for cell in row.cells))
    except Exception as error:  # third-party parser on an untrusted file
        raise _parser_failed("DOCX", path, error) from None
    return Extract(text=_clean("\n\n".join(blocks)), title=title)


def read_rst(text: str, path: Path) -> Extract:
    """reStructuredText rendered to plain text by docutils. ``include`` and ``raw`` are
    disabled (a document must not pull in other files), and docutils' own error messages
    are dropped rather than ingested as if they were the author's text."""
    from docutils import nodes
    from docutils.core import publish_doctree

    settings = {
        "file_insertion_enabled": False,
        "raw_enabled": False,
        "report_level": 5,
        "halt_level": 5,
        "warning_stream": io.StringIO(),
        "input_encoding": "unicode",
    }
    try:
        tree = publish_doctree(text, source_path=str(path), settings_overrides=settings)
        for kind in (nodes.system_message, nodes.comment, nodes.substitution_definition):
            for node in list(tree.findall(kind)):
                node.parent.remove(node)
        title_nodes = [node for node in tree.children if isinstance(node, nodes.title)]
        title = title_nodes[0].astext().strip() if title_nodes else ""
        body = tree.astext()
    except Exception as error:  # third-party parser on an untrusted file
        raise _parser_failed("reStructuredText", path, error) from None
    return Extract(text=_clean(body), title=title)
