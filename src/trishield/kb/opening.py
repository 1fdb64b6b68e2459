"""Opening a KB directory: what it must hold, and the settings it was built with.

A new KB is made only in a directory that is missing or empty (never in one that holds
something else); its settings (embedding model, chunking, dense index, engine) are written
to its meta table once, in one transaction, and every later open must ask for the same ones
or none: one KB never mixes embedding models or chunkings. A directory or database that
cannot be written is opened read-only.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trishield.errors import InputError, KnowledgeBaseError
from trishield.kb.chunking import ChunkingConfig
from trishield.kb.indexes.dense import DENSE_KINDS
from trishield.kb.indexes.engine_link import ENGINE_OWNER
from trishield.kb.indexes.engines.config import EngineConfig
from trishield.kb.locking import LOCK
from trishield.kb.store import SCHEMA_VERSION, Store
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, get_embedding_model

DATABASE = "kb.sqlite"


@dataclass(frozen=True)
class KBSettings:
    """What a KB was built with. Mixing embedding models or chunkings in one KB is refused."""

    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    dense_index: str = "flat"
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Where searches run: the embedded indexes, or a Milvus collection (kb/indexes/engines)."""

    def as_meta(self) -> dict[str, str]:
        return {
            "schema_version": str(SCHEMA_VERSION),
            "embedding_model": self.embedding_model,
            "embedding_dimension": str(get_embedding_model(self.embedding_model).dimension),
            "chunk_words": str(self.chunking.words),
            "chunk_overlap": str(self.chunking.overlap),
            "chunk_strategy": self.chunking.strategy,
            "dense_index": self.dense_index,
            **self.engine.as_meta(),
        }

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> KBSettings:
        return cls(meta["embedding_model"],
                   ChunkingConfig(int(meta["chunk_words"]), int(meta["chunk_overlap"]),
                                  meta.get("chunk_strategy", "window")),  # type: ignore[arg-type]
                   meta["dense_index"], EngineConfig.from_meta(meta))


def open_store(directory: Path, *, create: bool, read_only: bool | None,
               embedding_model: str | None, dense_index: str | None,
               clock: Callable[[], float] | None) -> Store:
    """The store of the KB in ``directory`` (made, with ``create``, in a missing or empty
    directory), after checking the settings asked for; ``read_only`` None: whether the
    directory or its database cannot be written."""
    database = directory / DATABASE
    if read_only is None:
        read_only = database.is_file() and not (os.access(directory, os.W_OK)
                                                and os.access(database, os.W_OK))
    if not database.is_file():
        if not create:
            raise KnowledgeBaseError(f"{directory} is not a TriShield knowledge base "
                                     f"(no {DATABASE}); ingest something to create one")
        if directory.exists() and not directory.is_dir():
            raise KnowledgeBaseError(f"{directory} exists and is not a directory")
        if directory.is_dir() and any(p.name != LOCK for p in directory.iterdir()):
            raise KnowledgeBaseError(f"{directory} is not empty and is not a TriShield "
                                     "knowledge base; refusing to write into it")
        directory.mkdir(parents=True, exist_ok=True)
    if dense_index is not None and dense_index not in DENSE_KINDS:
        raise InputError(f"unknown dense index {dense_index!r}; choose from "
                         f"{', '.join(DENSE_KINDS)}")
    if embedding_model is not None:
        get_embedding_model(embedding_model)
    if clock is not None and not callable(clock):
        raise InputError(f"a KB clock is a callable returning Unix seconds, not "
                         f"{type(clock).__name__}")
    return Store(database, read_only=read_only, clock=clock or time.time)


def settings_of(store: Store, directory: Path, *, embedding_model: str | None,
                chunking: ChunkingConfig | None, dense_index: str | None,
                engine: EngineConfig | None) -> KBSettings:
    """The settings the KB was built with; a new KB's are written first (those asked for,
    else the defaults). Settings asked for that differ are refused, and the store is closed
    on any refusal."""
    meta = store.meta()
    if "embedding_model" not in meta and store.read_only:
        store.close()
        raise KnowledgeBaseError(f"{directory} was never initialised and is read-only")
    if "embedding_model" not in meta:
        settings = KBSettings(embedding_model or DEFAULT_EMBEDDING_MODEL,
                              chunking or ChunkingConfig(), dense_index or "flat",
                              engine or EngineConfig())
        with store.transaction() as connection:
            if "embedding_model" not in store.meta():
                store.set_meta(settings.as_meta() | {"generation": "0",
                                                     "created_at": f"{store.clock():.3f}",
                                                     ENGINE_OWNER: uuid.uuid4().hex},
                               connection)
        meta = store.meta()
    settings = KBSettings.from_meta(meta)
    try:
        refuse_mismatch(directory, settings, embedding_model, chunking, dense_index, engine)
    except KnowledgeBaseError:
        store.close()
        raise
    return settings


def refuse_mismatch(directory: Path, settings: KBSettings, embedding_model: str | None,
                     chunking: ChunkingConfig | None, dense_index: str | None,
                     engine: EngineConfig | None = None) -> None:
    """Refuse settings asked for that differ from those the KB was built with."""
    asked = {"embedding model": (embedding_model, settings.embedding_model),
             "chunking": (chunking, settings.chunking),
             "dense index": (dense_index, settings.dense_index),
             "search engine": (engine, settings.engine)}
    for what, (wanted, recorded) in asked.items():
        if wanted is not None and wanted != recorded:
            raise KnowledgeBaseError(
                f"{directory} was built with {what} {recorded}; refusing to mix in "
                f"{wanted}. Use a new --kb directory for a different {what}"
                + (" (or `trishield engine attach` to move this KB's search)."
                   if what == "search engine" else "."))
