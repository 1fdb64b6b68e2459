"""Settling a recorded dispute (:mod:`trishield.kb.store.disputes`): what a person may do, audited.

Three actions, each one transaction with the dispute's closing and its audit entries:

* ``quarantine`` a side: every document of that side still stored is withdrawn into the
  quarantine, held with the reason ``dispute <id>`` (its chunks leave the indexes; the row
  keeps the document whole, with when it was first stored), so the conflict cannot recur
  and ``trishield quarantine release`` (or ``POST /v1/quarantine/{id}/release``) undoes it.
  The KB had no way to move a *stored* document into the quarantine before: Ring 1 holds
  documents only at ingest.
* ``trust`` a side: every document of that side still stored is raised to the ``trusted``
  tier in place, by a person who may decide so (an admin of the service, or the operator
  who holds the KB's files, the same people who create trusted keys and run ``ingest --tier
  trusted``). In place keeps its text, version and ingest time (the time it stood is still
  its own, where a delete and re-ingest would make it a newcomer); its provenance note says
  who raised it, from which tier, and for which dispute, so every trace shows it. A
  publisher's *signature* is not something a resolution can make: the publisher signs its
  record (``trishield keys sign``) and posts it, which takes the id over from the unsigned
  copy (docs/service.md); the dispute is then dismissed with a note.
* ``dismiss``: nothing changes in the KB; the dispute is closed with the note.

Every resolution writes an audit entry ``dispute`` (who, when, the action, side, note, the
documents changed and those skipped with why) besides each document's own entry
(``quarantine`` or ``retier``).
"""

from __future__ import annotations

import json
import sqlite3

from trishield.errors import ConflictError, InputError
from trishield.kb.store import disputes
from trishield.kb.store.disputes import Resolution

ACTIONS: tuple[str, ...] = ("quarantine", "trust", "dismiss")


def check(action: str, side: int | None, note: str, by: str) -> None:
    """The arguments of a resolution, or :class:`InputError` saying which is wrong."""
    if action not in ACTIONS:
        raise InputError(f"unknown action {action!r}; choose from {', '.join(ACTIONS)}")
    if action == "dismiss" and side is not None:
        raise InputError("dismiss takes no side: it changes nothing in the knowledge base")
    if action != "dismiss" and (isinstance(side, bool) or not isinstance(side, int)):
        raise InputError(f"{action} needs the side to act on (1 or 2, as `disputes show` "
                         "numbers them)")
    if not isinstance(note, str) or len(note) > 500:
        raise InputError("a note is text of at most 500 characters")
    if not isinstance(by, str) or not by or by != by.strip():
        raise InputError(f"name {by!r} is empty or has surrounding whitespace")


def resolve(store, dispute_id: int, *, action: str, side: int | None, by: str,
            note: str = "") -> Resolution:
    """Apply ``action`` to dispute ``dispute_id`` (side ``side``, numbered from 1) and close
    it, in one transaction of ``store`` (the caller holds the KB's write lock)."""
    check(action, side, note, by)
    disputes.check_id(dispute_id)
    with store.transaction() as connection:
        dispute = disputes.get(connection, dispute_id)
        if dispute["state"] != "open":
            raise ConflictError(f"dispute {dispute_id} is already {dispute['state']} (by "
                                f"{dispute['closed_by']})")
        sides = dispute["sides"]
        if side is not None and not 1 <= side <= len(sides):
            raise InputError(f"dispute {dispute_id} has sides 1 to {len(sides)}, not {side}")
        done = Resolution(dispute_id, action, side, by, note)
        if side is not None:
            documents = sorted({p["doc_id"] for s in sides[side - 1]["sources"]
                                for p in s["passages"]})
            for doc_id in documents:
                why = (_quarantine(store, connection, doc_id, dispute_id, by, note)
                       if action == "quarantine"
                       else _trust(store, connection, doc_id, dispute_id, by))
                if why is None:
                    done.documents.append(doc_id)
                else:
                    done.skipped.append({"id": doc_id, "why": why})
            if not done.documents:
                raise ConflictError(f"side {side} of dispute {dispute_id} has no document "
                                    f"left to {action}: "
                                    + "; ".join(f"{s['id']} {s['why']}" for s in done.skipped)
                                    + "; dismiss it instead")
            store.set_meta({"generation": str(store.generation() + 1)}, connection)
        disputes.close(connection, dispute_id,
                       state="dismissed" if action == "dismiss" else "resolved", by=by,
                       resolution={"action": action, "side": side, "note": note,
                                   "documents": done.documents, "skipped": done.skipped},
                       now=store.clock(), audit=store.audit)
    return done


