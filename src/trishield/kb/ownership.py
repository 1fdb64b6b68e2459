"""Who owns an id and a text: how an ingest splits a batch into new documents, duplicates and
the documents a signed upload takes over, before anything is written.

The rules (the service's API documents them too):

* A document belongs to the API key that wrote it (``writer_key``); a local (CLI) write has
  no key and belongs to its writer name. Nothing is decided by a writer *name* that another
  key could also carry.
* Deduplication is per writer. A text this writer already stores or holds in quarantine, at
  the same or a higher tier, is a duplicate of *its own* document. The same text from another
  writer is never a duplicate: it becomes this writer's own document, with its own id, tier,
  provenance and owner. Otherwise whoever posted a text first would own it, and a publisher's
  signed upload would be swallowed by a squatter's unsigned copy (issue 17).
* Ids are global. A **verified signed record** of an id (the publisher signed this very id)
  takes the id over from a less trusted document (neutral or untrusted, whoever wrote it) and
  from an earlier version signed by the same publisher: that document is moved aside in the
  same transaction (deleted with a tombstone, or discarded from the quarantine) and the
  signed one gets the id. Any other write to an id that another writer holds is a conflict,
  and so is one to the writer's own id with another text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from trishield.errors import ConflictError, InputError
from trishield.kb.documents import Document, Tier

TIER_RANK = {Tier.UNTRUSTED.value: 0, Tier.NEUTRAL.value: 1, Tier.TRUSTED.value: 2}


@dataclass(frozen=True)
class Claim:
    """A stored or quarantined document, as an ingest sees it: who owns the id and the text."""

    doc_id: str
    content_hash: str
    writer: str
    writer_key: str
    tier: str
    state: str  # "stored" or "quarantined"
    signed: str = ""

    def owned_by(self, writer: str, writer_key: str) -> bool:
        """Whether the writer ``writer`` with API key ``writer_key`` ('' for local writes)
        wrote it: the key decides, the name only for local writes."""
        return self.writer_key == writer_key and (writer_key != "" or self.writer == writer)


def owns(record: dict, writer: str, writer_key: str) -> bool:
    """Whether a stored or quarantined record (a ``Store`` row) was written by this writer."""
    return Claim(record["id"], record["content_hash"], record["writer"], record["writer_key"],
                 record["tier"], "").owned_by(writer, writer_key)


def supersedes(document: Document, tier: str, claim: Claim) -> bool:
    """Whether ``document``'s verified signed record takes ``claim``'s id over."""
    if not document.signed:
        return False
    if not claim.signed:
        return TIER_RANK[claim.tier] < TIER_RANK[tier]
    new, old = json.loads(document.signed), json.loads(claim.signed)
    return new["publisher"] == old["publisher"] and new["version"] > old["version"]


@dataclass
class BatchPlan:
    """What an ingest will do with each document of a batch."""

    new: list[Document] = field(default_factory=list)
    duplicates: list[dict[str, str]] = field(default_factory=list)
    displaced: list[tuple[Claim, Document]] = field(default_factory=list)


class RefusedId(ConflictError):
    """A document's id may not be written by this writer (HTTP 409); names the id."""

    def __init__(self, document: Document, message: str):
        self.doc_id = document.id
        super().__init__(f"document id {document.id!r} ({document.origin}) {message}; "
                         "refusing the batch")


def plan_batch(documents: Sequence[Document], claims: Sequence[Claim], *, tier: str,
               writer: str, writer_key: str) -> BatchPlan:
    """Split ``documents`` (written by ``writer`` with ``writer_key``, batch tier ``tier``)
    against the ``claims`` on their ids and texts; raises :class:`RefusedId` or
    :class:`InputError` for a batch that may not be written at all."""
    by_id = {claim.doc_id: claim for claim in claims}
    own_text: dict[str, Claim] = {}
    for claim in claims:
        if claim.owned_by(writer, writer_key):
            best = own_text.get(claim.content_hash)
            if best is None or TIER_RANK[claim.tier] > TIER_RANK[best.tier]:
                own_text[claim.content_hash] = claim
    plan = BatchPlan()
    batch_ids: dict[str, Document] = {}
    batch_text: dict[str, Document] = {}
    for document in documents:
        document_tier = document.tier or tier
        claim = by_id.get(document.id)
        if claim is not None and supersedes(document, document_tier, claim):
            plan.displaced.append((claim, document))
        elif claim is not None:
            _check_claimed_id(document, document_tier, claim, writer, writer_key)
            plan.duplicates.append({"id": document.id, "same_text_as": claim.doc_id,
                                    "state": claim.state, "content_hash": document.content_hash})
            continue
        earlier = batch_ids.get(document.id)
        if earlier is not None and earlier.content_hash != document.content_hash:
            raise InputError(f"duplicate document id {document.id!r} with different text "
                             f"(first at {earlier.origin}, again at {document.origin})")
        twin = own_text.get(document.content_hash)
        if claim is None and twin is not None \
                and TIER_RANK[twin.tier] >= TIER_RANK[document_tier]:
            plan.duplicates.append({"id": document.id, "same_text_as": twin.doc_id,
                                    "state": twin.state, "content_hash": document.content_hash})
            continue
        sibling = batch_text.get(document.content_hash)
        if sibling is not None and TIER_RANK[sibling.tier or tier] >= TIER_RANK[document_tier]:
            plan.duplicates.append({"id": document.id, "same_text_as": sibling.id,
                                    "state": "stored", "content_hash": document.content_hash})
            continue
        batch_ids[document.id] = document
        batch_text[document.content_hash] = document
        plan.new.append(document)
    return plan


def _check_claimed_id(document: Document, tier: str, claim: Claim, writer: str,
                      writer_key: str) -> None:
    """Refuse to write ``document`` under an id ``claim`` holds, unless it is this writer's
    own copy of the same text at the same or a higher tier (a duplicate)."""
    if not claim.owned_by(writer, writer_key):
        # whether another writer's document is stored or held in quarantine is not said
        raise RefusedId(document, "is already used by another writer; choose another id")
    where = ("held in quarantine (withdraw it with DELETE first)"
             if claim.state == "quarantined" else "in the knowledge base")
    if claim.content_hash != document.content_hash:
        raise RefusedId(document, f"is already {where} with different text")
    if TIER_RANK[tier] > TIER_RANK[claim.tier]:
        raise RefusedId(document, f"is already {where} with this text at tier {claim.tier}; "
                                  f"delete it first to store it as {tier}")


def duplicate_audit_detail(duplicate: dict[str, str], writer_key: str) -> dict[str, str]:
    """The audit entry's detail for a skipped duplicate."""
    return {"same_text_as": duplicate["same_text_as"], "state": duplicate["state"],
            "writer_key": writer_key}


def public_duplicates(duplicates: list[dict[str, str]]) -> list[dict[str, str]]:
    """Duplicates as an ingest reports them: the writer's own document each one matched."""
    return [{"id": d["id"], "same_text_as": d["same_text_as"], "state": d["state"]}
            for d in duplicates]


def displacement_reason(claim: Claim, document: Document, writer: str) -> str:
    """Why a document was moved aside (its tombstone's or quarantine row's reason)."""
    signed = json.loads(document.signed)
    return (f"displaced by publisher {signed['publisher']}'s signed record of this id "
            f"(version {signed['version']}), written by {writer}")
