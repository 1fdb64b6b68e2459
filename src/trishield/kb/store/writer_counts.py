"""How many documents each writer stores, kept by triggers in the writing transaction.

Ring 1's reference sample at ingest is drawn per writer (``kb/screening/neighbourhood.py``): how
many of a writer's documents it takes depends on how many writers the KB holds, and which ones on
the writer's stored documents. Counting them with ``GROUP BY writer`` read every document on every
screened write (about 50 ms at 50,000 documents, most of a warm screen), though one write
changes one writer's documents. So ``writer_documents`` holds, per writer, its stored
documents and a *version* that grows with every insert or delete of one of them: a reader that
remembers a writer's version knows whether that writer's documents changed since, without
reading them.

Rows are never deleted (a writer that removed all its documents keeps a row with 0), so a
version never goes back and a remembered one cannot be mistaken for a later state. Quarantined
and deleted documents live in other tables and are not counted, as before.
"""

from __future__ import annotations

import sqlite3

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS writer_documents (
        writer TEXT PRIMARY KEY,
        documents INTEGER NOT NULL CHECK (documents >= 0),
        version INTEGER NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS writer_documents_insert AFTER INSERT ON documents BEGIN
        INSERT INTO writer_documents(writer, documents, version) VALUES (new.writer, 1, 1)
            ON CONFLICT(writer) DO UPDATE SET documents = documents + 1,
                                              version = version + 1;
    END""",
    """CREATE TRIGGER IF NOT EXISTS writer_documents_delete AFTER DELETE ON documents BEGIN
        UPDATE writer_documents SET documents = documents - 1, version = version + 1
            WHERE writer = old.writer;
    END""",
    """CREATE TRIGGER IF NOT EXISTS writer_documents_update AFTER UPDATE OF writer
        ON documents BEGIN
        UPDATE writer_documents SET documents = documents - 1, version = version + 1
            WHERE writer = old.writer;
        INSERT INTO writer_documents(writer, documents, version) VALUES (new.writer, 1, 1)
            ON CONFLICT(writer) DO UPDATE SET documents = documents + 1,
                                              version = version + 1;
    END""",
)


def install(connection: sqlite3.Connection) -> None:
    """Create the table and its triggers and count the stored documents (a migration step;
    a no-op where it is already there: the triggers have kept the counts since)."""
    connection.execute(SCHEMA[0])
    connection.execute("INSERT OR IGNORE INTO writer_documents(writer, documents, version) "
                       "SELECT writer, COUNT(*), 1 FROM documents GROUP BY writer")
    for statement in SCHEMA[1:]:
        connection.execute(statement)


def documents_per_writer(connection: sqlite3.Connection) -> dict[str, int]:
    """``writer -> stored documents`` for every writer that stores one, by name."""
    return dict(connection.execute(
        "SELECT writer, documents FROM writer_documents WHERE documents > 0 ORDER BY writer"))


def versions(connection: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """``writer -> (stored documents, version)`` for every writer that stores one."""
    return {writer: (documents, version) for writer, documents, version in connection.execute(
        "SELECT writer, documents, version FROM writer_documents WHERE documents > 0")}


def added_since(before: tuple[int, int], now: tuple[int, int]) -> int | None:
    """How many documents a writer added between two of its ``(documents, version)`` states,
    when it only added (every insert and delete moves the version by one, so the version grew
    by exactly the count's growth only without a delete); None when it also removed one."""
    added = now[0] - before[0]
    return added if added >= 0 and now[1] - before[1] == added else None
