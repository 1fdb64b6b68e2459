"""The SQLite half of a knowledge base: documents, chunks, embeddings, batches and audit log.

SQLite is the source of truth. A batch of documents is written in one transaction, so a crash
or ``kill -9`` leaves the database as it was before the batch or after it. The ``generation``
counter in ``meta`` moves forward in that same transaction. Triggers on ``chunks`` keep the
lexical index (FTS5, :mod:`trishield.kb.store.fts`) and the chunk change log that the dense
index follows (:mod:`trishield.kb.store.change_log`) in that same transaction too.
"""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from trishield.errors import (
    BusyError,
    ConflictError,
    KnowledgeBaseError,
    ReadOnlyError,
    StorageFullError,
)
from trishield.kb.analysis import StoredAnalysis
from trishield.kb.documents import Chunk, Document
from trishield.kb.store import change_log, writer_counts
from trishield.kb.store import fts as lexical_index
from trishield.kb.store.migrations import MIGRATIONS, applied, migrate
from trishield.kb.store.migrations import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported
from trishield.kb.store.ownership import Claim

BUSY_TIMEOUT_S = 5.0
"""How long a statement waits for another process's SQLite lock before :class:`BusyError`:
long enough for any one commit of ours, short enough that a request is answered, not hung."""


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


