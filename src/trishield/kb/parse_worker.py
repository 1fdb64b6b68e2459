"""One document file's bytes to text and metadata, in this process or in the parser process.

:func:`parse_document` is the whole of reading a file once its bytes are in hand: decoding
and front matter for text files, docutils, BeautifulSoup, python-docx and pypdf for the
others, each under :class:`~trishield.kb.read_limits.ReadLimits`. Plain text and Markdown
are parsed in the caller's process (decoding and a capped YAML header cost no more than the
bytes); reStructuredText, HTML, DOCX and PDF go through third-party parsers whose time and
memory no check of ours can bound from the inside, so :mod:`trishield.kb.parse_process` runs
them here, in a child process started with :func:`serve`, under an address-space limit
(``RLIMIT_AS``) and a wall-time limit the parent enforces by killing it.

The parser process imports this module, :mod:`trishield.kb.file_formats`,
:mod:`trishield.kb.front_matter`, :mod:`trishield.kb.read_limits` and
:mod:`trishield.errors` *without* the packages' ``__init__`` (which load the whole library,
numpy included: 0.7 s and 540 MB of address space before a file is read). So these modules
import nothing else of TriShield.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from trishield.errors import InputError
from trishield.kb.file_formats import Extract, read_docx, read_html, read_pdf, read_rst
from trishield.kb.front_matter import MetadataValue, split_front_matter
from trishield.kb.read_limits import OPTION_OF, ReadLimits, format_bytes

KIND_OF_SUFFIX = {".txt": "text", ".md": "text", ".rst": "rst", ".html": "html",
                  ".htm": "html", ".pdf": "pdf", ".docx": "docx"}
"""The reader of each supported suffix (lower-cased)."""

IN_PROCESS = frozenset({"text"})
"""Kinds read in the caller's process; every other kind is read by the parser process."""

_HEADING = re.compile(r"#+[ \t]+(\S.*)")


@dataclass(frozen=True)
class Parsed:
    """What a file holds: its extracts (one per PDF page with text, else one) and the front
    matter metadata shared by every document made from it."""

    extracts: list[Extract]
    metadata: dict[str, MetadataValue] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"extracts": [{"text": e.text, "title": e.title, "page": e.page}
                             for e in self.extracts], "metadata": self.metadata}

    @classmethod
    def from_json(cls, payload: dict) -> Parsed:
        return cls([Extract(e["text"], e["title"], e["page"]) for e in payload["extracts"]],
                   payload["metadata"])


def decode_utf8(raw: bytes, *, path: str, line: int | None = None) -> str:
    """UTF-8 text without its byte order mark; :class:`InputError` naming the first bad byte."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise InputError(
            f"not valid UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start})",
            path=path,
            line=line,
        ) from None


def parse_document(kind: str, data: bytes, name: str, limits: ReadLimits) -> Parsed:
    """Read a file's bytes as ``kind`` (a value of :data:`KIND_OF_SUFFIX`) under ``limits``.

    Text and rST: front matter split off, form feeds and vertical tabs (page and line breaks
    of old editors and generated text) read as line breaks; title from front matter, else
    the first ``# heading`` (rST: its title). Raises :class:`InputError` naming ``name``."""
    if kind in ("text", "rst"):
        text = decode_utf8(data, path=name).replace("\x0b", "\n").replace("\x0c", "\n")
        matter = split_front_matter(text, path=name,
                                    max_bytes=limits.max_front_matter_bytes)
        if kind == "rst":
            extract = read_rst(matter.body, name, limits)
            body, heading = extract.text, extract.title
        else:
            body = matter.body
            found = _HEADING.match(body.lstrip().split("\n", 1)[0])
            heading = found.group(1).strip() if found else ""
        return Parsed([Extract(body, matter.title or heading)], matter.metadata)
    if kind == "pdf":
        return Parsed(read_pdf(data, name, limits))
    if kind == "docx":
        return Parsed([read_docx(data, name, limits)])
    if kind == "html":
        return Parsed([read_html(data, name, limits)])
    raise InputError(f"no reader for files of kind {kind!r}", path=name)


def memory_message(limit: int | None) -> str:
    """Why a file that exhausted the parser process's memory was not read."""
    shown = format_bytes(limit) if limit else "the available"
    return (f"reading it needs more than {shown} of memory, the limit of the parser "
            f"process; raise it ({OPTION_OF['max_memory_bytes']}) if the file is genuine")


def _limit_resources(memory: int | None) -> None:
    """Cap the address space (``RLIMIT_AS``: a parser that allocates past it gets a
    MemoryError, or dies), and forbid core dumps and file writes: reading needs neither."""
    try:
        import resource
    except ImportError:  # not POSIX: only the parent's time limit applies
        return
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def _warm_up() -> None:
    """Import every parser before the memory limit applies (imports are not the file's
    cost) and silence their logging (errors come back through the pipe, naming the file)."""
    import logging

    import bs4  # noqa: F401
    import docutils.core  # noqa: F401
    import docx  # noqa: F401
    import lxml.etree  # noqa: F401
    import pypdf  # noqa: F401
    import yaml  # noqa: F401

    logging.disable(logging.CRITICAL)


def serve(read_fd: int, write_fd: int, memory: int | None) -> None:
    """The parser process's loop: a JSON request (``kind``, ``name``, ``limits``) and the
    file's bytes in, a JSON reply (``extracts`` and ``metadata``, or ``error``) out, until
    the parent closes the pipe. After a MemoryError the process replies (``exiting``) and
    exits (its heap may be in pieces); the parent starts a fresh one for the next file."""
    from multiprocessing.connection import Connection

    _warm_up()
    _limit_resources(memory)
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    outbox.send_bytes(b'{"ready": true}')
    while True:
        try:
            request = json.loads(inbox.recv_bytes())
            data = inbox.recv_bytes()
        except EOFError:
            return
        fatal = False
        try:
            parsed = parse_document(request["kind"], data, request["name"],
                                    ReadLimits(**request["limits"]))
            reply: dict[str, object] = parsed.to_json()
        except InputError as error:
            reply = {"error": error.message}
        except MemoryError:
            reply, fatal = {"error": memory_message(memory), "exiting": True}, True
        except RecursionError:
            reply = {"error": "it is nested too deeply for the parser"}
        except Exception as error:  # any parser failure is the file's, never ours to raise
            reply = {"error": f"the parser failed ({type(error).__name__}: {error})"}
        del data
        outbox.send_bytes(json.dumps(reply, ensure_ascii=False).encode("utf-8"))
        if fatal:
            return
