"""The store's record keeping: the quarantine, document versions, deletions and the audit log.

Mixed into :class:`~trishield.kb.store.sqlite.Store`. Every change is made on the connection
of a transaction the caller opened (``Store.transaction``), so a decision and its audit entry
commit together.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING


class StoreRecords:
    """The quarantine, versions, deletions and audit log (see the module docstring)."""

    connection: sqlite3.Connection
    clock: Callable[[], float]
    if TYPE_CHECKING:  # defined by Store, which this class is mixed into
        def set_meta(self, values: dict[str, str],
                     connection: sqlite3.Connection | None = None) -> None: ...

        @staticmethod
        def _next_generation(connection: sqlite3.Connection) -> int: ...

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
