"""What people do with stored and held documents: read, delete, discard, settle disputes.

Every change here is an admin's or an owner's decision, audited, under the KB's write lock and
in one transaction: a command naming several documents changes all of them or none. Ownership
follows :mod:`trishield.kb.store.ownership` (a writer may delete or withdraw only its own
documents, and another writer's held document is "not found", never "forbidden"). The
disputes queue is :mod:`trishield.kb.store.disputes` and
:mod:`trishield.kb.store.dispute_resolution`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trishield.errors import ConflictError, ForbiddenError, InputError, NotFoundError
from trishield.kb.store import Store, dispute_resolution, disputes
from trishield.kb.store.disputes import Dispute, Recorded, Resolution
from trishield.kb.store.ownership import owns

if TYPE_CHECKING:
    from trishield.kb.knowledge_base import KnowledgeBase


def check_name(name: str, what: str) -> None:
    """Refuse an empty name, or one with surrounding whitespace, of a person who acts."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise InputError(f"{what} name {name!r} is empty or has surrounding whitespace")


def distinct_ids(doc_ids: Sequence[str]) -> list[str]:
    """The ids of a multi-document command, repeats dropped (first order kept)."""
    if isinstance(doc_ids, str):
        raise InputError("give a list of document ids, not one string")
    ids = list(dict.fromkeys(doc_ids))
    if not ids:
        raise InputError("no document ids given")
    for doc_id in ids:
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(f"document id {doc_id!r} is not a non-empty string")
    return ids


def held_records(store: Store, ids: list[str], verb: str) -> list[dict]:
    """The quarantine rows holding ``ids`` now; :class:`NotFoundError` naming every id
    that is not held (:class:`ConflictError` for one id that was already decided), so
    that a list with one bad id changes nothing."""
    records = [store.quarantined_document(doc_id) for doc_id in ids]
    missing = [doc_id for doc_id, r in zip(ids, records, strict=True) if r is None]
    closed = [r for r in records if r is not None and r["state"] != "held"]
    if len(ids) == 1 and closed:
        raise ConflictError(f"document {ids[0]!r} is no longer held in quarantine: it was "
                            f"already {closed[0]['state']} by {closed[0]['closed_by']}")
    if missing or closed:
        names = ", ".join(repr(i) for i in [*missing, *(r["id"] for r in closed)])
        raise NotFoundError(f"no document {names} is held in quarantine" if len(ids) == 1
                            else f"not held in quarantine: {names}; nothing was {verb}")
    return records


