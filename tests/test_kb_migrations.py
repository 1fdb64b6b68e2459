"""Named, recorded schema migrations of the KB's SQLite store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trishield.errors import KnowledgeBaseError
from trishield.kb import Document, KBSettings, KnowledgeBase
from trishield.kb.store import Store
from trishield.kb.store.migrations import MIGRATIONS, SCHEMA_VERSION

NAMES = [migration.name for migration in MIGRATIONS]

ORIGINAL_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE batches (
    id INTEGER PRIMARY KEY, created_at REAL NOT NULL, writer TEXT NOT NULL, tier TEXT NOT NULL,
    source TEXT NOT NULL, documents_added INTEGER NOT NULL,
    documents_duplicate INTEGER NOT NULL, chunks_added INTEGER NOT NULL);
CREATE TABLE documents (
    pk INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, content_hash TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL, source TEXT NOT NULL, origin TEXT NOT NULL, text TEXT NOT NULL,
    tier TEXT NOT NULL CHECK (tier IN ('trusted', 'neutral', 'untrusted')),
    writer TEXT NOT NULL, ingested_at REAL NOT NULL,
    batch_id INTEGER NOT NULL REFERENCES batches(id));
CREATE TABLE chunks (
    pk INTEGER PRIMARY KEY, doc_pk INTEGER NOT NULL REFERENCES documents(pk),
    chunk_index INTEGER NOT NULL, text TEXT NOT NULL, char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL, word_start INTEGER NOT NULL, word_end INTEGER NOT NULL,
    embedding BLOB NOT NULL, UNIQUE (doc_pk, chunk_index));
CREATE TABLE audit (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, action TEXT NOT NULL, writer TEXT NOT NULL,
    doc_id TEXT, content_hash TEXT, batch_id INTEGER, detail TEXT NOT NULL);
"""
"""The schema of the first TriShield release, verbatim but for layout (no ``IF NOT EXISTS``:
this test makes the tables itself)."""


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _original_kb(directory: Path) -> Path:
    """A KB as the first release left it: one batch, one document, no migrations recorded."""
    directory.mkdir()
    meta = KBSettings().as_meta() | {"schema_version": "1", "generation": "0",
                                     "created_at": "0"}
    with sqlite3.connect(directory / "kb.sqlite") as connection:
        connection.executescript(ORIGINAL_SCHEMA)
        connection.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        connection.execute("INSERT INTO batches VALUES (1, 0, 'alice', 'trusted', 'cli', 1, 0, 0)")
        connection.execute("INSERT INTO documents VALUES (1, 'old', 'h1', 'Old', 'cli', 'old.md', "
                           "'An old document.', 'trusted', 'alice', 0, 1)")
    return directory


