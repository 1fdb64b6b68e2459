"""A client of a running ``trishield serve``: the warm path of ``trishield ask/search``.

A local ``trishield ask`` loads the embedder, the indexes and the panel's models for every
question (5-17 s before retrieval starts); a server has them loaded already. With
``--server URL`` the CLI sends the request here and prints the answer exactly as the local
command does. Every failure is one clear :class:`ServiceError`: the server cannot be reached,
does not answer in time, refuses the key (401/403) or the request (4xx with the server's own
message), or answers something that is not TriShield's API.

Plain ``httpx`` (a main dependency); no FastAPI, so the CLI never imports the server's stack
for this.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from trishield.errors import TriShieldError
from trishield.pipeline import Answer
from trishield.trace import Trace

TOKEN_ENV = "TRISHIELD_API_KEY"
DEFAULT_TIMEOUT_S = 600.0
"""A full-panel ask on two busy cores can take minutes; a search takes milliseconds."""


class ServiceError(TriShieldError):
    """The server could not be used: unreachable, refused the key or the request. A refusal
    of the caller's key or request (4xx) exits 2, like other bad input; the rest exit 1."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status
        self.exit_code = 2 if status is not None and 400 <= status < 500 else 1


def check_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an http(s) URL with a host and no query."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServiceError(f"--server must be an http:// or https:// URL with a host, e.g. "
                           f"http://127.0.0.1:8080, got {url!r}", status=400)
    if parts.query or parts.fragment:
        raise ServiceError(f"--server must not carry a query or fragment, got {url!r}",
                           status=400)
    return url.strip().rstrip("/")


class ServiceClient:
    """Requests to one server with one API key."""

    def __init__(self, url: str, token: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT_S):
        self.url = check_url(url)
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        if not token or not token.strip():
            raise ServiceError(f"--server needs an API key: pass --token or set {TOKEN_ENV} "
                               "(`trishield keys create NAME --kb KB` makes one)", status=401)
        self.token = token.strip()
        self.timeout = timeout

    def search(self, query: str, *, backend: str, k: int) -> dict[str, Any]:
        return self._post("/v1/search", {"query": query, "backend": backend, "k": k})

    def ask(self, question: str, *, defense: str, backend: str | None,
            panel: list[str] | None, gate: str | None) -> Answer:
        """The server's answer as the local pipeline returns it (the trace re-validated)."""
        body: dict[str, Any] = {"question": question, "defense": defense}
        for name, value in (("backend", backend), ("panel", panel), ("gate", gate)):
            if value is not None:
                body[name] = value
        reply = self._post("/v1/ask", body)
        try:
            return Answer(reply["answer"], reply["refused"], reply["reason"],
                          reply["citations"], Trace.model_validate(reply["trace"]))
        except (KeyError, TypeError, ValidationError) as error:
            raise ServiceError(f"the server at {self.url} answered with a record this CLI "
                               f"cannot read (another TriShield version?): "
                               f"{str(error).splitlines()[0][:200]}") from None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = httpx.post(f"{self.url}{path}", json=body, timeout=self.timeout,
                                  headers={"Authorization": f"Bearer {self.token}"})
        except httpx.ConnectError as error:
            raise ServiceError(f"cannot reach the TriShield server at {self.url}: {error} "
                               "(is `trishield serve` running there?)") from None
        except httpx.TimeoutException:
            raise ServiceError(f"the TriShield server at {self.url} did not answer "
                               f"{path} within {self.timeout:g} s") from None
        except httpx.HTTPError as error:
            raise ServiceError(f"the request to {self.url}{path} failed: {error}") from None
        payload = _json(response)
        if response.status_code == 200 and payload is not None:
            return payload
        message = (payload or {}).get("error") if isinstance(payload, dict) else None
        if message is None:
            kind = response.headers.get("content-type", "no content type")[:60]
            raise ServiceError(f"{self.url}{path} answered HTTP {response.status_code} with "
                               f"{kind}, not TriShield's JSON: is this a TriShield server?",
                               status=response.status_code if response.status_code != 200
                               else None)
        what = {401: "refused the API key", 403: "refused this key's role"}.get(
            response.status_code, "refused the request")
        retry = response.headers.get("retry-after")
        raise ServiceError(f"the server at {self.url} {what} (HTTP {response.status_code}): "
                           f"{message}" + (f"; retry after {retry} s" if retry else ""),
                           status=response.status_code)


def _json(response: httpx.Response) -> Any:
    if not response.headers.get("content-type", "").startswith("application/json"):
        return None
    try:
        return response.json()
    except ValueError:
        return None
