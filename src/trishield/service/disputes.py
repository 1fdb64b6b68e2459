"""The disputes queue over HTTP: ``GET /v1/disputes``, ``GET /v1/disputes/{id}``,
``POST /v1/disputes/{id}/resolve`` (docs/service.md, "Disputes").

Admins only, all three, as the quarantine is: a dispute holds the question someone else
asked (a reader sees only its own answers' traces) and, at ingest, the text of a document
Ring 1 holds in quarantine, which no one but admins and its writer may read; settling one
changes what the KB holds or trusts, which is an admin's decision. Reads borrow a reader
handle; the resolution runs on the writer thread like every write, audited under the key's
writer name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from trishield.kb.store.dispute_resolution import ACTIONS
from trishield.provenance.keys import ApiKey, Role
from trishield.service.auth import require
from trishield.service.models import Strict
from trishield.service.runtime import Runtime

DisputeId = Annotated[int, PathParam(ge=1, le=2**62, description="The dispute's id.")]
StateFilter = Literal["open", "resolved", "dismissed", "all"]
Action = Literal[ACTIONS]  # type: ignore[valid-type]


class DisputePassageOut(BaseModel):
    id: str
    doc_id: str
    writer: str
    tier: str
    ingested_at: float | None
    state: Literal["stored", "held", "gone"] | None = None
    """Where the passage is now (in ``GET /v1/disputes/{id}`` only)."""
    text: str | None = None


class DisputeSourceOut(BaseModel):
    writers: list[str]
    tier: str
    passages: list[DisputePassageOut]
    weight: float | None
    record: float | None
    established: bool
    stood_s: float | None


class DisputeSideOut(BaseModel):
    claim: str
    sources: list[DisputeSourceOut]
    top_tier: str | None
    weight: float | None


class DisputeOut(BaseModel):
    """A conflict between writers the evidence met (docs/design/ring3-consensus.md, "Disputes")."""

    id: int
    origin: Literal["question", "ingest"]
    question: str
    outcome: str
    decision: str
    reason: str
    sides: list[DisputeSideOut]
    writers: list[str]
    documents: list[str]
    first_seen: float
    last_seen: float
    occurrences: int
    state: Literal["open", "resolved", "dismissed"]
    closed_at: float | None
    closed_by: str | None
    resolution: dict[str, Any]


class DisputeList(BaseModel):
    disputes: list[DisputeOut]


class ResolveIn(Strict):
    action: Action
    side: int | None = Field(None, ge=1, le=100, description="The side to quarantine or "
                                                              "trust (from 1); none to dismiss.")
    note: str = Field("", max_length=500)


class ResolveOut(BaseModel):
    dispute: int
    action: str
    side: int | None
    by: str
    note: str
    documents: list[str]
    skipped: list[dict[str, str]]
    state: Literal["resolved", "dismissed"]


def add_routes(app: FastAPI, state: Runtime, errors: Any) -> None:
    """The three routes on ``app`` (``errors``: the app's helper that documents error
    responses)."""
    admin = Depends(require(state, Role.ADMIN, "reviewing disputes"))

    @app.get("/v1/disputes", response_model=DisputeList, tags=["disputes"],
             responses=errors(400, 401, 403, 422))
    def list_disputes(key: ApiKey = admin, state_filter: Annotated[
                          StateFilter, Query(alias="state")] = "open",
                      limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> dict[str, Any]:
        """Conflicts between writers that the evidence met, most recently met first (admins):
        question, claims, sources, weights and the decision."""
        with state.reader() as kb:
            return {"disputes": kb.disputes(state=state_filter, limit=limit)}

    @app.get("/v1/disputes/{dispute_id}", response_model=DisputeOut, tags=["disputes"],
             responses=errors(400, 401, 403, 404, 422))
    def show_dispute(dispute_id: DisputeId, key: ApiKey = admin) -> dict[str, Any]:
        """One dispute, each passage with its text and whether it is still stored, held in
        quarantine or gone (admins)."""
        with state.reader() as kb:
            return kb.dispute(dispute_id)

    @app.post("/v1/disputes/{dispute_id}/resolve", response_model=ResolveOut,
              tags=["disputes"], responses=errors(400, 401, 403, 404, 409, 422, 503, 507))
    @state.writes.serialised
    def resolve_dispute(dispute_id: DisputeId, body: ResolveIn,
                        key: ApiKey = admin) -> dict[str, Any]:
        """Settle a dispute (admins; audited under the key's name): ``quarantine`` a side
        (its stored documents are withdrawn into the quarantine; releasing them undoes it),
        ``trust`` a side (its stored documents are raised to the trusted tier), or
        ``dismiss`` it (nothing changes)."""
        with state.writing() as kb:
            done = kb.resolve_dispute(dispute_id, action=body.action, side=body.side,
                                      by=key.name, note=body.note)
        return done.as_dict() | {"state": "dismissed" if body.action == "dismiss"
                                 else "resolved"}
