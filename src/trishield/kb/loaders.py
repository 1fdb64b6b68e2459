"""Loaders: turn files on disk into validated :class:`Document` batches.

A loader reads and validates the *whole* input before anything is written, so that a bad line
at the end of a file cannot leave the first half of it in the knowledge base. Every error names
the file and, where there is one, the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trishield.errors import InputError
from trishield.kb.documents import Document
from trishield.kb.unicode_checks import has_visible_text, id_problem

MAX_DOCUMENT_CHARS = 1_000_000
"""Longer documents are refused: they are almost always a mistake (a dump, a binary)."""

MAX_ID_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_HEADING = re.compile(r"#+[ \t]+(\S.*)")
_JSONL_FIELDS = {"id", "text", "title", "source"}
TEXT_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class LoadedBatch:
    """Documents ready to ingest plus what the loader saw but did not turn into a document."""

    documents: list[Document]
    skipped_files: list[str]


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


def _decode(raw: bytes, *, path: str, line: int | None = None) -> str:
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise InputError(
            f"not valid UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start})",
            path=path,
            line=line,
        ) from None


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


def iter_jsonl(path: Path) -> Iterator[Document]:
    """``{"id", "text", "title"?, "source"?}`` per line; blank lines are allowed."""
    shown = str(path)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            text = _decode(raw, path=shown, line=number)
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
                "id": record["id"],
                "text": record["text"],
                "title": _optional_string(record, "title", path=shown, line=number),
                "source": _optional_string(record, "source", path=shown, line=number),
            }
            for key, value in fields.items():
                _check_encodable(value, key, path=shown, line=number)
            document = Document(**fields, origin=f"{shown}:{number}")
            yield validate_document(document, path=shown, line=number)


def load_text_file(path: Path, *, doc_id: str | None = None) -> Document:
    """One ``.txt``/``.md`` file as one document; a leading ``# heading`` becomes the title."""
    shown = str(path)
    text = _decode(path.read_bytes(), path=shown)
    heading = _HEADING.match(text.lstrip().split("\n", 1)[0])
    title = heading.group(1).strip() if heading else path.stem
    document = Document(id=doc_id or path.stem, text=text, title=title, source=shown, origin=shown)
    return validate_document(document, path=shown)


def load_folder(path: Path) -> LoadedBatch:
    """Every ``.txt``/``.md`` file under ``path`` (recursively, sorted for determinism).

    Ids are the relative path without the suffix, so two folders can hold ``index.md``.
    Other files are not ingested; they are returned so that the caller can report them.
    """
    documents: list[Document] = []
    skipped: list[str] = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if file.suffix.lower() in TEXT_SUFFIXES:
            documents.append(load_text_file(file, doc_id=relative.with_suffix("").as_posix()))
        else:
            skipped.append(str(file))
    if not documents:
        raise InputError(f"no .txt or .md files found in folder {path}")
    return LoadedBatch(check_unique_ids(documents), skipped)


def iter_squad(path: Path, *, id_prefix: str = "") -> Iterator[Document]:
    """SQuAD-format JSON: every paragraph context becomes a document ``prefix:title:index``."""
    shown = str(path)
    try:
        payload = json.loads(_decode(path.read_bytes(), path=shown))
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


def load_path(path: str | Path) -> LoadedBatch:
    """Load a JSONL file, a SQuAD JSON file, a single text file, or a folder of text files."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    if path.is_dir():
        return load_folder(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        documents = list(iter_jsonl(path))
    elif suffix == ".json":
        documents = list(iter_squad(path))
    elif suffix in TEXT_SUFFIXES:
        documents = [load_text_file(path)]
    else:
        raise InputError(
            f"unsupported file type {suffix or '(none)'!r}: expected .jsonl, SQuAD .json, "
            ".txt/.md or a folder",
            path=str(path),
        )
    if not documents:
        raise InputError("the file holds no documents", path=str(path))
    return LoadedBatch(check_unique_ids(documents), [])
