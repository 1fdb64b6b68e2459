"""Plain text out of PDF, HTML, DOCX and reStructuredText files, through kept parsers.

Each reader returns :class:`Extract` records (one per PDF page, one for the other formats) so
that :mod:`trishield.kb.loaders` can build documents whose origin names the file and, for a
PDF, the page: a citation must be able to send a reader back to the page it came from.

Readers take the file's bytes (read by the caller, which checks the file is a regular one
under the size limit) and its name for messages, and honour
:class:`~trishield.kb.read_limits.ReadLimits`: a DOCX's unpacked size, a PDF's page count
(its page tree walked before pypdf flattens it), an HTML page's nesting depth, and the text
any file gives. Time and memory are bounded around them, by the parser process that runs
them (:mod:`trishield.kb.parse_process`). They import nothing of TriShield but
:mod:`trishield.errors` and :mod:`trishield.kb.read_limits`, so that process starts light.

The parsers are third-party code run on untrusted files, so any exception they raise is
turned into an :class:`InputError` naming the file; nothing else escapes (a MemoryError is
left to the parser process, which reports it with its limit). Readers never fetch or include
anything outside the file (rST ``include``/``raw`` are disabled, HTML is parsed, never
rendered).
"""

from __future__ import annotations

import io
import logging
import re
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trishield.errors import InputError
from trishield.kb.read_limits import OPTION_OF, ReadLimits, format_bytes

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
_MAX_ZIP_MEMBERS = 10_000


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


def _parser_failed(kind: str, name: str, error: Exception) -> InputError:
    if isinstance(error, MemoryError):
        raise error  # the parser process reports it with its limit
    detail = str(error).strip() or type(error).__name__
    if isinstance(error, RecursionError):
        detail = "nested too deeply for the parser"
    return InputError(f"cannot read this {kind} file ({type(error).__name__}: {detail}); "
                      "it is corrupt or not really a " + kind, path=name)


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


def read_pdf(data: bytes, name: str, limits: ReadLimits) -> list[Extract]:
    """One :class:`Extract` per page with text; pages without text (scans) are left out.

    An encrypted PDF is opened with the empty user password (many PDFs are encrypted only
    to restrict printing); one that needs a real password is refused, naming the file. The
    page tree is walked (and bounded) before pypdf flattens it: see :func:`_check_page_tree`.
    """
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    try:
        with _pypdf_quiet():
            reader = PdfReader(io.BytesIO(data))
            extracts = _pdf_pages(reader, name, limits)
    except InputError:
        raise
    except FileNotDecryptedError:
        raise InputError(_ENCRYPTED, path=name) from None
    except Exception as error:  # third-party parser on an untrusted file: see the docstring
        raise _parser_failed("PDF", name, error) from None
    if not extracts:
        raise InputError("the PDF has no extractable text (a scan? OCR is not supported)",
                         path=name)
    return extracts


def _pdf_pages(reader: PdfReader, name: str, limits: ReadLimits) -> list[Extract]:
    if reader.is_encrypted and not reader.decrypt(""):
        raise InputError(_ENCRYPTED, path=name)
    _check_page_tree(reader, name, limits.max_pages)
    title = ""
    metadata = reader.metadata
    if metadata is not None and isinstance(metadata.title, str):
        title = metadata.title.strip()
    extracts = []
    budget = _TextBudget(name, limits.max_expanded_bytes)
    for number, page in enumerate(reader.pages, start=1):
        text = _clean(budget.take(page.extract_text() or ""))
        if text:
            extracts.append(Extract(text=text, title=title, page=number))
    return extracts


def _check_page_tree(reader: PdfReader, name: str, max_pages: int | None) -> None:
    """Walk the page tree counting its pages, before pypdf flattens it.

    pypdf follows ``/Kids`` as written: a node listed twice is read twice (a 915-byte file
    whose ten levels each list one node twice gives 1,024 pages), and a tree claiming tens of
    thousands of pages is flattened whole before a page is read. A page tree is a tree, so
    a node reached twice (also a loop) refuses the file, and so do more than ``max_pages``
    pages. The walk is iterative and visits each node once: its cost is the file's size.
    """
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject

    root = reader.trailer["/Root"]
    pending = [root.raw_get("/Pages") if "/Pages" in root else None]
    seen: set[tuple[int, int]] = set()

    def resolve(item: object) -> object:
        """An indirect object, met once only (a node or a /Kids array reached twice is
        how a 1 KB tree stands for 65,536 pages, and how it loops)."""
        if not isinstance(item, IndirectObject):
            return item
        key = (item.idnum, item.generation)
        if key in seen:
            raise InputError(f"the PDF's page tree reaches object {item.idnum} more than "
                             "once (a page tree must be a tree; this one repeats pages or "
                             "loops)", path=name)
        seen.add(key)
        return item.get_object()

    pages = 0
    while pending:
        node = resolve(pending.pop())
        if not isinstance(node, DictionaryObject):
            continue
        kids = resolve(node.get("/Kids"))
        if isinstance(kids, ArrayObject):
            pending.extend(kids)
            continue
        pages += 1
        if max_pages is not None and pages > max_pages:
            raise InputError(f"the PDF has more than {max_pages:,} pages, the limit per file; "
                             f"raise it ({OPTION_OF['max_pages']}) or split the file",
                             path=name)


