"""HTTP plumbing that keeps bad input out and turns every failure into a clear 4xx.

* :class:`BodyGuard` refuses request heads over 16 KiB (431: HTTP parsers differ in what they
  allow), then reads a request body before any route sees it: over the size limit
  -> 413 (checked against ``Content-Length`` first, then while streaming, so a lying or
  missing header cannot get more through); not JSON -> 415; not UTF-8 -> 400 naming the byte;
  not valid JSON, a duplicate key, ``NaN``/``Infinity``, a number too long to convert (over
  4,300 digits) or absurd nesting -> 400 naming the line and column where it can. Routes then
  only ever parse well-formed JSON.
* :func:`install_error_handlers` gives every error one shape (:class:`ErrorBody`) and never a
  traceback: validation problems list each field with what is wrong (unknown fields by name);
  a busy knowledge base (a lock held elsewhere, a full write backlog) is 503 with
  ``Retry-After``, a full disk 507 saying whether anything was written, a read-only one 503.
* :class:`Instrumentation` records each request's route template, status and latency for
  ``/metrics`` and adds the browser security headers (the viewer shows attacker-written text,
  so the pages forbid inline script and framing).
"""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from trishield.errors import (
    BusyError,
    ConflictError,
    InputError,
    NotFoundError,
    ReadOnlyError,
    StorageFullError,
    TriShieldError,
)
from trishield.service.fairness import KeyOverShare
from trishield.service.metrics import ServiceMetrics

log = logging.getLogger("trishield.service")
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
MAX_JSON_DEPTH = 64
MAX_HEADER_BYTES = 16 * 1024
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"object-src 'none'; base-uri 'none'; frame-ancestors 'none'"),
]


def error_body(status: int, message: str, details: list[dict[str, str]] | None = None,
               headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "status": status, "details": details or []},
                        status_code=status, headers=headers)