class Store:
    """Thin, typed access to the knowledge-base database.

    The connection may be used from any thread (``check_same_thread=False``) but by one at a
    time: the HTTP service lends each KB handle to one worker thread at a time from a pool.
    """

    def __init__(self, path: Path, *, read_only: bool = False,
                 busy_timeout: float = BUSY_TIMEOUT_S,
                 clock: Callable[[], float] = time.time):
        self.path = path
        self.clock = clock
        """Unix seconds for every time the store writes (ingest, audit, quarantine, delete):
        the wall clock; a simulation (``benchmarks/evidence_probe.py``'s patient sleepers)
        gives another, so that a KB built in minutes can hold a history of weeks."""
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        self.connection = (_open_read_only(path, busy_timeout) if read_only else
                           sqlite3.connect(path, isolation_level=None, timeout=busy_timeout,
                                           check_same_thread=False))
        try:
            with storage_errors(f"opening {path}", waited=busy_timeout):
                if not read_only:
                    _enter_wal(self.connection, busy_timeout)
                    self.connection.execute("PRAGMA synchronous=FULL")
                self.connection.execute("PRAGMA foreign_keys=ON")
                lexical_index.register_analyzer(self.connection)
                if read_only:
                    pending = [m.name for m in MIGRATIONS if m.name not in applied(self.connection)]
                    if pending:
                        raise ReadOnlyError(f"{path} needs schema migration(s) "
                                            f"{', '.join(pending)}, which need write access; "
                                            "open it once where it can be written")
                else:
                    migrate(self.connection, str(path))
                    self._check_analyzer()
        except BaseException:
            self.connection.close()
            raise

    def _check_analyzer(self) -> None:
        """Rebuild the lexical table when it was built with another analyzer (its contentless
        rows could not even be deleted correctly otherwise)."""
        if self.meta().get("lexical_analyzer") == lexical_index.ANALYZER:
            return
        with self.transaction() as connection:
            if self.meta().get("lexical_analyzer") != lexical_index.ANALYZER:
                lexical_index.reindex(connection)

    def migrations(self) -> dict[str, float]:
        """``name -> applied_at`` (epoch seconds) of every schema migration applied."""
        return applied(self.connection)

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception (a failed ``COMMIT`` included)
        rolls the whole batch back, and SQLite's storage errors become TriShield's
        (:func:`storage_errors`): a full disk here means nothing was written. A constraint
        the checks before a write should have caught (a unique id) becomes a
        :class:`ConflictError` that says nothing was written, never a raw ``IntegrityError``.
        """
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is opened read-only; writes are refused")
        with storage_errors(f"writing {self.path}", waited=self.busy_timeout):
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                yield self.connection
                self.connection.execute("COMMIT")
            except sqlite3.IntegrityError as error:
                if self.connection.in_transaction:
                    self.connection.execute("ROLLBACK")
                raise ConflictError(f"the write conflicts with what the knowledge base holds "
                                    f"({error}); nothing was written") from error
            except BaseException:
                if self.connection.in_transaction:
                    self.connection.execute("ROLLBACK")
                raise

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

    # -- quarantine -------------------------------------------------------------------------
    _QUARANTINE_COLUMNS = ("doc_id", "title", "source", "origin", "text", "tier", "writer",
                           "verdict", "quarantined_at", "batch_id", "released_at",
                           "released_by", "content_hash", "provenance", "writer_key", "signed",
                           "state", "closed_at", "closed_by", "closed_reason", "metadata")

    def quarantined(self, *, include_released: bool = False) -> list[dict]:
        """Documents held in quarantine; with ``include_released``, its whole history
        (released, discarded and withdrawn ones too)."""
        where = "" if include_released else "WHERE state = 'held'"
        rows = self.connection.execute(
            f"SELECT {', '.join(self._QUARANTINE_COLUMNS)} FROM quarantine {where} ORDER BY pk")
        return [self._quarantine_row(row) for row in rows]

    def quarantined_document(self, doc_id: str) -> dict | None:
        """The quarantine row that holds ``doc_id`` now, else its latest closed one."""
        row = self.connection.execute(
            f"SELECT {', '.join(self._QUARANTINE_COLUMNS)} FROM quarantine WHERE doc_id = ? "
            "ORDER BY state = 'held' DESC, pk DESC LIMIT 1", (doc_id,)).fetchone()
        return None if row is None else self._quarantine_row(row)

    def _quarantine_row(self, row: tuple) -> dict:
        record = dict(zip(self._QUARANTINE_COLUMNS, row, strict=True))
        record["verdict"] = json.loads(record["verdict"])
        record["metadata"] = json.loads(record["metadata"])
        record["id"] = record.pop("doc_id")
        return record

    def held_ids(self, *, writer: str | None = None) -> list[str]:
        """Ids held in quarantine now (oldest first), all or one ``writer``'s."""
        rows = self.connection.execute(
            "SELECT doc_id FROM quarantine WHERE state = 'held' AND (? IS NULL OR writer = ?) "
            "ORDER BY pk", (writer, writer))
        return [doc_id for (doc_id,) in rows]

    def close_quarantined(self, connection: sqlite3.Connection, doc_id: str, *, state: str,
                          by: str, reason: str) -> bool:
        """End the hold on ``doc_id`` (``released``, ``discarded`` by an admin or
        ``withdrawn`` by its writer), audited; the row stays as history and the id is free.
        Returns whether a held row was closed."""
        row = connection.execute("SELECT pk FROM quarantine WHERE doc_id = ? AND state = 'held'",
                                 (doc_id,)).fetchone()
        if row is None:
            return False
        now = self.clock()
        released = state == "released"
        connection.execute(
            "UPDATE quarantine SET state = ?, closed_at = ?, closed_by = ?, closed_reason = ?, "
            "released_at = ?, released_by = ? WHERE pk = ?",
            (state, now, by, reason, now if released else None, by if released else None,
             row[0]))
        action = {"released": "release", "discarded": "discard", "withdrawn": "withdraw"}[state]
        detail = {"released_by": by} if released else {"by": by, "reason": reason,
                                                      "from": "quarantine"}
        connection.execute(
            "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
            "SELECT ?, ?, ?, doc_id, content_hash, NULL, ? FROM quarantine WHERE pk = ?",
            (now, action, by, json.dumps(detail, sort_keys=True), row[0]))
        return True

    def audit(self, connection: sqlite3.Connection, *, action: str, writer: str,
              doc_id: str | None, content_hash: str | None, detail: dict,
              batch_id: int | None = None) -> None:
        """One audit entry inside ``connection``'s transaction."""
        connection.execute(
            "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.clock(), action, writer, doc_id, content_hash, batch_id,
             json.dumps(detail, sort_keys=True)))

    # -- index change log (kb.change_log) ---------------------------------------------------
    def index_position(self) -> change_log.Position:
        """Where the chunk change log stands: what an index in step with the rows reflects."""
        return change_log.position(self.connection)

    def index_delta(self, since: int, upto: int, dimension: int) -> change_log.Delta:
        """The chunk changes in ``(since, upto]``, with the added rows' embeddings and texts."""
        return change_log.delta(self.connection, since, upto, dimension)

    def prune_index_log(self, through: int) -> None:
        """Forget the change log up to ``through`` (a snapshot at ``through`` is saved)."""
        with self.transaction() as connection:
            change_log.prune(connection, through)

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

    _DOCUMENT_COLUMNS = ("doc_id", "title", "source", "origin", "text", "tier", "writer",
                         "ingested_at", "batch_id", "content_hash", "provenance", "writer_key",
                         "signed", "version", "metadata")

    def document(self, doc_id: str) -> dict | None:
        """The stored document ``doc_id`` (its current version) with its metadata, or None."""
        row = self.connection.execute(
            f"SELECT {', '.join(self._DOCUMENT_COLUMNS)} FROM documents WHERE doc_id = ?",
            (doc_id,)).fetchone()
        if row is None:
            return None
        record = dict(zip(self._DOCUMENT_COLUMNS, row, strict=True))
        record["id"] = record.pop("doc_id")
        record["metadata"] = json.loads(record["metadata"])
        return record

    def list_documents(self, *, writer: str | None = None, prefix: str | None = None,
                       limit: int | None = None) -> list[dict]:
        """Stored documents (oldest first) without their text: id, title, writer, tier,
        version, source, when, and how many chunks; optionally one ``writer``'s, or those
        whose id starts with ``prefix``."""
        where, args = [], []
        if writer is not None:
            where.append("d.writer = ?")
            args.append(writer)
        if prefix:
            # a range instead of LIKE: ids may hold % and _, which LIKE would read as patterns
            where.append("d.doc_id >= ? AND d.doc_id < ?")
            args.extend((prefix, prefix + "\U0010ffff"))
        rows = self.connection.execute(
            "SELECT d.doc_id, d.title, d.writer, d.tier, d.version, d.source, d.ingested_at, "
            "d.content_hash, (SELECT COUNT(*) FROM chunks c WHERE c.doc_pk = d.pk) "
            f"FROM documents d {'WHERE ' + ' AND '.join(where) if where else ''} "
            "ORDER BY d.pk LIMIT ?", (*args, -1 if limit is None else limit))
        keys = ("id", "title", "writer", "tier", "version", "source", "ingested_at",
                "content_hash", "chunks")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def chunk_count(self, doc_id: str) -> int:
        row = self.connection.execute(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.pk = c.doc_pk "
            "WHERE d.doc_id = ?", (doc_id,)).fetchone()
        return row[0]

    def retired_versions(self, doc_id: str) -> list[dict]:
        """The earlier versions of ``doc_id`` that updates retired, newest first (no text)."""
        rows = self.connection.execute(
            "SELECT version, content_hash, title, source, writer, tier, ingested_at, "
            "retired_at, retired_by, replaced_by FROM document_versions WHERE doc_id = ? "
            "ORDER BY version DESC", (doc_id,))
        keys = ("version", "content_hash", "title", "source", "writer", "tier",
                "ingested_at", "retired_at", "retired_by", "replaced_by")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def retire_document(self, connection: sqlite3.Connection, doc_id: str, *, by: str,
                        replaced_by: str, source: str) -> int | None:
        """Move the stored ``doc_id`` to ``document_versions`` inside ``connection``'s
        transaction (its chunks leave the searchable tables), audited as an ``update``; the
        caller writes the new version in the same transaction. Returns the retired version,
        or ``None`` when no such document is stored."""
        row = connection.execute("SELECT pk, version FROM documents WHERE doc_id = ?",
                                 (doc_id,)).fetchone()
        if row is None:
            return None
        pk, version = row
        now = self.clock()
        connection.execute(
            "INSERT INTO document_versions(doc_id, version, content_hash, title, source, "
            "origin, text, tier, writer, writer_key, signed, provenance, metadata, "
            "ingested_at, batch_id, retired_at, retired_by, replaced_by) "
            "SELECT doc_id, version, content_hash, title, source, origin, text, tier, writer, "
            "writer_key, signed, provenance, metadata, ingested_at, batch_id, ?, ?, ? "
            "FROM documents WHERE pk = ?", (now, by, replaced_by, pk))
        chunks = connection.execute("DELETE FROM chunks WHERE doc_pk = ?", (pk,)).rowcount
        connection.execute(
            "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
            "SELECT ?, 'update', ?, doc_id, content_hash, batch_id, ? FROM documents "
            "WHERE pk = ?", (now, by, json.dumps({
                "retired_version": version, "new_version": version + 1,
                "new_content_hash": replaced_by, "chunks_retired": chunks, "source": source},
                sort_keys=True), pk))
        connection.execute("DELETE FROM documents WHERE pk = ?", (pk,))
        return version

    @staticmethod
    def _next_version(connection: sqlite3.Connection, doc_id: str) -> int:
        """1 for a new id; after an update or a delete, one more than any earlier version, so
        a version number names one text of an id for good."""
        row = connection.execute(
            "SELECT MAX(v) FROM (SELECT MAX(version) AS v FROM document_versions "
            "WHERE doc_id = ? UNION ALL SELECT MAX(version) FROM deleted_documents "
            "WHERE doc_id = ?)", (doc_id, doc_id)).fetchone()
        return (row[0] or 0) + 1

    def deleted_document(self, doc_id: str) -> dict | None:
        """The latest tombstone of ``doc_id`` (who deleted it, when, why), without its text."""
        row = self.connection.execute(
            "SELECT doc_id, title, tier, writer, content_hash, provenance, deleted_at, "
            "deleted_by, reason, writer_key, signed FROM deleted_documents WHERE doc_id = ? "
            "ORDER BY pk DESC LIMIT 1", (doc_id,)).fetchone()
        if row is None:
            return None
        keys = ("id", "title", "tier", "writer", "content_hash", "provenance", "deleted_at",
                "deleted_by", "reason", "writer_key", "signed")
        return dict(zip(keys, row, strict=True))

    def delete_document(self, connection: sqlite3.Connection, doc_id: str, *, by: str,
                        reason: str) -> dict | None:
        """Soft delete inside ``connection``'s transaction: the document and its chunks leave
        the searchable tables, a full copy goes to ``deleted_documents`` (so the decision can be
        reviewed and undone by re-ingesting), and the audit log records who did it.

        Returns the tombstone, or ``None`` when no such document is stored."""
        row = connection.execute("SELECT pk FROM documents WHERE doc_id = ?",
                                 (doc_id,)).fetchone()
        if row is None:
            return None
        now = self.clock()
        connection.execute(
            "INSERT INTO deleted_documents(doc_id, content_hash, title, source, origin, text, "
            "tier, writer, ingested_at, batch_id, provenance, deleted_at, deleted_by, reason, "
            "writer_key, signed, version, metadata) "
            "SELECT doc_id, content_hash, title, source, origin, text, tier, writer, "
            "ingested_at, batch_id, provenance, ?, ?, ?, writer_key, signed, version, "
            "metadata FROM documents WHERE pk = ?",
            (now, by, reason, row[0]))
        chunks = connection.execute("DELETE FROM chunks WHERE doc_pk = ?", (row[0],)).rowcount
        connection.execute(
            "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
            "SELECT ?, 'delete', ?, doc_id, content_hash, batch_id, ? FROM documents "
            "WHERE pk = ?", (now, by, json.dumps({"reason": reason, "chunks": chunks},
                                                 sort_keys=True), row[0]))
        connection.execute("DELETE FROM documents WHERE pk = ?", (row[0],))
        self.set_meta({"generation": str(self._next_generation(connection))}, connection)
        return self.deleted_document(doc_id)

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
        duplicates: Sequence[dict[str, str]] = (),
        quarantined: Sequence[tuple[Document, dict]] = (),
        writer_key: str = "",
        analyses: Sequence[str] | None = None,
        analysis_version: str = "",
    ) -> tuple[int, np.ndarray]:
        """Insert one batch inside ``connection``'s open transaction.

        ``analyses`` (one per chunk, in embedding order, by the analyser ``analysis_version``)
        are stored with the chunks (:mod:`trishield.kb.analysis`).

        ``duplicates`` (``{"id", "same_text_as", "content_hash", ...}``) are not stored but
        audited, so a write that changed nothing still leaves a trace. Returns the batch id
        and the row ids of the inserted chunks, in embedding order.
        """
        now = self.clock()
        total_chunks = sum(len(per_document) for per_document in chunks)
        if analyses is not None and (len(analyses) != total_chunks or not analysis_version):
            raise KnowledgeBaseError(f"{len(analyses)} chunk analyses (version "
                                     f"{analysis_version!r}) for {total_chunks} chunks; "
                                     "nothing was written")
        batch_id = connection.execute(
            "INSERT INTO batches(created_at, writer, tier, source, documents_added, "
            "documents_duplicate, chunks_added) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (now, writer, tier, source, len(documents), len(duplicates),
             total_chunks)).lastrowid
        connection.execute("UPDATE batches SET documents_quarantined = ? WHERE id = ?",
                           (len(quarantined), batch_id))
        for document, verdict in quarantined:
            document_tier = document.tier or tier
            connection.execute(
                "INSERT INTO quarantine(doc_id, content_hash, title, source, origin, text, tier, "
                "writer, verdict, quarantined_at, batch_id, provenance, writer_key, signed, "
                "metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (document.id, document.content_hash, document.title, document.source,
                 document.origin, document.text, document_tier, writer,
                 json.dumps(verdict, sort_keys=True), now, batch_id, document.provenance,
                 writer_key, document.signed, document.metadata_json))
            connection.execute(
                "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
                "VALUES (?, 'quarantine', ?, ?, ?, ?, ?)",
                (now, writer, document.id, document.content_hash, batch_id,
                 json.dumps(_provenance_detail(document) | {
                     "tier": document_tier, "c": verdict.get("c"),
                     "reasons": verdict.get("reasons", [])}, sort_keys=True)))
        chunk_ids: list[int] = []
        row = 0
        for document, document_chunks in zip(documents, chunks, strict=True):
            document_tier = document.tier or tier
            version = self._next_version(connection, document.id)
            doc_pk = connection.execute(
                "INSERT INTO documents(doc_id, content_hash, title, source, origin, text, tier, "
                "writer, ingested_at, batch_id, provenance, writer_key, signed, version, "
                "metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (document.id, document.content_hash, document.title, document.source,
                 document.origin, document.text, document_tier, writer, now, batch_id,
                 document.provenance, writer_key, document.signed, version,
                 document.metadata_json)).lastrowid
            for chunk in document_chunks:
                chunk_ids.append(connection.execute(
                    "INSERT INTO chunks(doc_pk, chunk_index, text, char_start, char_end, "
                    "word_start, word_end, embedding, section) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc_pk, chunk.index, chunk.text, chunk.char_start, chunk.char_end,
                     chunk.word_start, chunk.word_end, embeddings[row].tobytes(),
                     chunk.section)).lastrowid)
                if analyses is not None:
                    connection.execute(
                        "INSERT OR REPLACE INTO chunk_analysis(chunk_pk, version, data) "
                        "VALUES (?, ?, ?)", (chunk_ids[-1], analysis_version, analyses[row]))
                row += 1
            connection.execute(
                "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
                "VALUES (?, 'ingest', ?, ?, ?, ?, ?)",
                (now, writer, document.id, document.content_hash, batch_id,
                 json.dumps(_provenance_detail(document) | {
                     "tier": document_tier, "chunks": len(document_chunks),
                     "origin": document.origin, "version": version}, sort_keys=True)))
        for duplicate in duplicates:
            self.audit(connection, action="duplicate", writer=writer, doc_id=duplicate["id"],
                       content_hash=duplicate["content_hash"], batch_id=batch_id,
                       detail={k: v for k, v in duplicate.items()
                               if k not in ("id", "content_hash")})
        generation = self._next_generation(connection)
        self.set_meta({"generation": str(generation)}, connection)
        return batch_id, np.array(chunk_ids, dtype=np.int64)

    @staticmethod
    def _next_generation(connection: sqlite3.Connection) -> int:
        row = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return (int(row[0]) if row else 0) + 1


