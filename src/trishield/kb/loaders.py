"""Loaders: turn files on disk into validated :class:`Document` batches.

A loader reads and validates the *whole* input before anything is written, so that a bad line
at the end of a file cannot leave the first half of it in the knowledge base. Every error names
the file and, where there is one, the line.

Formats: JSONL, SQuAD JSON, ``.txt``/``.md``/``.rst`` (with optional YAML front matter), HTML,
DOCX and PDF (one document per page, so a citation names the page). In a folder, a file that
cannot be read (corrupt, encrypted, not UTF-8) is reported in :attr:`LoadedBatch.failed_files`
and the rest still loads: one bad PDF must not block a whole folder.

Every file is read under :class:`~trishield.kb.read_limits.ReadLimits`: its size on disk
(JSONL, read a line at a time, excepted), what it expands to, its pages and nesting, and the
time and memory its parser may take (PDF, DOCX, HTML and rST are parsed in a child process,
:mod:`trishield.kb.parse_process`). A file over a limit is reported in ``failed_files`` with
the limit and the option that raises it. A folder is the boundary of what is read
(:mod:`trishield.kb.file_walk`): no link is followed out of it, and pipes, devices and
dangling links are reported in ``skipped_files`` with the reason, never opened.
``id_prefix`` is put before every id a load makes, so that two folders (or two copies of a
file) can be ingested side by side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from trishield.errors import InputError
from trishield.kb.documents import Document
from trishield.kb.file_formats import Extract
from trishield.kb.file_walk import SkippedFile, open_regular, read_regular, walk_folder
from trishield.kb.front_matter import MetadataValue
from trishield.kb.parse_process import ParserProcess
from trishield.kb.parse_worker import (
    IN_PROCESS,
    KIND_OF_SUFFIX,
    Parsed,
    decode_utf8,
    parse_document,
)
from trishield.kb.read_limits import MAX_FILE_BYTES, ReadLimits
from trishield.kb.unicode_checks import has_visible_text, id_problem

MAX_DOCUMENT_CHARS = 1_000_000
"""Longer documents are refused: they are almost always a mistake (a dump, a binary)."""

MAX_JSONL_LINE_BYTES = 8 * MAX_DOCUMENT_CHARS
"""Longest JSONL line read: room for the longest document even with every character escaped
(``\\u00e9``), so that a file without line breaks is refused, not read whole into memory."""

MAX_ID_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_JSONL_FIELDS = {"id", "text", "title", "source"}
TEXT_SUFFIXES = (".txt", ".md")
RST_SUFFIXES = (".rst",)
HTML_SUFFIXES = (".html", ".htm")
DOCUMENT_SUFFIXES = (*TEXT_SUFFIXES, *RST_SUFFIXES, *HTML_SUFFIXES, ".pdf", ".docx")
"""Suffixes a folder load reads (lower-cased); any other file is skipped and reported."""

FileProgress = Callable[[int, int], None]
"""Called with ``(files read, files to read)`` after each file of a folder (a progress bar)."""


@dataclass(frozen=True)
class FailedFile:
    """A file a folder load tried to read and could not: the path and the full error."""

    path: str
    error: str


@dataclass(frozen=True)
class LoadedBatch:
    """Documents ready to ingest plus what the loader saw but did not turn into a document.

    ``skipped_files`` are entries not read, each with the reason (an unsupported type, a
    link out of the folder, a pipe, a device, a dangling link); ``failed_files`` are
    supported files that could not be read or were over a limit (each with its error);
    ``metadata`` maps a document id to the front matter keys other than ``title`` (each
    document carries them too, in :attr:`Document.metadata`, and the store keeps them with
    it).
    """

    documents: list[Document]
    skipped_files: list[SkippedFile]
    failed_files: list[FailedFile] = field(default_factory=list)
    metadata: dict[str, dict[str, MetadataValue]] = field(default_factory=dict)


def validate_document(document: Document, *, path: str, line: int | None = None) -> Document:
    """Check one document's id and text; raise :class:`InputError` naming ``path:line``."""

    def fail(message: str) -> InputError:
        return InputError(message, path=path, line=line)

    if not document.id or document.id != document.id.strip():
        raise fail(f"document id {document.id!r} is empty or has surrounding whitespace")
    if len(document.id) > MAX_ID_CHARS:
        raise fail(f"document id is {len(document.id)} characters long (max {MAX_ID_CHARS})")
    if _CONTROL.search(document.id):
        raise fail(f"document id {document.id!r} contains control characters")
    problem = id_problem(document.id)
    if problem is not None:
        raise fail(f"document id {document.id!r} {problem}")
    if not document.text.strip():
        raise fail(f"document {document.id!r} has empty text")
    if not has_visible_text(document.text):
        raise fail(f"document {document.id!r} has no visible text (only whitespace and "
                   "invisible characters such as zero-width spaces)")
    if len(document.text) > MAX_DOCUMENT_CHARS:
        raise fail(
            f"document {document.id!r} is {len(document.text):,} characters long "
            f"(max {MAX_DOCUMENT_CHARS:,}); split it before ingesting"
        )
    if _TEXT_CONTROL.search(document.text):
        raise fail(f"document {document.id!r} contains binary control characters")
    return document