def test_a_new_kb_records_every_migration(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        assert list(kb.store.migrations()) == NAMES
        assert kb.store.meta()["schema_version"] == str(SCHEMA_VERSION) == str(len(NAMES))


def test_an_original_kb_is_migrated_and_the_migration_recorded(tmp_path: Path) -> None:
    directory = _original_kb(tmp_path / "old-kb")
    with KnowledgeBase.open(directory) as kb:
        applied = kb.store.migrations()
        assert list(applied) == NAMES
        connection = kb.store.connection
        assert "documents_quarantined" in _columns(connection, "batches")
        assert "provenance" in _columns(connection, "documents")
        assert "provenance" in _columns(connection, "quarantine")
        assert "reason" in _columns(connection, "deleted_documents")
        stored = kb.store.document("old")
        assert stored["provenance"] == "" and stored["writer"] == "alice"
        assert kb.store.meta()["schema_version"] == str(SCHEMA_VERSION)
        report = kb.ingest([Document(id="new", text="A new document about refunds.")],
                           tier="neutral", writer="bob")
        assert report.added == ["new"]
        # 0010 counted the old document; its triggers counted the new one
        assert kb.store.documents_per_writer() == {"alice": 1, "bob": 1}
    with KnowledgeBase.open(directory) as kb:  # idempotent: nothing applied twice
        assert kb.store.migrations() == applied


def test_a_kb_made_before_migrations_were_recorded_is_adopted(tmp_path: Path) -> None:
    """A KB with today's tables but no ledger (every KB before this change) gets one."""
    directory = tmp_path / "kb"
    KnowledgeBase.open(directory, create=True).close()
    with sqlite3.connect(directory / "kb.sqlite") as connection:
        connection.execute("DROP TABLE schema_migrations")
    with KnowledgeBase.open(directory) as kb:
        assert list(kb.store.migrations()) == NAMES


def test_a_kb_from_a_newer_trishield_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "kb"
    KnowledgeBase.open(directory, create=True).close()
    with sqlite3.connect(directory / "kb.sqlite") as connection:
        connection.execute("INSERT INTO schema_migrations VALUES ('0099_from_the_future', 0)")
    with pytest.raises(KnowledgeBaseError, match=r"newer TriShield.*0099_from_the_future"):
        KnowledgeBase.open(directory)


def test_a_failed_migration_changes_nothing(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    directory = _original_kb(tmp_path / "old-kb")

    def explode(connection: sqlite3.Connection) -> None:
        raise RuntimeError("disk on fire")

    import trishield.kb.store.migrations as migrations

    broken = (*MIGRATIONS[:-1], migrations.Migration(MIGRATIONS[-1].name, (explode,)))
    monkeypatch.setattr(migrations, "MIGRATIONS", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        Store(directory / "kb.sqlite")
    with sqlite3.connect(directory / "kb.sqlite") as connection:
        assert "documents_quarantined" not in _columns(connection, "batches")
        tables = {row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "schema_migrations" not in tables and "quarantine" not in tables


def test_concurrent_opens_migrate_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "kb.sqlite"
    with ThreadPoolExecutor(max_workers=4) as pool:
        stores = list(pool.map(lambda _: Store(path), range(4)))
    try:
        assert list(stores[0].migrations()) == NAMES
        count = stores[0].connection.execute("SELECT COUNT(*) FROM schema_migrations")
        assert count.fetchone()[0] == len(NAMES)
    finally:
        for store in stores:
            store.close()


def test_open_waits_for_the_write_ahead_log_switch_sqlite_refuses_at_once(
        tmp_path: Path) -> None:
    """A fresh database held by another writer: SQLite refuses the switch to WAL at once
    (no busy handler), so the open must wait on its own and succeed once the lock goes."""
    import threading
    import time

    path = tmp_path / "kb.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other_writer (x)")
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: holder.execute("ROLLBACK"))
    release.start()
    started = time.monotonic()
    try:
        store = Store(path)
    finally:
        release.join()
        holder.close()
    try:
        assert time.monotonic() - started >= 0.25
        mode = store.connection.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal" and list(store.migrations()) == NAMES
    finally:
        store.close()


def test_open_gives_up_with_a_busy_error_when_the_lock_outlasts_the_timeout(
        tmp_path: Path) -> None:
    from trishield.errors import BusyError

    path = tmp_path / "kb.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE other_writer (x)")
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(BusyError, match=r"holds the SQLite lock .*waited 0.2 s"):
            Store(path, busy_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_0005_binds_old_documents_to_their_keys_and_frees_released_ids(tmp_path: Path) -> None:
    directory = _original_kb(tmp_path / "old-kb")
    with sqlite3.connect(directory / "kb.sqlite") as connection:
        connection.execute("INSERT INTO batches VALUES (2, 0, 'wes', 'neutral', "
                           "'api key 0123456789ab', 1, 0, 0)")
        connection.execute("INSERT INTO documents VALUES (2, 'api-doc', 'h2', '', '', 'api', "
                           "'Written through the API.', 'neutral', 'wes', 0, 2)")
        # a document quarantined by key feedfacecafe's batch, then released by ada
        connection.executescript("""
            CREATE TABLE quarantine (
                pk INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE,
                content_hash TEXT NOT NULL UNIQUE, title TEXT NOT NULL, source TEXT NOT NULL,
                origin TEXT NOT NULL, text TEXT NOT NULL, tier TEXT NOT NULL,
                writer TEXT NOT NULL, verdict TEXT NOT NULL, quarantined_at REAL NOT NULL,
                batch_id INTEGER NOT NULL REFERENCES batches(id), released_at REAL,
                released_by TEXT);
            INSERT INTO batches VALUES (3, 0, 'mallory', 'untrusted', 'api key feedfacecafe',
                                        0, 0, 0);
            INSERT INTO batches VALUES (4, 0, 'mallory', 'untrusted',
                                        'released from quarantine by ada', 1, 0, 0);
            INSERT INTO quarantine VALUES (1, 'freed', 'h5', '', '', '', 'z', 'untrusted',
                                           'mallory', '{}', 0, 3, 1, 'ada');
            INSERT INTO documents VALUES (3, 'freed', 'h5', '', '', '', 'z', 'untrusted',
                                          'mallory', 0, 4);
        """)
    Store(directory / "kb.sqlite").close()  # migrate
    with sqlite3.connect(directory / "kb.sqlite") as connection:
        connection.execute("INSERT INTO quarantine (doc_id, content_hash, title, source, origin, "
                           "text, tier, writer, verdict, quarantined_at, batch_id, released_at, "
                           "released_by, state) VALUES ('held', 'h3', '', '', '', 'x', "
                           "'untrusted', 'mallory', '{}', 0, 2, 1, 'ada', 'released')")
    with KnowledgeBase.open(directory) as kb:
        assert kb.store.document("api-doc")["writer_key"] == "0123456789ab"
        assert kb.store.document("old")["writer_key"] == ""
        assert kb.store.document("freed")["writer_key"] == "feedfacecafe"
        assert kb.store.quarantined(include_released=True)[0]["writer_key"] == "feedfacecafe"
        assert kb.store.quarantined(include_released=True)[0]["state"] == "released"
        unique = [row for row in kb.store.connection.execute("PRAGMA index_list(documents)")
                  if row[2]]
        assert len(unique) == 1  # doc_id only: the same text may be stored once per writer
        # a released row no longer reserves its id or its text
        kb.store.connection.execute(
            "INSERT INTO quarantine (doc_id, content_hash, title, source, origin, text, tier, "
            "writer, verdict, quarantined_at, batch_id) VALUES ('held', 'h3', '', '', '', 'x', "
            "'untrusted', 'mallory', '{}', 0, 2)")
        assert kb.store.counts()["quarantined"] == 1
        with pytest.raises(sqlite3.IntegrityError):  # but one id is held once at a time
            kb.store.connection.execute(
                "INSERT INTO quarantine (doc_id, content_hash, title, source, origin, text, "
                "tier, writer, verdict, quarantined_at, batch_id) VALUES ('held', 'h4', '', "
                "'', '', 'y', 'untrusted', 'mallory', '{}', 0, 2)")
        assert kb.store.connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert kb.store.connection.execute("PRAGMA foreign_key_check").fetchall() == []
