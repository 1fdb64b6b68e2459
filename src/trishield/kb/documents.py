"""The units a knowledge base stores: source documents and the chunks cut from them."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

_WHITESPACE = re.compile(r"\s+")


class Tier(StrEnum):
    """Provenance tier of a writer. It comes from who wrote a document, never from its text."""

    TRUSTED = "trusted"
    NEUTRAL = "neutral"
    UNTRUSTED = "untrusted"


TIERS: tuple[str, ...] = tuple(tier.value for tier in Tier)
"""Every tier's name, most trusted first (CLI choices and API schemas read this)."""


def normalise_whitespace(text: str) -> str:
    """Collapse runs of whitespace so that re-flowed copies of a text hash alike."""
    return _WHITESPACE.sub(" ", text).strip()


def content_hash(text: str) -> str:
    """sha256 of the whitespace-normalised text: the key for deduplication and signatures."""
    return hashlib.sha256(normalise_whitespace(text).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Document:
    """One source document as a loader produced it.

    ``origin`` says where it came from (``file.jsonl:17``) so that every later error or audit
    entry can point a user back to the input line.

    ``tier`` and ``provenance`` are set only by code that *established* provenance (the HTTP
    service, from the API key that wrote the document or a verified publisher signature);
    loaders never set them, so text a writer typed in cannot raise its own tier. ``tier``
    ``None`` means "the batch's tier"; ``provenance`` is the human-readable verdict (how the
    tier was decided) that the audit log and every trace carry. ``signed`` is the publisher
    record a verified signature covered (JSON: publisher, version, issued_at), so that the
    signature can later be withdrawn for this document alone.

    ``metadata`` is what the file said about itself (YAML front matter keys other than the
    title: tags, dates, owners). It is stored with the document and shown by ``documents
    show``, but it is not part of the text: it is neither chunked, embedded nor hashed, so
    a tag cannot steer retrieval and a signature covers the text alone.
    """

    id: str
    text: str
    title: str = ""
    source: str = ""
    origin: str = ""
    tier: str | None = None
    provenance: str = ""
    signed: str = ""
    metadata: Mapping[str, object] = field(default_factory=dict, hash=False)
    content_hash: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "content_hash", content_hash(self.text))

    @property
    def metadata_json(self) -> str:
        """The metadata as canonical JSON (sorted keys): how the store keeps it."""
        return metadata_json(self.metadata)


def metadata_json(metadata: Mapping[str, object]) -> str:
    """Canonical JSON of a metadata mapping, so equal metadata compares equal as text."""
    return json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Chunk:
    """A word window of a document; offsets index into the document's original text."""

    doc_id: str
    index: int
    text: str
    char_start: int
    char_end: int
    word_start: int
    word_end: int
    section: str = ""
    """Where the chunk sits: the document's title and the heading above it (``sections``
    chunking; "" for word windows). Embedded and indexed with the text, never part of it."""

    @property
    def id(self) -> str:
        return f"{self.doc_id}#{self.index}"
