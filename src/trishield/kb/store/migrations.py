"""The knowledge base's SQLite schema as an ordered list of named migrations.

A KB records in ``schema_migrations`` the name of every migration applied to it and when, so
its schema can be told from its data rather than guessed from which columns exist. Opening a KB
applies what is missing, in order, in one ``BEGIN IMMEDIATE`` transaction: a crash leaves the
schema as it was, and two processes opening the same KB at once migrate it once. A KB that
records a migration this version does not know was written by a newer TriShield and is refused
instead of being read with the wrong schema.

KBs made before migrations were recorded hold some prefix of these tables and columns and no
``schema_migrations``: every step is therefore written to be a no-op where its change is already
there (``CREATE TABLE IF NOT EXISTS``, a column added only when missing), so such a KB is
brought up to date and its history recorded like any other.

Append new migrations at the end; never edit or reorder a released one.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from trishield.errors import KnowledgeBaseError
from trishield.kb import analysis
from trishield.kb.store import change_log, disputes, writer_counts
from trishield.kb.store import fts as lexical_index

Step = Callable[[sqlite3.Connection], None]


def _create(statement: str) -> Step:
    def step(connection: sqlite3.Connection) -> None:
        connection.execute(statement)
    return step


def _add_column(table: str, column: str, definition: str) -> Step:
    def step(connection: sqlite3.Connection) -> None:
        columns = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
    return step


def _rebuild(table: str, definition: str, copy: str) -> Step:
    """Replace ``table`` by one made from ``definition`` (a ``CREATE TABLE {table}_new``),
    filled by ``copy`` (an ``INSERT INTO {table}_new ... SELECT ... FROM {table}``): SQLite
    cannot drop a constraint in place. Row ids are copied, so references stay valid."""
    def step(connection: sqlite3.Connection) -> None:
        connection.execute(f"DROP TABLE IF EXISTS {table}_new")
        connection.execute(definition)
        connection.execute(copy)
        connection.execute(f"DROP TABLE {table}")
        connection.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    return step


@dataclass(frozen=True)
class Migration:
    name: str
    steps: tuple[Step, ...]
    rebuilds_tables: bool = False
    """Whether a step replaces a table that others reference: the migration then runs with
    foreign keys off and checks them before it commits (SQLite's documented procedure)."""

    def apply(self, connection: sqlite3.Connection) -> None:
        for step in self.steps:
            step(connection)


def _key_of_batch(batch: str) -> str:
    """SQL for the API key that wrote batch ``batch``: API writes name it in the batch's
    source (``api key <id>``); '' for local writes."""
    return ("(SELECT CASE WHEN b.source LIKE 'api key %' THEN substr(b.source, 9) ELSE '' "
            f"END FROM batches b WHERE b.id = {batch})")


# the key that wrote a stored document before ownership was recorded: its batch's, or for a
# document released from quarantine, the key of the batch that quarantined it
_DOCUMENT_OWNER = (f"COALESCE(NULLIF({_key_of_batch('documents.batch_id')}, ''), "
                   f"(SELECT {_key_of_batch('q.batch_id')} FROM quarantine q "
                   "WHERE q.doc_id = documents.doc_id AND q.released_at IS NOT NULL "
                   "ORDER BY q.pk DESC LIMIT 1), '')")
_QUARANTINE_OWNER = f"COALESCE({_key_of_batch('quarantine.batch_id')}, '')"

MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", (
        _create("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
        _create("""CREATE TABLE IF NOT EXISTS batches (
            id INTEGER PRIMARY KEY,
            created_at REAL NOT NULL,
            writer TEXT NOT NULL,
            tier TEXT NOT NULL,
            source TEXT NOT NULL,
            documents_added INTEGER NOT NULL,
            documents_duplicate INTEGER NOT NULL,
            chunks_added INTEGER NOT NULL
        )"""),
        _create("""CREATE TABLE IF NOT EXISTS documents (
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
        )"""),
        _create("""CREATE TABLE IF NOT EXISTS chunks (
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
        )"""),
        _create("""CREATE TABLE IF NOT EXISTS audit (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            action TEXT NOT NULL,
            writer TEXT NOT NULL,
            doc_id TEXT,
            content_hash TEXT,
            batch_id INTEGER,
            detail TEXT NOT NULL
        )"""),
    )),
    Migration("0002_quarantine", (
        # Ring 1 at ingest: blocked documents are held, not dropped
        _add_column("batches", "documents_quarantined", "INTEGER NOT NULL DEFAULT 0"),
        _create("""CREATE TABLE IF NOT EXISTS quarantine (
            pk INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL UNIQUE,
            content_hash TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            origin TEXT NOT NULL,
            text TEXT NOT NULL,
            tier TEXT NOT NULL,
            writer TEXT NOT NULL,
            verdict TEXT NOT NULL,
            quarantined_at REAL NOT NULL,
            batch_id INTEGER NOT NULL REFERENCES batches(id),
            released_at REAL,
            released_by TEXT
        )"""),
    )),
    Migration("0003_provenance", (
        # the service's signed-publisher note; '' means "as before": no provenance recorded
        _add_column("documents", "provenance", "TEXT NOT NULL DEFAULT ''"),
        _add_column("quarantine", "provenance", "TEXT NOT NULL DEFAULT ''"),
    )),
    Migration("0004_deleted_documents", (
        _create("""CREATE TABLE IF NOT EXISTS deleted_documents (
            pk INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            origin TEXT NOT NULL,
            text TEXT NOT NULL,
            tier TEXT NOT NULL,
            writer TEXT NOT NULL,
            ingested_at REAL NOT NULL,
            batch_id INTEGER NOT NULL,
            provenance TEXT NOT NULL,
            deleted_at REAL NOT NULL,
            deleted_by TEXT NOT NULL,
            reason TEXT NOT NULL
        )"""),
    )),
    Migration("0005_ownership_and_quarantine_lifecycle", (
        # per-writer dedupe: the same text may be stored once per writer, so content_hash is
        # no longer unique; writer_key binds a document to the API key that wrote it ('' for
        # local writes) and signed keeps the verified publisher record (JSON, '' if none)
        _rebuild("documents", """CREATE TABLE documents_new (
            pk INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL UNIQUE,
            content_hash TEXT NOT NULL,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            origin TEXT NOT NULL,
            text TEXT NOT NULL,
            tier TEXT NOT NULL CHECK (tier IN ('trusted', 'neutral', 'untrusted')),
            writer TEXT NOT NULL,
            ingested_at REAL NOT NULL,
            batch_id INTEGER NOT NULL REFERENCES batches(id),
            provenance TEXT NOT NULL DEFAULT '',
            writer_key TEXT NOT NULL DEFAULT '',
            signed TEXT NOT NULL DEFAULT ''
        )""", "INSERT INTO documents_new (pk, doc_id, content_hash, title, source, origin, "
              "text, tier, writer, ingested_at, batch_id, provenance, writer_key) "
              "SELECT pk, doc_id, content_hash, title, source, origin, text, tier, writer, "
              "ingested_at, batch_id, provenance, "
              f"{_DOCUMENT_OWNER} FROM documents"),
        _create("CREATE INDEX IF NOT EXISTS documents_by_hash ON documents(content_hash)"),
        # the quarantine keeps its history: an id is reserved only while a row holds it, so
        # released, discarded and withdrawn rows no longer block the id or the text
        _rebuild("quarantine", """CREATE TABLE quarantine_new (
            pk INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            origin TEXT NOT NULL,
            text TEXT NOT NULL,
            tier TEXT NOT NULL,
            writer TEXT NOT NULL,
            verdict TEXT NOT NULL,
            quarantined_at REAL NOT NULL,
            batch_id INTEGER NOT NULL REFERENCES batches(id),
            released_at REAL,
            released_by TEXT,
            provenance TEXT NOT NULL DEFAULT '',
            writer_key TEXT NOT NULL DEFAULT '',
            signed TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'held'
                CHECK (state IN ('held', 'released', 'discarded', 'withdrawn')),
            closed_at REAL,
            closed_by TEXT,
            closed_reason TEXT NOT NULL DEFAULT ''
        )""", "INSERT INTO quarantine_new (pk, doc_id, content_hash, title, source, origin, "
              "text, tier, writer, verdict, quarantined_at, batch_id, released_at, "
              "released_by, provenance, writer_key, state, closed_at, closed_by) "
              "SELECT pk, doc_id, content_hash, title, source, origin, text, tier, writer, "
              "verdict, quarantined_at, batch_id, released_at, released_by, provenance, "
              f"{_QUARANTINE_OWNER}, "
              "CASE WHEN released_at IS NULL THEN 'held' ELSE 'released' END, "
              "released_at, released_by FROM quarantine"),
        _create("CREATE UNIQUE INDEX IF NOT EXISTS quarantine_held_id ON quarantine(doc_id) "
                "WHERE state = 'held'"),
        _create("CREATE INDEX IF NOT EXISTS quarantine_by_hash ON quarantine(content_hash)"),
        _add_column("deleted_documents", "writer_key", "TEXT NOT NULL DEFAULT ''"),
        _add_column("deleted_documents", "signed", "TEXT NOT NULL DEFAULT ''"),
    ), rebuilds_tables=True),
    Migration("0006_document_versions", (
        # issue 18: re-ingesting a changed file stores a new version of its document; the
        # retired versions are kept whole (text, provenance, who retired them and when) so an
        # update can be reviewed and undone, and front matter metadata is stored as JSON
        _add_column("documents", "version", "INTEGER NOT NULL DEFAULT 1"),
        _add_column("documents", "metadata", "TEXT NOT NULL DEFAULT '{}'"),
        _add_column("quarantine", "metadata", "TEXT NOT NULL DEFAULT '{}'"),
        _add_column("deleted_documents", "version", "INTEGER NOT NULL DEFAULT 1"),
        _add_column("deleted_documents", "metadata", "TEXT NOT NULL DEFAULT '{}'"),
        _create("""CREATE TABLE IF NOT EXISTS document_versions (
            pk INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            origin TEXT NOT NULL,
            text TEXT NOT NULL,
            tier TEXT NOT NULL,
            writer TEXT NOT NULL,
            writer_key TEXT NOT NULL,
            signed TEXT NOT NULL,
            provenance TEXT NOT NULL,
            metadata TEXT NOT NULL,
            ingested_at REAL NOT NULL,
            batch_id INTEGER NOT NULL,
            retired_at REAL NOT NULL,
            retired_by TEXT NOT NULL,
            replaced_by TEXT NOT NULL,
            UNIQUE (doc_id, version)
        )"""),
        _create("CREATE INDEX IF NOT EXISTS deleted_documents_by_id "
                "ON deleted_documents(doc_id)"),
    )),
    Migration("0007_incremental_indexes", (
        # issue 19: the chunk change log that dense indexes catch up from, and the lexical
        # index as an FTS5 table maintained by triggers in the writing transaction
        change_log.install,
        lexical_index.install,
    )),
    Migration("0008_chunk_analysis", (
        # issue 19: Ring 1's query-independent analysis of each chunk, written with the chunk
        # and deleted with it (triggers); chunks stored before it get theirs from the backfill
        analysis.install,
    )),
    Migration("0009_documents_by_writer", (
        # issue 19: Ring 1's neighbourhood at ingest reads each reference writer's chunks
        # (kb/screening/neighbourhood.py); without an index every writer was a scan of all
        # documents, so one screened ingest into a KB of 1,000 writers took 23 s at 5,000 chunks
        _create("CREATE INDEX IF NOT EXISTS documents_by_writer ON documents(writer)"),
    )),
    Migration("0010_writer_documents", (
        # issue 19: per-writer document counts and versions kept by triggers, so Ring 1's
        # reference sample is redrawn only for writers whose documents changed, not from a
        # read of every document on every screened write (kb/store/writer_counts.py)
        writer_counts.install,
    )),
    Migration("0011_chunk_sections", (
        # issue 48: ``sections`` chunking gives each chunk its document's title and heading,
        # embedded and lexically indexed with its text (a man page's option entry never
        # names its command); older chunks' section is ""
        _add_column("chunks", "section", "TEXT NOT NULL DEFAULT ''"),
        lexical_index.install_sections,
    )),
    Migration("0012_disputes", (
        # issue 50: conflicts between writers that the evidence met (at question time, or a
        # tampered copy at ingest), kept for a person to settle (kb/store/disputes.py)
        disputes.install,
    )),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The number of migrations a current KB has applied (kept in ``meta.schema_version`` too)."""

_LEDGER = """CREATE TABLE IF NOT EXISTS schema_migrations (
    name TEXT PRIMARY KEY,
    applied_at REAL NOT NULL
)"""


def applied(connection: sqlite3.Connection) -> dict[str, float]:
    """``name -> applied_at`` of the migrations recorded in this database."""
    exists = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                "AND name = 'schema_migrations'").fetchone()
    if not exists:
        return {}
    return dict(connection.execute(
        "SELECT name, applied_at FROM schema_migrations ORDER BY name"))


def _refuse_newer(recorded: dict[str, float], where: str) -> None:
    known = {migration.name for migration in MIGRATIONS}
    unknown = sorted(set(recorded) - known)
    if unknown:
        raise KnowledgeBaseError(
            f"{where} was written by a newer TriShield: its schema has migration(s) "
            f"{', '.join(unknown)}, which this version does not know (it knows up to "
            f"{MIGRATIONS[-1].name}). Upgrade TriShield to open it.")


def migrate(connection: sqlite3.Connection, where: str) -> list[str]:
    """Apply the missing migrations in one transaction; returns the names applied.

    ``connection`` must be in autocommit mode (``isolation_level=None``); ``where`` names the
    database in errors. Reading first keeps an up-to-date KB from taking the write lock.
    """
    recorded = applied(connection)
    _refuse_newer(recorded, where)
    pending = [migration for migration in MIGRATIONS if migration.name not in recorded]
    if not pending:
        return []
    keys_were_on = connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    if any(migration.rebuilds_tables for migration in pending):
        connection.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction
    try:
        return _migrate(connection, where)
    finally:
        if keys_were_on:
            connection.execute("PRAGMA foreign_keys=ON")


def _migrate(connection: sqlite3.Connection, where: str) -> list[str]:
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(_LEDGER)
        recorded = applied(connection)  # another process may have migrated meanwhile
        _refuse_newer(recorded, where)
        done = []
        for migration in MIGRATIONS:
            if migration.name in recorded:
                continue
            migration.apply(connection)
            connection.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                               (migration.name, time.time()))
            done.append(migration.name)
        connection.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
        broken = connection.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise KnowledgeBaseError(f"{where}: migrating would break {len(broken)} "
                                     f"reference(s) (first: {broken[0]}); nothing was changed")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return done
