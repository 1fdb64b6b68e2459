"""Which engine a knowledge base searches on: a KB setting, recorded in its meta.

``embedded`` (FAISS + FTS5 beside ``kb.sqlite``) is the default. A Milvus engine is named by
its URI (a local ``.db`` path is Milvus Lite, ``http(s)://host:19530`` a server or cluster), a
collection name and a vector index kind. The setting is validated here, before anything
connects or is written, and never holds a secret: a URI with ``user:password@`` is refused
(the token comes from :data:`~trishield.kb.indexes.engines.milvus.TOKEN_ENV` only), so the meta
table and every message that prints the setting stay free of credentials.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from trishield.errors import InputError

EMBEDDED = "embedded"
DEFAULT_COLLECTION = "trishield_chunks"
MILVUS_INDEX_KINDS = ("flat", "hnsw", "ivf")
"""The Milvus vector index kinds (:data:`trishield.kb.indexes.engines.milvus.INDEX_KINDS`), named
here so that checking a setting needs no client library."""
META_KEYS = ("engine", "engine_collection", "engine_index")


@dataclass(frozen=True)
class EngineConfig:
    """``uri`` is ``"embedded"`` or a Milvus URI; ``collection`` and ``index`` apply to Milvus."""

    uri: str = EMBEDDED
    collection: str = ""
    index: str = ""

    @property
    def embedded(self) -> bool:
        return self.uri == EMBEDDED

    @classmethod
    def parse(cls, uri: str | None, collection: str | None = None,
              index: str | None = None) -> EngineConfig:
        """A checked setting from user input (``None`` or ``"embedded"``: the default).

        A Milvus Lite path is made absolute, so the KB finds it from any working directory."""
        if uri is None or uri.strip() == EMBEDDED:
            if collection is not None or index is not None:
                raise InputError("--engine-collection and --engine-index need a Milvus "
                                 "--engine URI")
            return cls()
        uri = uri.strip()
        if not uri:
            raise InputError("the engine URI is empty; give 'embedded', a path ending in .db "
                             "(Milvus Lite) or http://host:19530")
        parsed = urllib.parse.urlsplit(uri)
        if "@" in parsed.netloc:
            raise InputError("the engine URI carries credentials; give it without "
                             "user:password@ and put the token in TRISHIELD_MILVUS_TOKEN "
                             "(a KB never stores a secret)")
        if uri.endswith(".db"):
            uri = str(Path(uri).expanduser().absolute())
        # the URI's shape, the collection name and the index kind are checked by the backend's
        # own rules (no connection is made)
        from trishield.kb.indexes.engines.milvus import check_collection_name, check_uri

        check_uri(uri)
        collection = DEFAULT_COLLECTION if collection is None else collection
        check_collection_name(collection)
        index = "flat" if index is None else index
        if index not in MILVUS_INDEX_KINDS:
            raise InputError(f"unknown Milvus index kind {index!r}; choose from "
                             f"{', '.join(MILVUS_INDEX_KINDS)}")
        return cls(uri, collection, index)

    def as_meta(self) -> dict[str, str]:
        return {"engine": self.uri, "engine_collection": self.collection,
                "engine_index": self.index}

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> EngineConfig:
        """The recorded setting; a KB made before engines existed is embedded."""
        uri = meta.get("engine", EMBEDDED)
        if uri == EMBEDDED:
            return cls()
        return cls(uri, meta.get("engine_collection", DEFAULT_COLLECTION),
                   meta.get("engine_index", "flat"))

    def __str__(self) -> str:
        if self.embedded:
            return EMBEDDED
        return f"milvus {self.uri} collection {self.collection} ({self.index})"