def check_unique_ids(documents: Iterable[Document]) -> list[Document]:
    """Drop exact repeats; refuse one id used for two different texts (an ambiguous write)."""
    seen: dict[str, Document] = {}
    unique: list[Document] = []
    for document in documents:
        earlier = seen.get(document.id)
        if earlier is None:
            seen[document.id] = document
            unique.append(document)
        elif earlier.content_hash != document.content_hash:
            raise InputError(
                f"duplicate document id {document.id!r} with different text "
                f"(first at {earlier.origin}, again at {document.origin})"
            )
    return unique


def _optional_string(record: dict, key: str, *, path: str, line: int) -> str:
    value = record.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"field {key!r} must be a string, got {type(value).__name__}",
                         path=path, line=line)
    return value


def _check_encodable(value: str, key: str, *, path: str, line: int | None = None) -> None:
    """JSON ``\\ud800``-style escapes decode to lone surrogates, which no UTF-8 text can hold."""
    if _SURROGATE.search(value):
        raise InputError(f"field {key!r} contains an unpaired surrogate escape (\\ud800-\\udfff)",
                         path=path, line=line)


def iter_jsonl(path: Path, *, id_prefix: str = "") -> Iterator[Document]:
    """``{"id", "text", "title"?, "source"?}`` per line; blank lines are allowed."""
    shown = str(path)
    with open_regular(path.resolve(), shown=shown) as handle:
        lines = iter(lambda: handle.readline(MAX_JSONL_LINE_BYTES + 1), b"")
        for number, raw in enumerate(lines, start=1):
            if len(raw) > MAX_JSONL_LINE_BYTES:
                raise InputError(f"line is longer than {MAX_JSONL_LINE_BYTES:,} bytes, more "
                                 "than any document may hold; is this really JSONL?",
                                 path=shown, line=number)
            text = decode_utf8(raw, path=shown, line=number)
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise InputError(f"malformed JSON: {error.msg} (column {error.colno})",
                                 path=shown, line=number) from None
            if not isinstance(record, dict):
                raise InputError(f"expected a JSON object, got {type(record).__name__}",
                                 path=shown, line=number)
            unknown = sorted(set(record) - _JSONL_FIELDS)
            if unknown:
                raise InputError(f"unknown field(s) {', '.join(unknown)}; allowed: "
                                 "id, text, title, source", path=shown, line=number)
            for key in ("id", "text"):
                if key not in record:
                    raise InputError(f"missing required field {key!r}", path=shown, line=number)
                if not isinstance(record[key], str):
                    raise InputError(f"field {key!r} must be a string, got "
                                     f"{type(record[key]).__name__}", path=shown, line=number)
            fields = {
                "id": id_prefix + record["id"],
                "text": record["text"],
                "title": _optional_string(record, "title", path=shown, line=number),
                "source": _optional_string(record, "source", path=shown, line=number),
            }
            for key, value in fields.items():
                _check_encodable(value, key, path=shown, line=number)
            document = Document(**fields, origin=f"{shown}:{number}")
            yield validate_document(document, path=shown, line=number)


@dataclass(frozen=True)
class _Loaded:
    """One file's documents and its front matter metadata (shared by all its documents)."""

    documents: list[Document]
    metadata: dict[str, MetadataValue]


def load_text_file(path: Path, *, doc_id: str | None = None) -> Document:
    """One ``.txt``/``.md``/``.rst`` file as one document; YAML front matter is removed from
    the text and its ``title`` used, else a leading ``# heading`` (rST: its title)."""
    path = Path(path)
    if path.suffix.lower() not in (*TEXT_SUFFIXES, *RST_SUFFIXES):
        raise InputError(f"not a text file ({', '.join((*TEXT_SUFFIXES, *RST_SUFFIXES))})",
                         path=str(path))
    return load_file(path, doc_id=doc_id, max_file_bytes=None)[0]


def _from_extract(extract: Extract, path: Path, doc_id: str,
                  metadata: dict[str, MetadataValue]) -> Document:
    shown = str(path)
    title = extract.title or path.stem
    if extract.page is not None:
        # One document per page: the id and origin name the page, so a citation can too.
        document = Document(id=f"{doc_id}:p{extract.page}", text=extract.text,
                            title=f"{title} (page {extract.page})", source=shown,
                            origin=f"{shown}#page={extract.page}", metadata=metadata)
    else:
        document = Document(id=doc_id, text=extract.text, title=title, source=shown,
                            origin=shown, metadata=metadata)
    return validate_document(document, path=shown)


