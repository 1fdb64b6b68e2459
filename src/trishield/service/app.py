"""The ASGI app: the HTTP API over one knowledge base, its metrics and the trace viewer.

Routes are plain (synchronous) functions, so FastAPI runs them in its thread pool and the
event loop stays free; :mod:`trishield.service.runtime` bounds what runs at once. The ask is
the exception: it waits for its slot on the event loop and runs on the ask threads
(:mod:`trishield.service.fairness`), so queued asks never hold the pool's threads. Routes that
write are coroutines that run the route on the writer thread (``state.writes.serialised``).
The OpenAPI document is at ``/openapi.json``, a script-free reference page rendered from it at
``/docs`` (:mod:`trishield.service.docs_page` says why not Swagger UI), the viewer at
``/viewer/``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Response
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles

from trishield import __version__
from trishield.errors import ForbiddenError, InputError, NotFoundError
from trishield.kb import Document, content_hash
from trishield.kb.loaders import validate_document
from trishield.provenance.keys import ApiKey, Role
from trishield.provenance.signing import (
    ProvenanceClaim,
    SignedWithdrawal,
    decide_provenance,
    withdrawal_problem,
)
from trishield.rings.ingest_guard import IngestGuard
from trishield.service import disputes, docs_page, stream
from trishield.service import models as m
from trishield.service.auth import bearer_scheme, require
from trishield.service.fairness import Slot
from trishield.service.http import BodyGuard, Instrumentation, error_body, install_error_handlers
from trishield.service.runtime import QUERY_BODY_BYTES, Runtime, ServiceConfig
from trishield.service.stream import Fanout
from trishield.telemetry import SpanObserver

VIEWER_DIR = Path(__file__).parent / "viewer"


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": m.ErrorBody} for code in codes}


def _document_id(doc_id: str) -> str:
    try:
        return m.check_document_id(doc_id)
    except ValueError as error:
        raise HTTPException(400, f"invalid document id: {error}") from None


DocId = Annotated[str, PathParam(description="Document id (may contain '/').",
                                 min_length=1, max_length=256)]


def _closed(record: dict[str, Any]) -> dict[str, Any]:
    """A closed quarantine row in the shape of a DELETE's answer."""
    return {"id": record["id"], "title": record["title"], "tier": record["tier"],
            "writer": record["writer"], "content_hash": record["content_hash"],
            "provenance": record["provenance"], "deleted_at": record["closed_at"],
            "deleted_by": record["closed_by"], "reason": record["closed_reason"],
            "state": record["state"]}


