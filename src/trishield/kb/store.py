"""The SQLite half of a knowledge base: documents, chunks, embeddings, batches and audit log.

SQLite is the source of truth. A batch of documents is written in one transaction, so a crash
or ``kill -9`` leaves the database as it was before the batch or after it. The ``generation``
counter in ``meta`` moves forward in that same transaction; the search indexes are stamped with
it, which is how a reader knows whether they still match.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trishield.kb.documents import Chunk, Document

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    id INTEGER PRIMARY KEY,
    created_at REAL NOT NULL,
    writer TEXT NOT NULL,
    tier TEXT NOT NULL,
    source TEXT NOT NULL,
    documents_added INTEGER NOT NULL,
    documents_duplicate INTEGER NOT NULL,
    chunks_added INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    pk INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL UNIQUE,
    content_hash TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    source TEXT NOT NULL,
    origin TEXT NOT NULL,
    text TEXT NOT NULL,
    tier TEXT NOT NULL CHECK (tier IN ('trusted', 'neutral', 'untrusted')),
    writer TEXT NOT NULL,
    ingested_at REAL NOT NULL,
    batch_id INTEGER NOT NULL REFERENCES batches(id)
);
CREATE TABLE IF NOT EXISTS chunks (
    pk INTEGER PRIMARY KEY,
    doc_pk INTEGER NOT NULL REFERENCES documents(pk),
    chunk_index INTEGER NOT NULL,
    text TEXT NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    word_start INTEGER NOT NULL,
    word_end INTEGER NOT NULL,
    embedding BLOB NOT NULL,
    UNIQUE (doc_pk, chunk_index)
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    action TEXT NOT NULL,
    writer TEXT NOT NULL,
    doc_id TEXT,
    content_hash TEXT,
    batch_id INTEGER,
    detail TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class StoredChunk:
    """A chunk joined with its document's identity and provenance, as retrieval returns it."""

    pk: int
    doc_id: str
    chunk_index: int
    text: str
    title: str
    tier: str
    writer: str
    char_start: int
    char_end: int

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.chunk_index}"