def load_file(path: Path, *, doc_id: str | None = None,
              max_file_bytes: int | None = MAX_FILE_BYTES,
              limits: ReadLimits | None = None) -> list[Document]:
    """Any single document file (see :data:`DOCUMENT_SUFFIXES`); a PDF gives one document
    per page with text, ids ``<id>:p<page>``. Raises :class:`InputError` naming the file.
    ``limits`` (default: :class:`ReadLimits` with ``max_file_bytes``) bound the read."""
    path = Path(path)
    limits = limits or ReadLimits(max_file_bytes=max_file_bytes)
    with ParserProcess(limits) as parser:
        return _load_file(path, path.resolve(), doc_id, limits, parser).documents


def _load_file(shown: Path, real: Path, doc_id: str | None, limits: ReadLimits,
               parser: ParserProcess) -> _Loaded:
    """Read ``real`` (a regular file, never a link: see :mod:`trishield.kb.file_walk`) as the
    file ``shown`` in its folder: its suffix picks the reader, its name the id and title."""
    suffix = shown.suffix.lower()
    kind = KIND_OF_SUFFIX.get(suffix)
    if kind is None:
        raise InputError(f"unsupported document type {suffix or '(none)'!r}", path=str(shown))
    data = read_regular(real, limits.max_file_bytes, shown=str(shown))
    if kind in IN_PROCESS:
        parsed = parse_document(kind, data, str(shown), limits)
    else:
        parsed = parser.parse(kind, data, str(shown))
    return _documents(parsed, shown, doc_id or shown.stem)


def _documents(parsed: Parsed, shown: Path, doc_id: str) -> _Loaded:
    documents = [_from_extract(extract, shown, doc_id, parsed.metadata)
                 for extract in parsed.extracts]
    return _Loaded(documents, parsed.metadata)


def _supported(path: Path) -> bool:
    return path.suffix.lower() in DOCUMENT_SUFFIXES


def folder_files(path: Path) -> tuple[list[Path], list[SkippedFile]]:
    """The files a folder load reads (sorted, hidden ones left out) and the entries it skips
    with the reason: what a progress bar counts before the first file is parsed."""
    files, skipped = walk_folder(path, _supported)
    return [file.shown for file in files], skipped


def load_folder(path: Path, *, id_prefix: str = "",
                max_file_bytes: int | None = MAX_FILE_BYTES,
                on_file: FileProgress | None = None,
                limits: ReadLimits | None = None) -> LoadedBatch:
    """Every supported file under ``path`` (recursively, sorted for determinism).

    Ids are ``id_prefix`` plus the path relative to ``path`` without the suffix, so two
    subfolders can hold ``index.md`` and two folders ingested with different prefixes never
    meet. Entries not read are listed in ``skipped_files`` with the reason (other types,
    links out of the folder, pipes and devices: see :func:`~trishield.kb.file_walk.walk_folder`);
    supported files that cannot be read, or are over a limit, are listed in
    ``failed_files`` with their error while the rest loads. Hidden files and folders are
    ignored. Two files giving one id to different texts are still refused (an ambiguous
    write). ``limits`` (default: :class:`ReadLimits` with ``max_file_bytes``) bound each file.
    """
    limits = limits or ReadLimits(max_file_bytes=max_file_bytes)
    documents: list[Document] = []
    failed: list[FailedFile] = []
    metadata: dict[str, dict[str, MetadataValue]] = {}
    files, skipped = walk_folder(path, _supported)
    with ParserProcess(limits) as parser:
        for done, file in enumerate(files, start=1):
            relative = file.shown.relative_to(path)
            try:
                loaded = _load_file(file.shown, file.real,
                                    id_prefix + relative.with_suffix("").as_posix(), limits,
                                    parser)
            except InputError as error:
                failed.append(FailedFile(str(file.shown), str(error)))
                continue
            finally:
                if on_file is not None:
                    on_file(done, len(files))
            documents.extend(loaded.documents)
            if loaded.metadata:
                metadata.update({document.id: loaded.metadata
                                 for document in loaded.documents})
    if not documents:
        if failed:
            raise InputError(f"none of the {len(failed)} document file(s) in this folder "
                             f"could be read; first: {failed[0].error}", path=str(path))
        raise InputError(f"no document files ({', '.join(DOCUMENT_SUFFIXES)}) found in "
                         f"folder {path}")
    return LoadedBatch(check_unique_ids(documents), skipped, failed, metadata)