def _quarantine(store, connection: sqlite3.Connection, doc_id: str, dispute_id: int,
                by: str, note: str) -> str | None:
    """Withdraw the stored ``doc_id`` into the quarantine (held, reason ``dispute <id>``);
    None when done, else why it was left as it is."""
    row = connection.execute(
        "SELECT pk, ingested_at, version FROM documents WHERE doc_id = ?",
        (doc_id,)).fetchone()
    if row is None:
        return "is no longer stored"
    pk, ingested_at, version = row
    if connection.execute("SELECT 1 FROM quarantine WHERE doc_id = ? AND state = 'held'",
                          (doc_id,)).fetchone():
        return "has another text of it held in quarantine already (review that first)"
    reason = f"dispute {dispute_id}"
    now = store.clock()
    verdict = {"c": None, "blocked": True, "reasons": [f"{reason}: quarantined by {by}"
                                                       + (f" ({note})" if note else "")],
               "patterns": [], "dispute": dispute_id, "from": "stored",
               "stored_at": ingested_at, "version": version}
    connection.execute(
        "INSERT INTO quarantine(doc_id, content_hash, title, source, origin, text, tier, "
        "writer, verdict, quarantined_at, batch_id, provenance, writer_key, signed, metadata) "
        "SELECT doc_id, content_hash, title, source, origin, text, tier, writer, ?, ?, "
        "batch_id, provenance, writer_key, signed, metadata FROM documents WHERE pk = ?",
        (json.dumps(verdict, sort_keys=True), now, pk))
    chunks = connection.execute("DELETE FROM chunks WHERE doc_pk = ?", (pk,)).rowcount
    connection.execute(
        "INSERT INTO audit(at, action, writer, doc_id, content_hash, batch_id, detail) "
        "SELECT ?, 'quarantine', ?, doc_id, content_hash, batch_id, ? FROM documents "
        "WHERE pk = ?", (now, by, json.dumps({
            "reason": reason, "from": "stored", "chunks": chunks, "note": note,
            "stored_at": ingested_at, "version": version}, sort_keys=True), pk))
    connection.execute("DELETE FROM documents WHERE pk = ?", (pk,))
    return None


def _trust(store, connection: sqlite3.Connection, doc_id: str, dispute_id: int,
           by: str) -> str | None:
    """Raise the stored ``doc_id`` to ``trusted`` in place; None when done, else why not."""
    row = connection.execute("SELECT tier, provenance FROM documents WHERE doc_id = ?",
                             (doc_id,)).fetchone()
    if row is None:
        return "is no longer stored"
    tier, provenance = row
    if tier == "trusted":
        return "is trusted already"
    note = (f"tier raised from {tier} to trusted by {by} (dispute {dispute_id})"
            + (f"; was: {provenance}" if provenance else ""))
    connection.execute("UPDATE documents SET tier = 'trusted', provenance = ? WHERE doc_id = ?",
                       (note, doc_id))
    store.audit(connection, action="retier", writer=by, doc_id=doc_id, content_hash=None,
                detail={"from": tier, "to": "trusted", "reason": f"dispute {dispute_id}"})
    return None
