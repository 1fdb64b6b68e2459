"""The store's read queries: what the indexes, Ring 1's screening and the rings read by SQL.

Mixed into :class:`~trishield.kb.store.sqlite.Store` (one object, one connection): claims on
ids and texts before a write, counts and samples, each writer's documents and chunks, vectors,
texts and rows by primary key, and the stored chunk analyses.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from trishield.kb.analysis import StoredAnalysis
from trishield.kb.store import writer_counts
from trishield.kb.store.ownership import Claim


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
    provenance: str = ""
    batch: int | None = None
    """The ingest batch and time of the chunk's document: evidence independence and
    precedence read them (``None`` for passages that never went through a TriShield KB)."""
    ingested_at: float | None = None
    analysis: StoredAnalysis | None = field(default=None, compare=False, repr=False)
    """Ring 1's query-independent analysis of the chunk, as stored at ingest (``None`` when
    none is stored; its version says whether the reader may use it)."""
    embedding: bytes | None = field(default=None, compare=False, repr=False)
    """The chunk's stored embedding (float32 bytes), read with the row by a search: Rings 1
    and 2 read every candidate's embedding, and a second query for them cost more than the
    row read itself (``None`` when the row was read without it: the KB reads it then)."""

    @cached_property
    def chunk_id(self) -> str:
        """``doc_id#chunk_index``, formatted on first read: the rings read a candidate's id
        about a dozen times per question (cached in the instance, which stays frozen)."""
        return f"{self.doc_id}#{self.chunk_index}"


class StoreQueries:
    """Read queries over ``self.connection`` (see the module docstring)."""

    connection: sqlite3.Connection

    # -- reads ------------------------------------------------------------------------------
    def existing(self, doc_ids: Iterable[str], hashes: Iterable[str]) -> tuple[dict, dict]:
        """Maps ``doc_id -> content_hash`` and ``content_hash -> doc_id`` for the given keys,
        over stored documents and documents held in quarantine, whoever wrote them (for
        tools that ask "is this text in the KB at all"; ingest asks :meth:`claims`)."""
        by_id: dict[str, str] = {}
        by_hash: dict[str, str] = {}
        for key_column, keys, target in (("doc_id", list(doc_ids), by_id),
                                         ("content_hash", list(hashes), by_hash)):
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                marks = ",".join("?" * len(part))
                rows = self.connection.execute(
                    f"SELECT doc_id, content_hash FROM documents WHERE {key_column} IN ({marks}) "
                    f"UNION ALL SELECT doc_id, content_hash FROM quarantine "
                    f"WHERE state = 'held' AND {key_column} IN ({marks})", part + part)
                for doc_id, digest in rows:
                    if key_column == "doc_id":
                        target[doc_id] = digest
                    else:
                        target.setdefault(digest, doc_id)
        return by_id, by_hash

    def claims(self, doc_ids: Iterable[str], hashes: Iterable[str]) -> list[Claim]:
        """Every stored or held document that has one of ``doc_ids`` or one of ``hashes``:
        what an ingest must check its batch against (who owns each id, who holds each text)."""
        found: dict[tuple[str, str], Claim] = {}
        for key_column, keys in (("doc_id", sorted(set(doc_ids))),
                                 ("content_hash", sorted(set(hashes)))):
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                marks = ",".join("?" * len(part))
                rows = self.connection.execute(
                    "SELECT doc_id, content_hash, writer, writer_key, tier, 'stored', signed, "
                    f"source, title, metadata FROM documents WHERE {key_column} IN ({marks}) "
                    "UNION ALL SELECT doc_id, content_hash, writer, writer_key, tier, "
                    "'quarantined', signed, source, title, metadata "
                    f"FROM quarantine WHERE state = 'held' AND {key_column} IN ({marks})",
                    part + part)
                for row in rows:
                    claim = Claim(*row)
                    found[claim.doc_id, claim.state] = claim
        return list(found.values())

    def counts(self) -> dict[str, int]:
        query = ("SELECT (SELECT COUNT(*) FROM documents), (SELECT COUNT(*) FROM chunks), "
                 "(SELECT COUNT(*) FROM batches), (SELECT COUNT(*) FROM audit), "
                 "(SELECT COUNT(*) FROM quarantine WHERE state = 'held'), "
                 "(SELECT COUNT(*) FROM deleted_documents)")
        documents, chunks, batches, audit, held, deleted = \
            self.connection.execute(query).fetchone()
        return {"documents": documents, "chunks": chunks, "batches": batches, "audit": audit,
                "quarantined": held, "deleted": deleted}

    def sample_embeddings(self, dimension: int, limit: int, seed: int = 0) -> np.ndarray:
        """Up to ``limit`` stored chunk embeddings, a seeded sample when there are more."""
        ids = [pk for (pk,) in self.connection.execute("SELECT pk FROM chunks ORDER BY pk")]
        if len(ids) > limit:
            chosen = np.random.default_rng(seed).choice(len(ids), size=limit, replace=False)
            ids = sorted(ids[i] for i in chosen)
        vectors = []
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            vectors.extend(blob for (blob,) in self.connection.execute(
                f"SELECT embedding FROM chunks WHERE pk IN ({marks}) ORDER BY pk", part))
        flat = np.frombuffer(b"".join(vectors), dtype=np.float32)
        return flat.reshape(len(vectors), dimension)

    def documents_per_writer(self) -> dict[str, int]:
        """``writer -> number of stored documents`` (quarantined and deleted ones not counted),
        from the counts the triggers keep (:mod:`trishield.kb.store.writer_counts`): one row per
        writer, not a read of every document."""
        return writer_counts.documents_per_writer(self.connection)

    def writer_versions(self) -> dict[str, tuple[int, int]]:
        """``writer -> (stored documents, version)``: the version grows with every insert or
        delete of one of the writer's documents (:mod:`trishield.kb.store.writer_counts`)."""
        return writer_counts.versions(self.connection)

    def document_pks_of_writer(self, writer: str, *, after: int = 0) -> list[int]:
        """Row ids of ``writer``'s stored documents (those above ``after``), oldest first (one
        indexed read)."""
        return [pk for (pk,) in self.connection.execute(
            "SELECT pk FROM documents WHERE writer = ? AND pk > ? ORDER BY pk",
            (writer, after))]

    def documents_added(self, writer: str, before: tuple[int, int], newest: int,
                        now: tuple[int, int]) -> list[int] | None:
        """Row ids of the documents ``writer`` added since it stood at ``before`` (stored
        documents, version) with ``newest`` its newest row id, now that it stands at ``now``;
        None when it also removed one (:func:`writer_counts.added_since`) or the ids above
        ``newest`` are not exactly the added ones. Why they should be: SQLite gives a new row
        an id above every row of the table, so a writer that only appended has its new
        documents, and only those, above its newest then; the count checks it."""
        added = writer_counts.added_since(before, now)
        if added is None:
            return None
        pks = self.document_pks_of_writer(writer, after=newest) if added else []
        return pks if len(pks) == added else None

    def newest_document_of_writers(self, writers: Iterable[str]) -> dict[str, int]:
        """``writer -> row id of its newest stored document`` (0 for one with none)."""
        names = sorted(set(writers))
        return dict.fromkeys(names, 0) | dict(self._rows_in(
            "SELECT writer, MAX(pk) FROM documents WHERE writer IN ({marks}) GROUP BY writer",
            names))

    def writers_since(self) -> dict[str, float]:
        """``writer -> when its first stored document entered the KB`` (quarantined and
        deleted ones not counted, as in :meth:`documents_per_writer`)."""
        return dict(self.connection.execute(
            "SELECT writer, MIN(ingested_at) FROM documents GROUP BY writer ORDER BY writer"))

    def local_writers(self) -> set[str]:
        """Writer names of local (CLI) writes, lower-cased: documents stored or held with no
        API key. An API key must not take one of these names, nor a local write a key's."""
        rows = self.connection.execute(
            "SELECT DISTINCT lower(writer) FROM documents WHERE writer_key = '' UNION "
            "SELECT DISTINCT lower(writer) FROM quarantine WHERE writer_key = ''")
        return {name for (name,) in rows}

    def _rows_in(self, sql: str, keys: Sequence) -> Iterator[tuple]:
        """The rows of ``sql`` for ``keys``, its ``{marks}`` the placeholders of an ``IN``
        list, in queries of 500 keys (SQLite's variable limit): each key's rows come from one
        query, so an ``ORDER BY`` holds per key."""
        for start in range(0, len(keys), 500):
            part = list(keys[start:start + 500])
            yield from self.connection.execute(sql.format(marks=",".join("?" * len(part))),
                                               part)

    def chunk_pks_by_writer(self, writers: Iterable[str]) -> dict[str, np.ndarray]:
        """``writer -> row ids of its stored chunks`` for each of ``writers`` (an empty array
        for one with none), in queries of 500 writers (SQLite's variable limit)."""
        names = sorted(set(writers))
        found: dict[str, list[int]] = {name: [] for name in names}
        for pk, writer in self._rows_in(
                "SELECT c.pk, d.writer FROM documents d JOIN chunks c ON c.doc_pk = d.pk "
                "WHERE d.writer IN ({marks}) ORDER BY c.pk", names):
            found[writer].append(pk)
        return {name: np.asarray(pks, dtype=np.int64) for name, pks in found.items()}

    def chunk_writers(self, pks: Sequence[int]) -> dict[int, str]:
        """``chunk row id -> its document's writer`` for the stored chunks among ``pks``."""
        return dict(self._rows_in(
            "SELECT c.pk, d.writer FROM chunks c JOIN documents d ON d.pk = c.doc_pk "
            "WHERE c.pk IN ({marks})", pks))

    def documents_of_chunks(self, pks: Sequence[int]) -> dict[int, int]:
        """``chunk row id -> its document's row id`` for the stored chunks among ``pks``."""
        return dict(self._rows_in("SELECT pk, doc_pk FROM chunks WHERE pk IN ({marks})", pks))

    def chunk_pks_of_documents(self, doc_pks: Sequence[int]) -> dict[int, np.ndarray]:
        """``document row id -> row ids of its chunks`` (an empty array for one with none)."""
        found: dict[int, list[int]] = {pk: [] for pk in doc_pks}
        for doc_pk, pk in self._rows_in(
                "SELECT doc_pk, pk FROM chunks WHERE doc_pk IN ({marks}) ORDER BY pk", doc_pks):
            found[doc_pk].append(pk)
        return {pk: np.asarray(pks, dtype=np.int64) for pk, pks in found.items()}

    def document_vectors(self, doc_pks: Sequence[int], dimension: int) -> np.ndarray:
        """One unit vector per document, in the order given: the normalised mean of its chunk
        embeddings (how a document is embedded as a whole when it is screened)."""
        grouped: dict[int, list[bytes]] = {}
        for start in range(0, len(doc_pks), 500):
            part = list(doc_pks[start:start + 500])
            marks = ",".join("?" * len(part))
            for doc_pk, blob in self.connection.execute(
                    f"SELECT doc_pk, embedding FROM chunks WHERE doc_pk IN ({marks}) "
                    "ORDER BY doc_pk, chunk_index", part):
                grouped.setdefault(doc_pk, []).append(blob)
        # documents of the same number of chunks are averaged together (a one-off process
        # draws a sample of 2,000: a mean per document was most of its screen); averaging
        # along the chunk axis adds the same float32 rows in the same order as one
        # document's mean, so the vectors are the same bits (tests/test_kb_reference_draw.py)
        by_count: dict[int, list[int]] = {}
        for row, doc_pk in enumerate(doc_pks):
            if doc_pk in grouped:
                by_count.setdefault(len(grouped[doc_pk]), []).append(row)
        vectors = np.zeros((len(doc_pks), dimension), dtype=np.float32)
        for count, rows in by_count.items():
            joined = b"".join(blob for row in rows for blob in grouped[doc_pks[row]])
            means = np.frombuffer(joined, dtype=np.float32).reshape(
                len(rows), count, dimension).mean(axis=1)
            for row, mean in zip(rows, means, strict=True):
                vectors[row] = mean / (np.linalg.norm(mean) or 1.0)
        return vectors

    def document_texts(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """``doc_id -> text`` of the stored documents among ``doc_ids``."""
        keys = sorted(set(doc_ids))
        found: dict[str, str] = {}
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            marks = ",".join("?" * len(part))
            found.update(self.connection.execute(
                f"SELECT doc_id, text FROM documents WHERE doc_id IN ({marks})", part))
        return found

    def embeddings_of(self, pks: Sequence[int], dimension: int) -> dict[int, np.ndarray]:
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(pks), 500):
            part = list(pks[start:start + 500])
            marks = ",".join("?" * len(part))
            for pk, blob in self.connection.execute(
                    f"SELECT pk, embedding FROM chunks WHERE pk IN ({marks})", part):
                found[pk] = np.frombuffer(blob, dtype=np.float32).reshape(dimension)
        return found

    def embeddings_by_text(self, hashes: Sequence[str],
                           dimension: int) -> dict[tuple[str, str], np.ndarray]:
        """``(section, text) -> embedding`` of the stored chunks of the stored documents
        whose content hash is in ``hashes`` (whoever wrote them): the vectors a new copy of
        the same text would be given (``documents_by_hash`` finds them). One document per
        content hash and title (the title is part of a chunk's section): a text copied by
        250 writers is read once, not 250 times on every further copy."""
        found: dict[tuple[str, str], np.ndarray] = {}
        keys = sorted(set(hashes))
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            marks = ",".join("?" * len(part))
            for section, text, blob in self.connection.execute(
                    f"SELECT c.section, c.text, c.embedding FROM chunks c WHERE c.doc_pk IN "
                    f"(SELECT MIN(pk) FROM documents WHERE content_hash IN ({marks}) "
                    f"GROUP BY content_hash, title)", part):
                found.setdefault((section, text), np.frombuffer(blob, dtype=np.float32)
                                 .reshape(dimension))
        return found

    def all_embeddings(self, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self.connection.execute("SELECT pk, embedding FROM chunks ORDER BY pk").fetchall()
        ids = np.array([pk for pk, _ in rows], dtype=np.int64)
        vectors = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
        return ids, vectors.reshape(len(rows), dimension)

    def chunks_by_pk(self, pks: Sequence[int]) -> dict[int, StoredChunk]:
        found: dict[int, StoredChunk] = {}
        for start in range(0, len(pks), 500):
            part = list(pks[start:start + 500])
            marks = ",".join("?" * len(part))
            rows = self.connection.execute(
                "SELECT c.pk, d.doc_id, c.chunk_index, c.text, d.title, d.tier, d.writer, "
                "c.char_start, c.char_end, d.provenance, d.batch_id, d.ingested_at, "
                "a.version, a.data, c.embedding FROM chunks c JOIN documents d "
                "ON d.pk = c.doc_pk LEFT JOIN chunk_analysis a ON a.chunk_pk = c.pk "
                f"WHERE c.pk IN ({marks})", part)
            for *row, version, data, embedding in rows:
                found[row[0]] = StoredChunk(
                    *row, analysis=None if version is None else StoredAnalysis(version, data),
                    embedding=embedding)
        return found

    # -- chunk analyses (kb.analysis) -------------------------------------------------------
    def unanalysed_chunks(self, version: str, *, after: int = 0,
                          limit: int = 1000) -> list[tuple[int, str]]:
        """``(pk, text)`` of up to ``limit`` chunks above row id ``after`` whose stored
        analysis is missing or of another ``version``, in row order (the backfill's pages)."""
        return self.connection.execute(
            "SELECT c.pk, c.text FROM chunks c LEFT JOIN chunk_analysis a ON a.chunk_pk = c.pk "
            "WHERE c.pk > ? AND (a.version IS NULL OR a.version != ?) ORDER BY c.pk LIMIT ?",
            (after, version, limit)).fetchall()

    def analysis_counts(self, version: str) -> dict[str, int]:
        """Chunks whose analysis is ``current`` (of ``version``), ``stale`` or ``missing``."""
        total, current, stored = self.connection.execute(
            "SELECT (SELECT COUNT(*) FROM chunks), "
            "(SELECT COUNT(*) FROM chunk_analysis WHERE version = ?), "
            "(SELECT COUNT(*) FROM chunk_analysis)", (version,)).fetchone()
        return {"current": current, "stale": stored - current, "missing": total - stored}

    @staticmethod
    def write_analyses(connection: sqlite3.Connection, rows: Sequence[tuple[int, str, str]],
                       version: str) -> int:
        """Store ``(pk, text, analysis)`` rows inside ``connection``'s transaction, each only
        while its chunk still holds that text (a chunk deleted or rewritten since it was read
        gets no analysis). Returns how many were written."""
        written = 0
        for pk, text, data in rows:
            written += connection.execute(
                "INSERT OR REPLACE INTO chunk_analysis(chunk_pk, version, data) "
                "SELECT pk, ?, ? FROM chunks WHERE pk = ? AND text = ?",
                (version, data, pk, text)).rowcount
        return written
