"""Request and response bodies of the HTTP API (pydantic; they are the OpenAPI document).

Every request model forbids unknown fields and is strict about types, so a typo
(``"txt"`` for ``"text"``) or a number where a string belongs is a 422 that names the field
instead of a silently ignored value. Document ids are checked by :func:`check_document_id`,
the same rule the URL paths use, so every id that can be written can also be read back.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trishield.defenses import DEFENSES
from trishield.kb.documents import TIERS
from trishield.kb.indexes.retrieval import BACKENDS
from trishield.kb.loaders import MAX_DOCUMENT_CHARS, MAX_ID_CHARS
from trishield.kb.unicode_checks import id_problem
from trishield.provenance.signing import MAX_ISSUED_AT, MAX_VERSION
from trishield.rings.consensus import GATE_MODES
from trishield.trace import CandidateRow, Trace

MAX_BATCH = 500
MAX_QUESTION_CHARS = 2000
MAX_PANEL = 5
# the names come from the registries, so a registered backend or defense is accepted here too
Backend = Literal[BACKENDS]  # type: ignore[valid-type]
Defense = Literal[DEFENSES.names(suite="trishield")]  # type: ignore[misc]
TierName = Literal[TIERS]  # type: ignore[valid-type]
_ID_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\\%?#]")


def check_document_id(doc_id: str) -> str:
    """Reject ids that could mean something else in a path: ``..`` or ``.`` segments, a
    leading or doubled ``/``, backslashes, ``%``/``?``/``#``, control characters, outer spaces;
    and ids that could pass for another id (:func:`trishield.kb.unicode_checks.id_problem`:
    invisible, bidi and separator characters, compatibility forms, mixed-script look-alikes).

    Ids never become file names here, but an id that reads as a relative path is almost
    always an attack probe or a client bug, and refusing it keeps URLs unambiguous.
    """
    if not doc_id or len(doc_id) > MAX_ID_CHARS:
        raise ValueError(f"a document id is 1 to {MAX_ID_CHARS} characters")
    if doc_id != doc_id.strip():
        raise ValueError("a document id must not start or end with whitespace")
    if _ID_FORBIDDEN.search(doc_id):
        raise ValueError("a document id must not contain control characters, '\\', '%', "
                         "'?' or '#'")
    if doc_id.startswith("/") or doc_id.endswith("/") or "//" in doc_id:
        raise ValueError("a document id must not start or end with '/' or contain '//'")
    if any(part in (".", "..") for part in doc_id.split("/")):
        raise ValueError("a document id must not contain '.' or '..' path segments")
    problem = id_problem(doc_id)
    if problem is not None:
        raise ValueError(f"a document id must not imitate another: it {problem}")
    return doc_id


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ProvenanceIn(Strict):
    """A claim about where a document comes from. Only a valid signature is believed."""

    publisher: str | None = Field(None, min_length=1, max_length=64,
                                  description="Registered publisher that signed the text.")
    signature: str | None = Field(None, min_length=1, max_length=200,
                                  description="base64 Ed25519 signature of the signed record: "
                                              "'trishield-document-v2\\n' + canonical JSON "
                                              "of content_sha256, id, issued_at, version "
                                              "(`trishield keys sign` makes it).")
    version: int | None = Field(None, ge=1, le=MAX_VERSION,
                                description="The signed record's version (a withdrawn "
                                            "version can only be replaced by a higher one).")
    issued_at: int | None = Field(None, ge=0, le=MAX_ISSUED_AT,
                                  description="The signed record's issue time, epoch seconds.")
    tier: TierName | None = Field(None, description="A claimed tier; ignored unless signed, "
                                                    "and an unsigned claim makes the "
                                                    "document untrusted.")


class DocumentIn(Strict):
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, examples=["refund-policy"])
    text: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)
    title: str = Field("", max_length=1000)
    source: str = Field("", max_length=1000)
    provenance: ProvenanceIn | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_document_id(value)


class IngestRequest(Strict):
    """One document or a batch: a list of 1 to MAX_BATCH documents, written atomically."""

    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_BATCH)


class ProvenanceOut(BaseModel):
    id: str
    tier: TierName
    verified: bool
    note: str


class IngestResponse(BaseModel):
    """``duplicates``: this writer's own documents each skipped one has the text of
    (``{"id", "same_text_as", "state"}``), or the stored signed record a relay posted again.
    ``displaced``: ids a verified signed record took over from a less trusted stored document
    or the writer's own held one (moved aside: deleted or discarded, audited). Another
    writer's held document of an id this batch writes is set aside without being listed: the
    quarantine is not shown to other writers."""

    batch_id: int | None
    writer: str
    added: list[str]
    duplicates: list[dict[str, str]]
    displaced: list[str] = []
    quarantined: list[dict[str, Any]]
    provenance: list[ProvenanceOut]
    chunks_added: int
    generation: int
    warnings: list[str] = Field(default_factory=list, description=(
        "Set when the batch was committed but something after the commit failed (its search "
        "indexes could not be saved: a full disk). The documents are stored all the same."))


class DocumentOut(BaseModel):
    id: str
    title: str
    source: str
    origin: str
    text: str
    tier: TierName
    writer: str
    provenance: str
    ingested_at: float
    batch_id: int
    content_hash: str


class DeletedOut(BaseModel):
    """What a DELETE did: a stored document ``deleted`` (kept as a tombstone), or a
    quarantined one ``withdrawn`` by its writer or ``discarded`` by an admin (its id is free
    again). ``signature_withdrawn_up_to``: with ``withdraw=true``, the publisher's signed
    versions of this id that no longer make it trusted."""

    id: str
    title: str
    tier: str
    writer: str
    content_hash: str
    provenance: str
    deleted_at: float
    deleted_by: str
    reason: str
    state: Literal["deleted", "withdrawn", "discarded"] = "deleted"
    signature_withdrawn_up_to: int | None = None


class WithdrawalIn(Strict):
    """A publisher's signed withdrawal of its records of one id, up to a version: made with
    `trishield keys sign-withdrawal`; any writer may relay it."""

    publisher: str = Field(min_length=1, max_length=64)
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    up_to_version: int = Field(ge=1, le=MAX_VERSION)
    issued_at: int = Field(ge=0, le=MAX_ISSUED_AT)
    signature: str = Field(min_length=1, max_length=200,
                           description="base64 Ed25519 signature of 'trishield-withdrawal-v1\\n'"
                                       " + canonical JSON of id, issued_at, up_to_version.")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_document_id(value)


class WithdrawalOut(BaseModel):
    """``deleted``: whether the stored document carried one of the withdrawn records (it is
    then deleted, kept as a tombstone)."""

    publisher: str
    id: str
    withdrawn_up_to: int
    deleted: bool


class QuarantinedOut(BaseModel):
    id: str
    title: str
    source: str
    origin: str
    text: str
    tier: str
    writer: str
    provenance: str
    verdict: dict[str, Any]
    quarantined_at: float
    batch_id: int
    released_at: float | None
    released_by: str | None
    content_hash: str
    state: Literal["held", "released", "discarded", "withdrawn"]
    closed_at: float | None
    closed_by: str | None
    closed_reason: str


class QuarantineList(BaseModel):
    documents: list[QuarantinedOut]


class ReleaseResponse(BaseModel):
    id: str
    released_by: str
    chunks_added: int
    generation: int


class SearchRequest(Strict):
    query: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    backend: Backend = "hybrid"
    k: int = Field(5, ge=1, le=100)


class SearchHit(CandidateRow):
    """A retrieved chunk as the trace lists it, with its text."""

    text: str


class SearchResponse(BaseModel):
    query: str
    backend: str
    k: int
    results: list[SearchHit]


class AskRequest(Strict):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    defense: Defense = "full"
    backend: Backend | None = Field(None, description="Default: the service's configuration.")
    panel: list[str] | None = Field(None, min_length=1, max_length=MAX_PANEL,
                                    description="Panel members by name (see GET /v1/panel); "
                                                "default: the service's panel.")
    gate: Literal[GATE_MODES] | None = None  # type: ignore[valid-type]
    stream: bool = Field(False, description="Answer in server-sent events "
                                            "(`text/event-stream`): a `stage` event as each "
                                            "stage ends, then `answer`, then `trace` (this "
                                            "response's JSON), or `error`.")


class AskResponse(BaseModel):
    """An answer or a refusal and its trace (``trishield.Trace``: sections that did not run
    are absent)."""

    answer: str | None
    refused: bool
    reason: str
    citations: list[str]
    trace: Trace


class PanelInfo(BaseModel):
    default: list[str]
    allowed: list[str]
    max_concurrent_asks: int


class Health(BaseModel):
    status: Literal["ok"]
    documents: int
    chunks: int
    quarantined: int
    generation: int
    read_only: bool = Field(False, description="The KB directory cannot be written: reads "
                                               "work, writes get 503.")


class WhoAmI(BaseModel):
    key_id: str
    name: str
    role: str
    tier: str


class ErrorDetail(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: one line that says what is wrong, and the fields concerned."""

    error: str
    status: int
    details: list[ErrorDetail] = []
