"""The chunk change log: how indexes outside SQLite follow the database one write at a time.

Triggers on ``chunks`` append ``(seq, chunk_pk, op)`` to ``index_log`` inside the transaction
that inserts or deletes the chunk, so the log can never disagree with the rows. ``seq`` is an
``AUTOINCREMENT`` key: it only grows, even after old entries are pruned. An index that knows
which ``seq`` it reflects (its *position*) catches up by applying the entries after it, and a
reader in another process notices a change with one indexed ``MAX(seq)`` lookup.

Entries at or below ``meta.index_log_pruned`` have been deleted (after a saved dense snapshot
made them unnecessary); an index whose position is older than that must start again from a
snapshot or from the ``chunks`` table itself.

Chunk row ids can be reused by SQLite (delete the newest chunk, insert another), so an
index applies a delta as "remove every pk the delta removed, then add every pk whose last
entry is an add and whose row exists": the right result whatever the interleaving.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS index_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        chunk_pk INTEGER NOT NULL,
        op TEXT NOT NULL CHECK (op IN ('add', 'remove'))
    )""",
    """CREATE TRIGGER IF NOT EXISTS chunks_logged_insert AFTER INSERT ON chunks BEGIN
        INSERT INTO index_log(chunk_pk, op) VALUES (new.pk, 'add');
    END""",
    """CREATE TRIGGER IF NOT EXISTS chunks_logged_delete AFTER DELETE ON chunks BEGIN
        INSERT INTO index_log(chunk_pk, op) VALUES (old.pk, 'remove');
    END""",
    """CREATE TRIGGER IF NOT EXISTS chunks_logged_update AFTER UPDATE OF embedding, text
        ON chunks BEGIN
        INSERT INTO index_log(chunk_pk, op) VALUES (old.pk, 'remove');
        INSERT INTO index_log(chunk_pk, op) VALUES (new.pk, 'add');
    END""",
)
PRUNED_KEY = "index_log_pruned"


def install(connection: sqlite3.Connection) -> None:
    """Create the log and its triggers and log every stored chunk as added (a migration step:
    an index built from an empty start and this log holds exactly the stored chunks)."""
    for statement in SCHEMA:
        connection.execute(statement)
    if connection.execute("SELECT COUNT(*) FROM index_log").fetchone()[0] == 0:
        connection.execute("INSERT INTO index_log(chunk_pk, op) "
                           "SELECT pk, 'add' FROM chunks ORDER BY pk")


@dataclass(frozen=True)
class Position:
    """Where the log stands: ``current`` is the newest entry's seq (what an index in step
    reflects), ``pruned`` the newest seq already deleted."""

    current: int
    pruned: int


def position(connection: sqlite3.Connection) -> Position:
    row = connection.execute(
        "SELECT (SELECT MAX(seq) FROM index_log), "
        f"(SELECT value FROM meta WHERE key = '{PRUNED_KEY}')").fetchone()
    pruned = int(row[1]) if row[1] is not None else 0
    return Position(max(int(row[0] or 0), pruned), pruned)


@dataclass(frozen=True)
class Delta:
    """What changed after a position, as an index applies it: first drop ``removed``, then
    add ``added_ids`` with their ``vectors`` and ``texts``."""

    removed: np.ndarray
    added_ids: np.ndarray
    vectors: np.ndarray
    texts: list[str]
    upto: int

    def __len__(self) -> int:
        return len(self.removed) + len(self.added_ids)


def delta(connection: sqlite3.Connection, since: int, upto: int, dimension: int) -> Delta:
    """The changes in ``(since, upto]`` (read them in the transaction that read ``upto``)."""
    last: dict[int, str] = {}
    removed: set[int] = set()
    for pk, op in connection.execute(
            "SELECT chunk_pk, op FROM index_log WHERE seq > ? AND seq <= ? ORDER BY seq",
            (since, upto)):
        last[pk] = op
        if op == "remove":
            removed.add(pk)
    wanted = sorted(pk for pk, op in last.items() if op == "add")
    ids, vectors, texts = rows(connection, wanted, dimension)
    return Delta(np.array(sorted(removed), dtype=np.int64), ids, vectors, texts, upto)


def rows(connection: sqlite3.Connection, pks: list[int],
         dimension: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(ids, embeddings, texts)`` of the stored chunks among ``pks``, in pk order."""
    found: list[tuple[int, bytes, str]] = []
    for start in range(0, len(pks), 500):
        part = pks[start:start + 500]
        marks = ",".join("?" * len(part))
        found.extend(connection.execute(
            f"SELECT pk, embedding, text FROM chunks WHERE pk IN ({marks}) ORDER BY pk", part))
    ids = np.array([pk for pk, _, _ in found], dtype=np.int64)
    vectors = np.frombuffer(b"".join(blob for _, blob, _ in found), dtype=np.float32)
    return ids, vectors.reshape(len(found), dimension), [text for _, _, text in found]


def prune(connection: sqlite3.Connection, through: int) -> None:
    """Delete the entries up to ``through`` and record it (inside the caller's transaction):
    a saved snapshot at ``through`` or later makes them unnecessary."""
    connection.execute("DELETE FROM index_log WHERE seq <= ?", (through,))
    connection.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = "
        "CAST(MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)) AS TEXT)",
        (PRUNED_KEY, str(through)))