class _TextBudget:
    """Counts the text a reader extracts against ``max_expanded_bytes`` (in characters):
    a small file must not turn into gigabytes of text."""

    def __init__(self, name: str, limit: int | None):
        self.name = name
        self.limit = limit
        self.used = 0

    def take(self, text: str) -> str:
        self.used += len(text)
        if self.limit is not None and self.used > self.limit:
            raise InputError(f"its text runs past {format_bytes(self.limit)}, the limit on "
                             f"what one file expands to; raise it "
                             f"({OPTION_OF['max_expanded_bytes']}) or split the file",
                             path=self.name)
        return text


def strip_doctype_subset(data: bytes, name: str) -> bytes:
    """``<!DOCTYPE html [ <!ENTITY ...> ]>`` -> ``<!DOCTYPE html>``.

    HTML has no internal subset; the HTML parser ends the doctype at the first ``>`` and
    leaves the rest (``]>`` and whatever the subset declared) in the page's text. Only a
    doctype near the top is looked at (where one may be), with plain searches: linear in
    the file, whatever it holds."""
    head = data[:4096].lower()
    start = head.find(b"<!doctype")
    if start < 0:
        return data
    stop = head.find(b">", start)
    bracket = head.find(b"[", start)
    if bracket < 0 or 0 <= stop < bracket:
        return data
    close = data.find(b"]", bracket)
    while close >= 0:
        after = close + 1
        while after < len(data) and data[after:after + 1].isspace():
            after += 1
        if data[after:after + 1] == b">":
            return data[:bracket].rstrip() + b">" + data[after + 1:]
        close = data.find(b"]", close + 1)
    raise InputError("the page's <!DOCTYPE opens an internal subset ('[') that never ends",
                     path=name)


def read_html(data: bytes, name: str, limits: ReadLimits) -> Extract:
    """Visible text of an HTML page: scripts, styles, navigation and hidden elements (the
    ``hidden`` attribute, inline ``display: none`` / ``visibility: hidden``) are dropped: they
    are not what a reader of the page sees, nav repeats on every page, and text hidden from
    the person who reviews a page is a classic way to slip instructions into a KB.
    Whitespace is read as a browser does (runs collapse; ``<pre>`` keeps its line breaks,
    not its indentation) and block elements become paragraphs. The title is the
    ``<title>``, else the first ``<h1>``. Elements nested deeper than ``max_depth`` refuse
    the page. The page is read in one walk of its tree (editing the tree instead costs
    time in the square of its size: a 1 MB page of paragraphs took minutes)."""
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

    data = strip_doctype_subset(data, name)
    try:
        with warnings.catch_warnings():
            # XHTML pages (libxslt's and Debian Policy's docs) are read as the HTML they are
            # served as; bs4's advice to parse them as XML would keep their markup's text.
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            soup = BeautifulSoup(data, "lxml")
        title_tag = soup.find("title")
        title = title_tag.get_text(" ", strip=True) if title_tag else ""
        text, heading = _visible_text(soup, name, limits)
    except InputError:
        raise
    except Exception as error:  # third-party parser on an untrusted file
        raise _parser_failed("HTML", name, error) from None
    lines = (line.strip(" ") for line in text.split("\n"))
    return Extract(text=_clean("\n".join(lines)), title=" ".join((title or heading).split()))


