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
  same transaction (deleted with a tombstone, or the writer's own held text discarded from
  the quarantine) and the signed one gets the id. Any other write to an id that another
  writer stores is a conflict, and so is one to the writer's own id with another text,
  unless the write is an **update**. Ids are not scoped per writer (docs/design/provenance.md,
  "Provenance", says why).
* An update (``update=True``: the CLI re-ingesting a changed file) replaces the writer's own
  document of that id with the new text as its next version, only when the stored document
  came from the same ``source`` (the same file): the same id from another folder is a
  collision, refused with a hint to use an id prefix. The stored version is retired (kept
  in ``document_versions``) in the transaction that writes the new one; an own text held in
  quarantine under that id is withdrawn. A publisher's signed record is never replaced by an
  unsigned update.
* The quarantine reserves an id for its own writer only. A text another writer holds there
  (Ring 1 held it; it is in no index) never blocks a write of its id and is never shown to
  the writer: when anyone else writes that id, the held row is *set aside* (discarded, with
  its reason, audited, kept in the quarantine's history for admins) in the write's
  transaction, and the write's answer does not mention it. Otherwise a poison posted under
  ``legal/returns`` would lock its owner out until an admin discarded it, and the 409 or the
  ``displaced`` list would tell any writer which ids are held (issue 49).
* A signed record belongs to its publisher, not to whoever relayed it: the same record (same
  publisher, version and text) posted again by another writer is a duplicate of the stored
  one, not a conflict.
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
    source: str = ""
    """Where the document came from (the file an ingest read it from): an update must come
    from the same place, so that two folders' ``index.md`` never replace each other."""
    title: str = ""
    metadata: str = "{}"
    """The stored title and metadata (canonical JSON): an update that changes only these
    (a retitled file, new tags) is a new version too."""

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
    set_aside: list[tuple[Claim, Document]] = field(default_factory=list)
    """Other writers' held (quarantined) texts of an id this batch writes: closed in the
    write's transaction, audited, never reported to the writer."""
    updates: list[tuple[Claim, Document]] = field(default_factory=list)
    """The writer's stored documents a new version (also in ``new``) replaces."""
    withdrawn: list[tuple[Claim, Document]] = field(default_factory=list)
    """The writer's held (quarantined) texts of an id that a new version replaces."""


class RefusedId(ConflictError):
    """A document's id may not be written by this writer (HTTP 409); names the id."""

    def __init__(self, document: Document, message: str):
        self.doc_id = document.id
        super().__init__(f"document id {document.id!r} ({document.origin}) {message}; "
                         "refusing the batch")


def plan_batch(documents: Sequence[Document], claims: Sequence[Claim], *, tier: str,
               writer: str, writer_key: str, update: bool = False) -> BatchPlan:
    """Split ``documents`` (written by ``writer`` with ``writer_key``, batch tier ``tier``)
    against the ``claims`` on their ids and texts; raises :class:`RefusedId` or
    :class:`InputError` for a batch that may not be written at all. With ``update``, a
    changed text of the writer's own id from the same source is a new version."""
    by_id: dict[str, list[Claim]] = {}
    for claim in claims:  # an id can be stored and held at once: a blocked update
        by_id.setdefault(claim.doc_id, []).append(claim)
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
        on_id = [c for c in by_id.get(document.id, []) if not _held_for_another(c, writer,
                                                                               writer_key)]
        same = next((c for c in on_id if c.content_hash == document.content_hash), None)
        if on_id and all(supersedes(document, document_tier, c) for c in on_id):
            plan.displaced.extend((claim, document) for claim in on_id)
        elif on_id and update and (same is None or _redescribed(document, same, on_id)) \
                and _updatable(document, on_id, writer, writer_key):
            for claim in on_id:
                (plan.updates if claim.state == "stored" else plan.withdrawn).append(
                    (claim, document))
        elif on_id:
            claim = same or min(on_id, key=lambda c: c.state != "stored")
            _check_claimed_id(document, document_tier, claim, writer, writer_key)
            plan.duplicates.append({"id": document.id, "same_text_as": claim.doc_id,
                                    "state": claim.state, "content_hash": document.content_hash})
            continue
        earlier = batch_ids.get(document.id)
        if earlier is not None and earlier.content_hash != document.content_hash:
            raise InputError(f"duplicate document id {document.id!r} with different text "
                             f"(first at {earlier.origin}, again at {document.origin})")
        twin = own_text.get(document.content_hash)
        if not on_id and twin is not None \
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
        plan.set_aside.extend((claim, document) for claim in by_id.get(document.id, [])
                              if _held_for_another(claim, writer, writer_key))
    return plan


def _held_for_another(claim: Claim, writer: str, writer_key: str) -> bool:
    """Whether ``claim`` is another writer's text held in quarantine: invisible to this one."""
    return claim.state == "quarantined" and not claim.owned_by(writer, writer_key)


def same_signed_record(document: Document, claim: Claim) -> bool:
    """Whether ``document`` carries the very signed record ``claim`` stores: the same
    publisher's same version of the same text (who relayed either does not matter)."""
    if not (document.signed and claim.signed) or document.content_hash != claim.content_hash:
        return False
    new, old = json.loads(document.signed), json.loads(claim.signed)
    return (new["publisher"], new["version"]) == (old["publisher"], old["version"])


def _redescribed(document: Document, same: Claim, claims: Sequence[Claim]) -> bool:
    """Whether ``document`` has the stored text of its id (the only claim on it) under
    another title or metadata: a new version that only describes the text anew."""
    return (claims == [same] and same.state == "stored"
            and (same.title, same.metadata) != (document.title, document.metadata_json))


def _updatable(document: Document, claims: Sequence[Claim], writer: str,
               writer_key: str) -> bool:
    """Whether ``document`` may replace ``claims`` (all on its id) as their next version:
    all of them this writer's own, none a signed record (an unsigned text never replaces
    one). The same id from another source is refused here, naming both sources."""
    if not all(claim.owned_by(writer, writer_key) and not claim.signed for claim in claims):
        return False
    for claim in claims:
        if claim.source != document.source:
            where = "held in quarantine" if claim.state == "quarantined" else "stored"
            raise RefusedId(document, f"is already {where} from {claim.source or '(no source)'}"
                                      f", not from {document.source or '(no source)'}: two "
                                      "files would share one id. Give this input its own "
                                      "--id-prefix, or delete the stored document first")
    return True


def _check_claimed_id(document: Document, tier: str, claim: Claim, writer: str,
                      writer_key: str) -> None:
    """Refuse to write ``document`` under an id ``claim`` holds, unless it is this writer's
    own copy of the same text at the same or a higher tier, or the same signed record (a
    duplicate)."""
    if same_signed_record(document, claim):
        return
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


def set_aside_reason(tier: str, writer: str) -> str:
    """Why another writer's held text of an id was closed (its quarantine row's reason)."""
    return (f"set aside: {writer} wrote this id ({tier}); a document held in quarantine "
            "reserves its id for its own writer only")


def displacement_reason(claim: Claim, document: Document, writer: str) -> str:
    """Why a document was moved aside (its tombstone's or quarantine row's reason)."""
    signed = json.loads(document.signed)
    return (f"displaced by publisher {signed['publisher']}'s signed record of this id "
            f"(version {signed['version']}), written by {writer}")