class Store:
    """Thin, typed access to the knowledge-base database."""

    def __init__(self, path: Path):
        self.path = path
        self.connection = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA foreign_keys=ON")
        self.connection.executescript(_SCHEMA)

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls the whole batch back."""
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield self.connection
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    # -- meta -------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return dict(self.connection.execute("SELECT key, value FROM meta"))

    def set_meta(self, values: dict[str, str],
                 connection: sqlite3.Connection | None = None) -> None:
        (connection or self.connection).executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            sorted(values.items()))

    def generation(self) -> int:
        row = self.connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    # -- reads ------------------------------------------------------------------------------
    def existing(self, doc_ids: Iterable[str], hashes: Iterable[str]) -> tuple[dict, dict]:
        """Maps ``doc_id -> content_hash`` and ``content_hash -> doc_id`` for the given keys."""
        by_id: dict[str, str] = {}
        by_hash: dict[str, str] = {}
        for key_column, keys, target in (("doc_id", list(doc_ids), by_id),
                                         ("content_hash", list(hashes), by_hash)):
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                marks = ",".join("?" * len(part))
                rows = self.connection.execute(
                    f"SELECT doc_id, content_hash FROM documents WHERE {key_column} IN ({marks})",
                    part)
                for doc_id, digest in rows:
                    if key_column == "doc_id":
                        target[doc_id] = digest
                    else:
                        target[digest] = doc_id
        return by_id, by_hash

    def counts(self) -> dict[str, int]:
        query = ("SELECT (SELECT COUNT(*) FROM documents), (SELECT COUNT(*) FROM chunks), "
                 "(SELECT COUNT(*) FROM batches), (SELECT COUNT(*) FROM audit)")
        documents, chunks, batches, audit = self.connection.execute(query).fetchone()
        return {"documents": documents, "chunks": chunks, "batches": batches, "audit": audit}

    def all_embeddings(self, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self.connection.execute("SELECT pk, embedding FROM chunks ORDER BY pk").fetchall()
        ids = np.array([pk for pk, _ in rows], dtype=np.int64)
        vectors = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
        return ids, vectors.reshape(len(rows), dimension)

    def all_chunk_texts(self) -> tuple[np.ndarray, list[str]]:
        rows = self.connection.execute("SELECT pk, text FROM chunks ORDER BY pk").fetchall()
        return np.array([pk for pk, _ in rows], dtype=np.int64), [text for _, text in rows]

    def chunks_by_pk(self, pks: Sequence[int]) -> dict[int, StoredChunk]:
        found: dict[int, StoredChunk] = {}
        for start in range(0, len(pks), 500):
            part = list(pks[start:start + 500])
            marks = ",".join("?" * len(part))
            rows = self.connection.execute(
                "SELECT c.pk, d.doc_id, c.chunk_index, c.text, d.title, d.tier, d.writer, "
                "c.char_start, c.char_end FROM chunks c JOIN documents d ON d.pk = c.doc_pk "
                f"WHERE c.pk IN ({marks})", part)
            for row in rows:
                found[row[0]] = StoredChunk(*row)
        return found

    def document(self, doc_id: str) -> dict | None:
        row = self.connection.execute(
            "SELECT doc_id, title, source, origin, text, tier, writer, ingested_at, batch_id, "
            "content_hash FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        if row is None:
            return None
        keys = ("id", "title", "source", "origin", "text", "tier", "writer", "ingested_at",
                "batch_id", "content_hash")
        return dict(zip(keys, row, strict=True))

    def audit_log(self, limit: int = 100) -> list[dict]:
        rows = self.connection.execute(
            "SELECT id, at, action, writer, doc_id, content_hash, batch_id, detail FROM audit "
            "ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        keys = ("id", "at", "action", "writer", "doc_id", "content_hash", "batch_id", "detail")
        return [dict(zip(keys, row, strict=True)) | {"detail": json.loads(row[-1])}
                for row in rows]

    # -- writes -----------------------------------------------------------------------------
    def write_batch(
        self,
        connection: sqlite3.Connection,
        *,
        documents: Sequence[Document],
        chunks: Sequence[Sequence[Chunk]],
        embeddings: np.ndarray,
        tier: str,
        writer: str,
        source: str,
        duplicates: int,
    ) -> tuple[int, np.ndarray]:
        """Insert one batch inside ``connection``'s open transaction.

        Returns the batch id and the row ids of the inserted chunks, in embedding order.
        """
        now = time.time()
        total_chunks = sum(len(per_document) for per_document in chunks)
        batch_id = connection.execute(
            "INSERT INTO batches(created_at, writer, tier, source, documents_added, "
            "documents_duplicate, chunks_added) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (now, writer, tier, source, len(documents), duplicates, total_chunks)).lastrowid
        chunk_ids: list[int] = []
        row = 0
        for document, document_chunks in zip(documents, chunks, strict=True):
            doc_pk = connection.execute(
                "INSERT INTO documents(doc_id, content_hash, title, source, origin, text, tier, "
                "writer, ingested_at, batch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (document.id, document.content_hash, document.title, document.source,
                 document.origin, document.text, tier, writer, now, batch_id)).lastrowid
            for chunk in document_chunks:
                chunk_ids.append(connection.execute(
                    "INSERT INTO chunks(doc_pk, chunk_index, text, char_start, char_end, "
                    "word_start, word_end, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc_pk, chunk.index, chunk.text, chunk.char_start, chunk.char_end,
                     chunk.word_start, chunk.word_end, embeddings[row].tobytes())).lastrowid)
                row += 1
            connection.execute(
                "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
                "VALUES (?, 'ingest', ?, ?, ?, ?, ?)",
                (now, writer, document.id, document.content_hash, batch_id,
                 json.dumps({"tier": tier, "chunks": len(document_chunks),
                             "origin": document.origin}, sort_keys=True)))
        generation = self._next_generation(connection)
        self.set_meta({"generation": str(generation)}, connection)
        return batch_id, np.array(chunk_ids, dtype=np.int64)

    @staticmethod
    def _next_generation(connection: sqlite3.Connection) -> int:
        row = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return (int(row[0]) if row else 0) + 1