def iter_squad(path: Path, *, id_prefix: str = "",
               max_file_bytes: int | None = None) -> Iterator[Document]:
    """SQuAD-format JSON: every paragraph context becomes a document ``prefix:title:index``."""
    shown = str(path)
    try:
        payload = json.loads(decode_utf8(read_regular(path.resolve(), max_file_bytes, shown=shown),
                                          path=shown))
    except json.JSONDecodeError as error:
        raise InputError(f"malformed JSON: {error.msg}", path=shown, line=error.lineno) from None
    articles = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(articles, list):
        raise InputError('not SQuAD format: expected an object with a "data" list', path=shown)
    for article_number, article in enumerate(articles):
        where = f"data[{article_number}]"
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise InputError(f'not SQuAD format: {where} has no "paragraphs" list', path=shown)
        title = article.get("title", "")
        if not isinstance(title, str):
            raise InputError(f"not SQuAD format: {where}.title is not a string", path=shown)
        _check_encodable(title, f"{where}.title", path=shown)
        for paragraph_number, paragraph in enumerate(article["paragraphs"]):
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str):
                raise InputError(f"not SQuAD format: {where}.paragraphs[{paragraph_number}] "
                                 'has no "context" string', path=shown)
            _check_encodable(context, f"{where}.paragraphs[{paragraph_number}].context",
                             path=shown)
            document = Document(
                id=f"{id_prefix}{title or 'untitled'}:{paragraph_number}",
                text=context,
                title=title,
                source=shown,
                origin=f"{shown}#{where}.paragraphs[{paragraph_number}]",
            )
            yield validate_document(document, path=shown)


def load_path(path: str | Path, *, id_prefix: str = "",
              max_file_bytes: int | None = MAX_FILE_BYTES,
              on_file: FileProgress | None = None,
              limits: ReadLimits | None = None) -> LoadedBatch:
    """Load a JSONL file, a SQuAD JSON file, one document file (text, rST, HTML, DOCX,
    PDF), or a folder of them. A single file that cannot be read (or is over a limit)
    raises; in a folder it is reported in ``failed_files``. Every id starts with
    ``id_prefix``. ``limits`` bound each file (default: :class:`ReadLimits` with
    ``max_file_bytes``; when given, its own ``max_file_bytes`` applies). A path named
    here may be a link (you named it); inside a folder, see :func:`load_folder`."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    _check_prefix(id_prefix)
    limits = limits or ReadLimits(max_file_bytes=max_file_bytes)
    if path.is_dir():
        return load_folder(path, id_prefix=id_prefix, on_file=on_file, limits=limits)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        documents = list(iter_jsonl(path, id_prefix=id_prefix))
    elif suffix == ".json":
        documents = list(iter_squad(path, id_prefix=id_prefix,
                                    max_file_bytes=limits.max_file_bytes))
    elif suffix in DOCUMENT_SUFFIXES:
        with ParserProcess(limits) as parser:
            loaded = _load_file(path, path.resolve(), id_prefix + path.stem, limits, parser)
        if on_file is not None:
            on_file(1, 1)
        metadata = {document.id: loaded.metadata for document in loaded.documents}
        return LoadedBatch(loaded.documents, [], [], metadata if loaded.metadata else {})
    else:
        raise InputError(
            f"unsupported file type {suffix or '(none)'!r}: expected .jsonl, SQuAD .json, "
            f"{'/'.join(DOCUMENT_SUFFIXES)} or a folder",
            path=str(path),
        )
    if on_file is not None:
        on_file(1, 1)
    if not documents:
        raise InputError("the file holds no documents", path=str(path))
    return LoadedBatch(check_unique_ids(documents), [])


def with_id_prefix(documents: Iterable[Document], id_prefix: str) -> list[Document]:
    """``documents`` with ``id_prefix`` put before each id (a named data set's, say), each
    checked again as a loader would."""
    _check_prefix(id_prefix)
    if not id_prefix:
        return list(documents)
    return [validate_document(replace(document, id=id_prefix + document.id),
                              path=document.origin or document.id) for document in documents]


def _check_prefix(id_prefix: str) -> None:
    """A prefix is part of every id: refuse one no id could carry (the ids are checked in
    full later, but a bad prefix would fail every document with a confusing message)."""
    if not isinstance(id_prefix, str):
        raise InputError(f"id prefix must be text, got {type(id_prefix).__name__}")
    if id_prefix != id_prefix.strip() or _CONTROL.search(id_prefix):
        raise InputError(f"id prefix {id_prefix!r} has surrounding whitespace or control "
                         "characters")
    if len(id_prefix) >= MAX_ID_CHARS:
        raise InputError(f"id prefix is {len(id_prefix)} characters long; ids are at most "
                         f"{MAX_ID_CHARS}")