def create_app(config: ServiceConfig, *, runtime: Runtime | None = None) -> FastAPI:
    """A new app over ``config.kb_dir`` (one :class:`Runtime` per app)."""
    state = runtime or Runtime(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        state.close()

    app = FastAPI(title="TriShield", version=__version__, lifespan=lifespan,
                  description="Retrieval-Augmented Generation defended by three rings, for "
                              "a knowledge base with many writers. Every answer carries its "
                              "trace.",
                  dependencies=[Depends(bearer_scheme)], docs_url=None, redoc_url=None)
    app.state.runtime = state
    install_error_handlers(app)
    reader = Depends(require(state, Role.READER, "reading"))
    writer = Depends(require(state, Role.WRITER, "writing documents"))
    admin = Depends(require(state, Role.ADMIN, "reviewing the quarantine"))
    common = _errors(400, 401, 403, 413, 415, 422)

    @app.get("/healthz", response_model=m.Health, tags=["service"],
             responses=_errors(503))
    async def healthz() -> dict[str, Any]:
        """Liveness and what the KB holds (no key needed); its own thread and handle, so no
        other request makes it wait."""
        return await state.health()

    @app.get("/metrics", tags=["service"], response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format"}})
    def metrics() -> Response:
        """Prometheus metrics: queries, blocks per ring, panel calls, refusals, latencies."""
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    @app.get("/v1/whoami", response_model=m.WhoAmI, responses=_errors(401, 403),
             tags=["service"])
    def whoami(key: ApiKey = reader) -> dict[str, Any]:
        """The caller's key: writer name, role and provenance tier."""
        return {"key_id": key.key_id, "name": key.name, "role": key.role.label,
                "tier": key.tier}

    @app.get("/v1/panel", response_model=m.PanelInfo, responses=_errors(401, 403),
             tags=["ask"])
    def panel_info(key: ApiKey = reader) -> dict[str, Any]:
        """The default panel and the members a request may choose instead."""
        return {"default": list(state.default_specs), "allowed": list(state.allowed),
                "max_concurrent_asks": config.max_concurrent_asks}

    @app.post("/v1/documents", response_model=m.IngestResponse, tags=["documents"],
              responses=_errors(400, 401, 403, 409, 413, 415, 422, 503, 507))
    @state.writes.serialised
    def ingest(body: m.IngestRequest, key: ApiKey = writer) -> dict[str, Any]:
        """Write one document or a batch, atomically; the tier comes from the key or from a
        registered publisher's signature, and Ring 1 screens every document."""
        documents, verdicts = [], []
        for number, item in enumerate(body.documents):
            claim = None if item.provenance is None else ProvenanceClaim(
                item.provenance.publisher, item.provenance.signature, item.provenance.tier,
                item.provenance.version, item.provenance.issued_at)
            verdict = decide_provenance(state.keys, key, content_hash(item.text), claim,
                                        doc_id=item.id)
            document = Document(id=item.id, text=item.text, title=item.title,
                                source=item.source, origin=f"api:{key.name}:{number}",
                                tier=verdict.tier, provenance=verdict.note,
                                signed=verdict.signed)
            documents.append(validate_document(document, path=f"documents[{number}]"))
            verdicts.append({"id": item.id} | verdict.as_dict())
        guard = IngestGuard(config.settings.pipeline.guard)
        with state.writing() as kb:
            report = kb.ingest(documents, tier=key.tier, writer=key.name,
                               source=f"api key {key.key_id}", guard=guard,
                               writer_key=key.key_id)
        tiers = {d.id: d.tier for d in documents}
        for doc_id in report.added:
            state.metrics.documents.labels("added", tiers[doc_id]).inc()
        for held in report.quarantined:
            state.metrics.documents.labels("quarantined", tiers[held["id"]]).inc()
            state.metrics.blocks.labels("ingest").inc()
        state.metrics.documents.labels("duplicate", key.tier).inc(len(report.duplicates))
        state.metrics.unverified.inc(sum(1 for v in verdicts if v["note"].startswith("UNVER")))
        return {"batch_id": report.batch_id, "writer": key.name, "added": report.added,
                "duplicates": report.duplicates, "displaced": report.displaced,
                "quarantined": report.quarantined,
                "provenance": verdicts, "chunks_added": report.chunks_added,
                "generation": report.generation, "warnings": report.warnings}

    @app.get("/v1/documents/{doc_id:path}", response_model=m.DocumentOut, tags=["documents"],
             responses=_errors(400, 401, 403, 404, 410, 422))
    def get_document(doc_id: DocId, key: ApiKey = reader) -> Any:
        """One stored document with its provenance; 410 with the tombstone when deleted."""
        doc_id = _document_id(doc_id)
        with state.reader() as kb:
            record = kb.store.document(doc_id)
            tombstone = None if record else kb.store.deleted_document(doc_id)
            held = None if record or tombstone else kb.store.quarantined_document(doc_id)
        if record is not None:
            return record
        if tombstone is not None:
            return error_body(410, f"document {doc_id!r} was deleted by "
                                   f"{tombstone['deleted_by']}"
                                   + (f": {tombstone['reason']}" if tombstone["reason"] else ""))
        # the quarantine is shown to admins and to the writer whose document it holds only
        if held is not None and held["state"] == "held" and (
                key.role >= Role.ADMIN or held["writer_key"] == key.key_id):
            raise NotFoundError(f"document {doc_id!r} is not in the knowledge base: Ring 1 "
                                "holds it in quarantine (an admin can review it; its writer "
                                "can withdraw it with DELETE)")
        raise NotFoundError(f"no document {doc_id!r}")

    @app.delete("/v1/documents/{doc_id:path}", response_model=m.DeletedOut, tags=["documents"],
                responses=_errors(400, 401, 403, 404, 410, 422, 503, 507))
    @state.writes.serialised
    def delete_document(doc_id: DocId, key: ApiKey = writer,
                        reason: Annotated[str, Query(max_length=500)] = "",
                        withdraw: bool = False) -> Any:
        """Soft delete (kept as a tombstone, audited). Writers may delete what their own key
        wrote; admins anything. A document Ring 1 holds in quarantine is *withdrawn* by its
        writer or *discarded* by an admin, which frees its id. With ``withdraw=true`` a
        signed document's signature is withdrawn too (its publisher's versions up to the
        stored one), so the same signed record can never make it trusted again: only an
        admin, acting for the publisher, may do that (a signature belongs to its publisher,
        not to the key that relayed it)."""
        doc_id = _document_id(doc_id)
        owner = None if key.role >= Role.ADMIN else (key.name, key.key_id)
        try:
            with state.writing() as kb:
                record = kb.store.document(doc_id)
                if record is None:
                    return _remove_unstored(kb, doc_id, key, owner, reason)
                withdrawn = _withdraw_signature(kb, record, key) if withdraw else None
                tombstone = kb.delete(doc_id, by=key.name, reason=reason, owner=owner)
        except ForbiddenError as error:
            state.metrics.auth_failures.labels("403").inc()
            return error_body(403, str(error))
        return tombstone | {"state": "deleted", "signature_withdrawn_up_to": withdrawn}

    def _remove_unstored(kb: Any, doc_id: str, key: ApiKey, owner: tuple[str, str] | None,
                         reason: str) -> Any:
        held = kb.store.quarantined_document(doc_id)
        if held is not None and held["state"] == "held":
            closed = kb.discard(doc_id, by=key.name, reason=reason, owner=owner)
            return _closed(closed)
        tombstone = kb.store.deleted_document(doc_id)
        if tombstone is not None:
            return error_body(410, f"document {doc_id!r} was already deleted by "
                                   f"{tombstone['deleted_by']}")
        raise NotFoundError(f"no document {doc_id!r}")

    def _withdraw_signature(kb: Any, record: dict[str, Any], key: ApiKey) -> int:
        if not record["signed"]:
            raise InputError(f"withdraw=true withdraws a publisher's signature, and "
                             f"{record['id']!r} carries none (delete it without withdraw)")
        signed = json.loads(record["signed"])
        if key.role < Role.ADMIN:
            error = ForbiddenError(
                f"the signature on {record['id']!r} belongs to publisher "
                f"{signed['publisher']}: only the publisher (a signed withdrawal, POST "
                "/v1/withdrawals) or an admin acting for it can withdraw it; nothing was "
                "deleted")
            kb.audit_refused("withdraw-signature", key.name, key.key_id, record["id"], error)
            raise error
        return state.keys.withdraw_signature(signed["publisher"], record["id"],
                                             signed["version"], by=key.name)

    @app.post("/v1/withdrawals", response_model=m.WithdrawalOut, tags=["documents"],
              responses=_errors(400, 401, 403, 413, 415, 422, 503, 507))
    @state.writes.serialised
    def withdraw_signature(body: m.WithdrawalIn, key: ApiKey = writer) -> Any:
        """A publisher withdraws its signed records of one id up to a version, with a
        withdrawal it signed (any writer may relay it); the stored document is deleted when
        it carries one of them. Without the publisher's signature, only an admin can."""
        withdrawal = SignedWithdrawal(body.id, body.up_to_version, body.issued_at)
        problem = withdrawal_problem(state.keys, body.publisher, withdrawal, body.signature)
        with state.writing() as kb:
            if problem is not None:
                error = ForbiddenError(f"not a withdrawal by publisher {body.publisher!r}: "
                                       f"{problem}; nothing was withdrawn")
                kb.audit_refused("withdraw-signature", key.name, key.key_id, body.id, error)
                state.metrics.auth_failures.labels("403").inc()
                return error_body(403, str(error))
            upto = state.keys.withdraw_signature(body.publisher, body.id, body.up_to_version,
                                                 by=f"{body.publisher} (via {key.name})")
            record = kb.store.document(body.id)
            signed = json.loads(record["signed"]) if record and record["signed"] else None
            deleted = signed is not None and signed["publisher"] == body.publisher \
                and signed["version"] <= upto
            if deleted:
                kb.delete(body.id, by=key.name, reason=f"publisher {body.publisher} withdrew "
                                                       f"its signature up to version {upto}")
        return {"publisher": body.publisher, "id": body.id, "withdrawn_up_to": upto,
                "deleted": deleted}

    @app.get("/v1/quarantine", response_model=m.QuarantineList, tags=["quarantine"],
             responses=_errors(400, 401, 403, 422))
    def quarantine(key: ApiKey = admin, include_released: bool = False) -> dict[str, Any]:
        """What Ring 1 held back at ingest, with scores, reasons and provenance (admins)."""
        with state.reader() as kb:
            return {"documents": kb.store.quarantined(include_released=include_released)}

    @app.post("/v1/quarantine/{doc_id:path}/release", response_model=m.ReleaseResponse,
              tags=["quarantine"], responses=_errors(400, 401, 403, 404, 409, 422, 503, 507))
    @state.writes.serialised
    def release(doc_id: DocId, key: ApiKey = admin) -> dict[str, Any]:
        """Move a quarantined document into the KB (admins; audited)."""
        doc_id = _document_id(doc_id)
        with state.writing() as kb:
            report = kb.release(doc_id, by=key.name)
        return {"id": doc_id, "released_by": key.name, "chunks_added": report.chunks_added,
                "generation": report.generation}

    @app.post("/v1/quarantine/{doc_id:path}/discard", response_model=m.DeletedOut,
              tags=["quarantine"], responses=_errors(400, 401, 403, 404, 422, 503, 507))
    @state.writes.serialised
    def discard(doc_id: DocId, key: ApiKey = admin,
                reason: Annotated[str, Query(max_length=500)] = "") -> dict[str, Any]:
        """Discard a quarantined document: it is not stored and its id is free again (admins;
        audited, kept in the quarantine's history)."""
        doc_id = _document_id(doc_id)
        with state.writing() as kb:
            return _closed(kb.discard(doc_id, by=key.name, reason=reason))

    disputes.add_routes(app, state, _errors)

    @app.post("/v1/search", response_model=m.SearchResponse, tags=["ask"],
              responses=common | _errors(429, 503))
    def search(body: m.SearchRequest, key: ApiKey = reader) -> dict[str, Any]:
        """The top-k chunks (no rings), with tier, writer and provenance; each key has a share
        of searches in progress, beyond it 429 with ``Retry-After``."""
        with state.searching(key.key_id), state.reader() as kb:
            candidates = kb.search(body.query, backend=body.backend, k=body.k)
        state.metrics.queries.labels("search", "-").inc()
        return {"query": body.query, "backend": body.backend, "k": body.k,
                "results": [c.as_dict() for c in candidates]}

    @app.post("/v1/ask", response_model=m.AskResponse, response_model_exclude_unset=True,
              tags=["ask"],
              responses=_errors(400, 401, 403, 413, 415, 422, 429, 503) | {200: {
                  "description": "The answer and its trace; with `stream: true`, the same as "
                                 "server-sent events (`stage`..., `answer`, `trace`; or "
                                 "`error`)",
                  "content": {stream.MEDIA_TYPE: {"schema": {"type": "string"}}}}})
    async def ask(body: m.AskRequest, key: ApiKey = reader) -> Any:
        """An answer or a refusal, its citations and the trace of every ring's decision
        (streamed as each ring decides with ``stream: true``). Each key has a share of the
        ask slots: beyond it 429 with ``Retry-After``."""
        slot = await state.admit_ask(key.key_id)  # waits on the loop, not on a thread
        observers = state.observers(key.key_id)
        if body.stream:
            return await state.asks.run(slot, lambda: _stream(body, observers, slot),
                                        keep=True)
        return await state.asks.run(slot, lambda: _answer(body, observers))

    def _answer(body: m.AskRequest, observers: list[SpanObserver]) -> dict[str, Any]:
        panel = state.panel(body.panel)
        with state.asking(), state.reader() as kb:
            answer = state.pipeline(kb, panel, body.backend, body.gate, body.defense,
                                    own_panel=body.panel is not None).ask(
                body.question, observer=Fanout(observers) if observers else None)
        state.metrics.record_answer(body.defense, answer)
        return answer.as_dict()

    def _stream(body: m.AskRequest, observers: list[SpanObserver],
                slot: Slot) -> StreamingResponse:
        resources = ExitStack()
        with ExitStack() as on_failure:
            on_failure.push(resources)  # released here unless the stream takes them over
            resources.callback(slot.release)
            panel = state.panel(body.panel)
            resources.enter_context(state.asking())
            kb = resources.enter_context(state.reader())
            pipeline = state.pipeline(kb, panel, body.backend, body.gate, body.defense,
                                      own_panel=body.panel is not None)
            on_failure.pop_all()
        return stream.stream_answer(
            pipeline, body.question, resources, observers=observers,
            on_answer=lambda answer: state.metrics.record_answer(body.defense, answer))

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(docs_page.render(app.openapi(), stylesheet_url="/docs/style.css"))

    @app.get("/docs/style.css", include_in_schema=False)
    def docs_style() -> Response:
        return Response(docs_page.STYLESHEET, media_type="text/css")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/viewer/")

    app.mount("/viewer", StaticFiles(directory=VIEWER_DIR, html=True), name="viewer")

    def limit_for(method: str, path: str) -> int:
        if method == "POST" and path == "/v1/documents":
            return config.max_body_bytes
        return min(QUERY_BODY_BYTES, config.max_body_bytes)

    app.add_middleware(BodyGuard, limit_for=limit_for)
    app.add_middleware(Instrumentation, metrics=state.metrics)

    return app