def _open_read_only(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A read-only connection that writes nothing, not even WAL bookkeeping.

    ``mode=ro`` still needs the ``-shm`` file, which a read-only directory cannot hold; then,
    if no write-ahead log is pending, the file is opened ``immutable`` (nothing can change it
    while the directory cannot be written). A pending log would be ignored that way, so it is
    refused instead of serving old rows."""
    quoted = urllib.parse.quote(str(path.resolve()))
    connection = sqlite3.connect(f"file:{quoted}?mode=ro", uri=True, isolation_level=None,
                                 timeout=busy_timeout, check_same_thread=False)
    try:
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return connection
    except sqlite3.OperationalError:
        connection.close()
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise ReadOnlyError(f"{path} is read-only and has a write-ahead log ({wal.name}) "
                            "that was never checkpointed; open it once where it can be "
                            "written, or copy the directory somewhere writable")
    connection = sqlite3.connect(f"file:{quoted}?mode=ro&immutable=1", uri=True,
                                 isolation_level=None, timeout=busy_timeout,
                                 check_same_thread=False)
    try:
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        connection.close()
        raise KnowledgeBaseError(f"cannot open {path} read-only: {error}") from None
    return connection


def _enter_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the database in write-ahead-log mode, waiting up to ``busy_timeout`` for it.

    Why a loop of our own: switching a fresh (rollback-journal) database to WAL needs an
    exclusive lock, and when several connections open it at once SQLite answers the loser
    "database is locked" at once instead of calling the busy handler (it would deadlock
    otherwise: each holds the shared lock the other waits on). Retrying after the winner's
    switch finds the database in WAL already, a no-op. A database already in WAL mode
    returns at the first try."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.005
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as error:
            if not any(text in str(error).lower() for text in _BUSY):
                raise
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


_FULL = ("database or disk is full", "disk is full")
_BUSY = ("database is locked", "database is busy", "database table is locked")
_READ_ONLY = ("attempt to write a readonly database", "readonly database",
              "unable to open database file")


@contextmanager
def storage_errors(what: str, *, waited: float = BUSY_TIMEOUT_S) -> Iterator[None]:
    """SQLite's storage failures as TriShield errors that say what happened, never a raw
    ``OperationalError``: a full disk (:class:`StorageFullError`, nothing written), another
    process's lock outlasting the busy timeout (:class:`BusyError`), a database that cannot
    be written (:class:`ReadOnlyError`)."""
    try:
        yield
    except sqlite3.OperationalError as error:
        message = str(error).lower()
        if any(text in message for text in _FULL):
            raise StorageFullError(f"{what}: the disk is full; nothing was written") from None
        if any(text in message for text in _BUSY):
            raise BusyError(f"{what}: another process holds the SQLite lock of the knowledge "
                            f"base (waited {waited:g} s); nothing was written",
                            retry_after=5) from None
        if any(text in message for text in _READ_ONLY):
            raise ReadOnlyError(f"{what}: the database cannot be written ({error})") from None
        raise


def _provenance_detail(document: Document) -> dict[str, str]:
    """The provenance verdict for an audit entry (absent for plain CLI ingests)."""
    return {"provenance": document.provenance} if document.provenance else {}
