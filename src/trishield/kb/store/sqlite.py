"""The SQLite half of a knowledge base: documents, chunks, embeddings, batches and audit log.

:class:`Store` is the connection, its transactions, the meta table and the batch write; its
read queries are :class:`~trishield.kb.store.queries.StoreQueries` and its record keeping
(quarantine, versions, deletions, audit) :class:`~trishield.kb.store.records.StoreRecords`,
mixed in so that every caller keeps one ``Store``.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from trishield.errors import (
    BusyError,
    ConflictError,
    KnowledgeBaseError,
    ReadOnlyError,
    StorageFullError,
)
from trishield.kb.documents import Chunk, Document
from trishield.kb.store import change_log
from trishield.kb.store import fts as lexical_index
from trishield.kb.store.migrations import MIGRATIONS, applied, migrate
from trishield.kb.store.migrations import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported
from trishield.kb.store.queries import StoredChunk as StoredChunk  # re-exported
from trishield.kb.store.queries import StoreQueries
from trishield.kb.store.records import StoreRecords

BUSY_TIMEOUT_S = 5.0
"""How long a statement waits for another process's SQLite lock before :class:`BusyError`:
long enough for any one commit of ours, short enough that a request is answered, not hung."""


class Store(StoreQueries, StoreRecords):
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

    # -- quarantine -------------------------------------------------------------------------
    _QUARANTINE_COLUMNS = ("doc_id", "title", "source", "origin", "text", "tier", "writer",
                           "verdict", "quarantined_at", "batch_id", "released_at",
                           "released_by", "content_hash", "provenance", "writer_key", "signed",
                           "state", "closed_at", "closed_by", "closed_reason", "metadata")

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

    _DOCUMENT_COLUMNS = ("doc_id", "title", "source", "origin", "text", "tier", "writer",
                         "ingested_at", "batch_id", "content_hash", "provenance", "writer_key",
                         "signed", "version", "metadata")

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