def _visible_text(soup: object, name: str, limits: ReadLimits) -> tuple[str, str]:
    """The page's visible text and its first visible ``<h1>``'s text, in one iterative walk
    (no recursion, so no depth breaks it; the depth is counted and bounded)."""
    from bs4 import CData, NavigableString, Tag

    pieces: list[str] = []
    heading: list[str] | None = None
    budget = _TextBudget(name, limits.max_expanded_bytes)
    # (node, depth, inside <pre>, inside the first <h1>) or a string to emit on the way out
    pending: list[tuple[object, int, bool, bool] | str] = [(soup, 0, False, False)]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            pieces.append(item)
            continue
        node, depth, in_pre, in_h1 = item
        if isinstance(node, NavigableString):
            if type(node) is NavigableString:
                value = str(node) if in_pre else _SPACES.sub(" ", str(node))
            elif type(node) is CData:
                value = str(node)
            else:
                continue  # comments, doctypes, processing instructions: not page text
            pieces.append(budget.take(value))
            if in_h1 and heading is not None:
                heading.append(str(node))
            continue
        if not isinstance(node, Tag):
            continue
        if limits.max_depth is not None and depth > limits.max_depth:
            raise InputError(f"the page nests elements more than {limits.max_depth} deep, the "
                             f"limit; raise it ({OPTION_OF['max_depth']}) if the page is "
                             "genuine", path=name)
        if node.name in _HTML_DROPPED or node.has_attr("hidden") or (
                isinstance(node.get("style"), str) and _CSS_HIDDEN.search(node["style"])):
            continue
        if node.name == "br":
            pieces.append("\n")
            continue
        block = node.name in _HTML_BLOCKS
        first_h1 = node.name == "h1" and heading is None
        if first_h1:
            heading = []
        if block:
            pieces.append("\n\n")
            pending.append("\n\n")
        in_pre = in_pre or node.name == "pre"
        pending.extend((child, depth + 1, in_pre, in_h1 or first_h1)
                       for child in reversed(node.contents))
    return "".join(pieces), " ".join(" ".join(heading or []).split())


def read_docx(data: bytes, name: str, limits: ReadLimits) -> Extract:
    """Paragraphs and table cells of a Word document, in body order; the title is the core
    properties' title, else the first paragraph styled ``Title`` or ``Heading 1``. The zip's
    members are checked first: what they unpack to must fit ``max_expanded_bytes`` (a
    2.9 MB file can hold an 800 MB ``document.xml``)."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    _check_zip(data, name, limits.max_expanded_bytes)
    try:
        document = docx.Document(io.BytesIO(data))
        title = (document.core_properties.title or "").strip()
        blocks: list[str] = []
        budget = _TextBudget(name, limits.max_expanded_bytes)
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                blocks.append(budget.take(block.text))
                style = block.style.name if block.style is not None else ""
                if not title and style in ("Title", "Heading 1") and block.text.strip():
                    title = block.text.strip()
            elif isinstance(block, Table):
                for row in block.rows:
                    blocks.append(budget.take(" | ".join(cell.text.strip()
                                                         for cell in row.cells)))
    except InputError:
        raise
    except Exception as error:  # third-party parser on an untrusted file
        raise _parser_failed("DOCX", name, error) from None
    return Extract(text=_clean("\n\n".join(blocks)), title=title)


def _check_zip(data: bytes, name: str, max_expanded: int | None) -> None:
    """Refuse a zip whose members unpack past ``max_expanded`` bytes. The sizes are the
    ones the zip's directory declares: Python's zip reader stops every member at its
    declared size (and fails its checksum past it), so they bound what python-docx reads."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except Exception as error:  # a zip directory from an untrusted file
        raise _parser_failed("DOCX", name, error) from None
    if len(members) > _MAX_ZIP_MEMBERS:
        raise InputError(f"the DOCX holds {len(members):,} parts (more than "
                         f"{_MAX_ZIP_MEMBERS:,}); it is not a document", path=name)
    total = sum(member.file_size for member in members)
    if max_expanded is not None and total > max_expanded:
        largest = max(members, key=lambda member: member.file_size)
        raise InputError(f"the DOCX unpacks to {format_bytes(total)} ({largest.filename} "
                         f"alone is {format_bytes(largest.file_size)}), over the "
                         f"{format_bytes(max_expanded)} limit on what one file expands to; "
                         f"raise it ({OPTION_OF['max_expanded_bytes']}) if it is genuine",
                         path=name)


def read_rst(text: str, name: str, limits: ReadLimits) -> Extract:
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
        tree = publish_doctree(text, source_path=name, settings_overrides=settings)
        dropped = [node for kind in (nodes.system_message, nodes.comment,
                                     nodes.substitution_definition)
                   for node in tree.findall(kind)]
        # one pass per parent (removing nodes one by one is quadratic in their number)
        by_parent: dict[int, tuple[nodes.Element, set[int]]] = {}
        for node in dropped:
            by_parent.setdefault(id(node.parent), (node.parent, set()))[1].add(id(node))
        for parent, gone in by_parent.values():
            parent.children = [child for child in parent.children if id(child) not in gone]
        title_nodes = [node for node in tree.children if isinstance(node, nodes.title)]
        title = title_nodes[0].astext().strip() if title_nodes else ""
        body = _TextBudget(name, limits.max_expanded_bytes).take(tree.astext())
    except InputError:
        raise
    except Exception as error:  # third-party parser on an untrusted file
        raise _parser_failed("reStructuredText", name, error) from None
    return Extract(text=_clean(body), title=title)