class Curation:
    """The reading and curating commands of one KB handle (``KnowledgeBase`` delegates its
    methods of the same names here; their docstrings there say what each does)."""

    def __init__(self, kb: KnowledgeBase):
        self.kb = kb
        self.store = kb.store

    def documents(self, *, writer: str | None = None, prefix: str | None = None,
                  limit: int | None = None) -> list[dict]:
        """Stored documents without their text, oldest first (see the facade)."""
        if limit is not None and (isinstance(limit, bool) or limit < 1):
            raise InputError(f"limit must be a positive number, got {limit!r}")
        return self.store.list_documents(writer=writer, prefix=prefix, limit=limit)

    def document(self, doc_id: str) -> dict:
        """One stored document in full, or why it is not stored."""
        record = self.store.document(doc_id)
        if record is None:
            tombstone = self.store.deleted_document(doc_id)
            held = self.store.quarantined_document(doc_id)
            why = ("" if tombstone is None else
                   f"; it was deleted by {tombstone['deleted_by']}"
                   + (f" ({tombstone['reason']})" if tombstone["reason"] else ""))
            if held is not None and held["state"] == "held":
                why = "; it is held in quarantine (see `trishield quarantine show`)"
            raise NotFoundError(f"no document {doc_id!r} is stored in the knowledge base{why}")
        return record | {"chunks": self.store.chunk_count(doc_id),
                         "earlier_versions": self.store.retired_versions(doc_id)}

    def delete(self, doc_id: str, *, by: str, reason: str = "",
               owner: tuple[str, str] | None = None) -> dict:
        """Soft-delete one stored document, only its owner's when ``owner`` is given."""
        if not by or by != by.strip():
            raise InputError(f"deleter name {by!r} is empty or has surrounding whitespace")
        with self.kb._lock.hold():
            record = self.store.document(doc_id)
            if record is None:
                raise NotFoundError(f"no document {doc_id!r} is stored in the knowledge base")
            if owner is not None and not owns(record, *owner):
                error = ForbiddenError(f"{owner[0]} may delete only its own documents; "
                                       f"{doc_id!r} was written by {record['writer']}")
                self.audit_refused("delete", owner[0], owner[1], doc_id, error)
                raise error
            with self.store.transaction() as connection:
                tombstone = self.store.delete_document(connection, doc_id, by=by,
                                                       reason=reason)
            if tombstone is None:  # deleted by another process since it was read
                raise NotFoundError(f"no document {doc_id!r} is stored in the knowledge base")
            self.kb._after_commit()
        return tombstone

    def delete_many(self, doc_ids: Sequence[str], *, by: str, reason: str = "") -> list[dict]:
        """Soft-delete several stored documents in one transaction, all or none."""
        check_name(by, "deleter")
        ids = distinct_ids(doc_ids)
        with self.kb._lock.hold():
            missing = [doc_id for doc_id in ids if self.store.document(doc_id) is None]
            if missing:
                raise NotFoundError(f"not stored in the knowledge base: "
                                    f"{', '.join(repr(i) for i in missing)}; nothing was "
                                    "deleted")
            tombstones = []
            with self.store.transaction() as connection:
                for doc_id in ids:
                    tombstone = self.store.delete_document(connection, doc_id, by=by,
                                                           reason=reason)
                    if tombstone is None:  # deleted by another process since it was read
                        raise NotFoundError(f"{doc_id!r} was deleted by another process "
                                            "meanwhile; nothing was deleted")
                    tombstones.append(tombstone)
            self.kb._after_commit()
        return tombstones

    def discard(self, doc_id: str, *, by: str, reason: str = "",
                owner: tuple[str, str] | None = None) -> dict:
        """End the quarantine hold on one document (discarded, or withdrawn by its owner)."""
        if not by or by != by.strip():
            raise InputError(f"name {by!r} is empty or has surrounding whitespace")
        state = "discarded" if owner is None else "withdrawn"
        with self.kb._lock.hold():
            record = self.store.quarantined_document(doc_id)
            if record is None or record["state"] != "held" or (
                    owner is not None and not owns(record, *owner)):
                if record is not None and record["state"] == "held":
                    self.audit_refused("withdraw", owner[0], owner[1], doc_id,
                                       ForbiddenError("held for another writer"))
                raise NotFoundError(f"no document {doc_id!r} is held in quarantine"
                                    if owner is None else f"no document {doc_id!r}")
            with self.store.transaction() as connection:
                self.store.close_quarantined(connection, doc_id, state=state, by=by,
                                             reason=reason)
        return self.store.quarantined_document(doc_id)

    def discard_many(self, doc_ids: Sequence[str], *, by: str, reason: str = "") -> list[dict]:
        """Discard several held documents at once, all or none (see the facade)."""
        check_name(by, "name")
        ids = distinct_ids(doc_ids)
        with self.kb._lock.hold():
            held_records(self.store, ids, "discarded")
            with self.store.transaction() as connection:
                for doc_id in ids:
                    if not self.store.close_quarantined(connection, doc_id, state="discarded",
                                                        by=by, reason=reason):
                        raise ConflictError(f"document {doc_id!r} left the quarantine while it "
                                            "was being discarded; nothing was discarded")
        return [self.store.quarantined_document(doc_id) for doc_id in ids]

    def held_ids(self, *, writer: str | None = None) -> list[str]:
        """Ids held in quarantine now, oldest first; optionally one writer's."""
        return self.store.held_ids(writer=writer)

    def audit_refused(self, action: str, writer: str, writer_key: str, doc_id: str | None,
                      error: Exception) -> None:
        """Audit a refused write (the caller raises the refusal)."""
        with self.store.transaction() as connection:
            self.store.audit(connection, action="refused", writer=writer, doc_id=doc_id,
                             content_hash=None,
                             detail={"attempted": action, "error": str(error),
                                     "writer_key": writer_key})

    def record_dispute(self, dispute: Dispute) -> Recorded:
        """Record a conflict between writers; never raises for the KB's state."""
        return disputes.record(self.store, dispute)

    def disputes(self, *, state: str | None = "open", limit: int = 100) -> list[dict]:
        """Recorded disputes, most recently met first."""
        return disputes.listing(self.store.connection, state=state, limit=limit)

    def dispute(self, dispute_id: int) -> dict:
        """One recorded dispute in full, each passage with its text and state now."""
        return disputes.with_texts(self.store.connection,
                                   disputes.get(self.store.connection, dispute_id))

    def resolve_dispute(self, dispute_id: int, *, action: str, side: int | None = None,
                        by: str, note: str = "") -> Resolution:
        """Settle a dispute in one transaction under the write lock."""
        dispute_resolution.check(action, side, note, by)
        with self.kb._lock.hold():
            done = dispute_resolution.resolve(self.store, dispute_id, action=action,
                                              side=side, by=by, note=note)
            if action == "quarantine":
                self.kb._after_commit()
        return done