class BadBody(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise BadBody(400, f"request body is ambiguous: duplicate key {key!r}")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise BadBody(400, f"request body is not valid JSON: {name} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a recursive walk could itself overflow)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
    return deepest


def check_json_body(body: bytes, content_type: str | None) -> None:
    """Raise :class:`BadBody` unless ``body`` is a UTF-8 JSON document of sane depth."""
    media, _, params = (content_type or "").partition(";")
    if media.strip().lower() != "application/json":
        raise BadBody(415, f"request body must be application/json, got "
                           f"{media.strip()[:60] or 'no Content-Type'!r}")
    charset = params.strip().lower()
    if charset and charset.replace(" ", "") not in ("charset=utf-8", "charset=utf8"):
        raise BadBody(415, f"request body must be UTF-8 JSON, got {charset[:60]!r}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadBody(400, f"request body is not valid UTF-8 (byte {error.start}: "
                           f"{error.reason})") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys,
                           parse_constant=_no_constants)
    except json.JSONDecodeError as error:
        raise BadBody(400, f"request body is not valid JSON: {error.msg} at line "
                           f"{error.lineno} column {error.colno}") from None
    except RecursionError:
        raise BadBody(400, "request body is nested too deeply") from None
    except ValueError as error:  # an integer beyond Python's conversion limit (4,300 digits)
        raise BadBody(400, f"request body is not acceptable JSON: a number is too long to "
                           f"read ({str(error)[:120]})") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise BadBody(400, f"request body is nested more than {MAX_JSON_DEPTH} levels deep")


class BodyGuard:
    """ASGI middleware: bounded, well-formed JSON bodies or a 4xx before any route runs."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str, str], int]):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header_bytes = sum(len(name) + len(value) for name, value in scope["headers"])
        if header_bytes > MAX_HEADER_BYTES:
            await error_body(431, f"request headers of {header_bytes:,} bytes are over the "
                                  f"limit of {MAX_HEADER_BYTES:,}")(scope, receive, send)
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["method"], scope["path"])
        headers = Headers(scope=scope)
        try:
            body = await self._read(headers, receive, limit)
            if body is None:
                return  # the client went away
            if body:
                check_json_body(body, headers.get("content-type"))
        except BadBody as problem:
            await error_body(problem.status, problem.message)(scope, receive, send)
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _read(headers: Headers, receive: Receive, limit: int) -> bytes | None:
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit() or len(declared) > 18:
                raise BadBody(400, "Content-Length is not a number")
            if int(declared) > limit:
                raise BadBody(413, f"request body of {int(declared):,} bytes is over the "
                                   f"limit of {limit:,} bytes for this endpoint")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BadBody(413, f"request body is over the limit of {limit:,} bytes for "
                                   "this endpoint")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class Instrumentation:
    """ASGI middleware: per-route request counts and latency, and security headers."""

    def __init__(self, app: ASGIApp, *, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or (
                "/viewer" if scope["path"].startswith("/viewer") else "unmatched")
            method = scope["method"] if scope["method"] in (
                "GET", "POST", "DELETE", "HEAD", "PUT", "PATCH", "OPTIONS") else "other"
            self.metrics.requests.labels(method, label, str(status)).inc()
            self.metrics.latency.labels(method, label).observe(time.perf_counter() - started)


def _field(location: tuple[Any, ...]) -> str:
    parts = [str(p) for p in location]
    if parts and parts[0] in ("body", "query", "path", "header"):
        where = parts[0]
        parts = parts[1:]
        return ".".join(parts) if where == "body" else f"{where} {'.'.join(parts)}"
    return ".".join(parts)


def _problem(error: dict[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def trishield_error_response(error: TriShieldError) -> JSONResponse:
    """The answer to a TriShield error: its class says whose fault it is and which status.
    A streamed answer (:mod:`trishield.service.stream`) sends the same body in its ``error``
    event."""
    if isinstance(error, NotFoundError):
        return error_body(404, str(error))
    if isinstance(error, ConflictError):
        return error_body(409, str(error))
    if isinstance(error, InputError):
        return error_body(422, str(error))
    if isinstance(error, KeyOverShare):
        return error_body(429, str(error), headers={"Retry-After": str(error.retry_after)})
    if isinstance(error, BusyError):
        log.warning("busy: %s", error)
        return error_body(503, f"the knowledge base is busy: {error}",
                          headers={"Retry-After": str(error.retry_after)})
    if isinstance(error, StorageFullError):
        log.error("disk full: %s", error)
        return error_body(507, str(error), [{"field": "committed",
                                             "problem": str(error.committed).lower()}])
    if isinstance(error, ReadOnlyError):
        return error_body(503, f"the knowledge base is read-only: {error}")
    log.error("service error: %s", error)
    return error_body(503, f"the service cannot answer now: {error}")


def install_error_handlers(app: FastAPI) -> None:
    """One error shape for everything; the status says whose fault it is."""

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, error: RequestValidationError) -> JSONResponse:
        details = [{"field": _field(tuple(e.get("loc", ()))) or "body", "problem": _problem(e)}
                   for e in error.errors()]
        summary = "; ".join(f"{d['field']}: {d['problem']}" for d in details[:5])
        more = f" (and {len(details) - 5} more)" if len(details) > 5 else ""
        return error_body(422, f"invalid request: {summary}{more}", details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = error.detail if isinstance(error.detail, str) else "request refused"
        if error.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path[:200]}"
        if error.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path[:200]}"
        return error_body(error.status_code, message, headers=error.headers)

    @app.exception_handler(TriShieldError)
    async def _trishield(_: Request, error: TriShieldError) -> JSONResponse:
        return trishield_error_response(error)

    @app.exception_handler(sqlite3.Error)
    async def _storage(request: Request, error: sqlite3.Error) -> JSONResponse:
        """SQLite errors the KB layer did not translate (a read on a locked or damaged file):
        the storage's fault, never a traceback."""
        log.error("storage error on %s %s: %s", request.method, request.url.path, error)
        message = str(error).lower()
        if "locked" in message or "busy" in message:
            return error_body(503, "the knowledge base is locked by another process; retry",
                              headers={"Retry-After": "5"})
        if "full" in message:
            return error_body(507, "the disk is full")
        return error_body(503, f"the knowledge base cannot be read now: {error}")

    @app.exception_handler(OSError)
    async def _os(request: Request, error: OSError) -> JSONResponse:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            log.error("disk full on %s %s: %s", request.method, request.url.path, error)
            return error_body(507, "the disk is full")
        if error.errno in (errno.EROFS, errno.EACCES):
            return error_body(503, "the knowledge base directory cannot be written")
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_body(500, "internal error; the server log has the details")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_body(500, "internal error; the server log has the details")
