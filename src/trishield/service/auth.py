"""Who is calling: ``Authorization: Bearer <API key>`` -> an :class:`ApiKey` with a role.

401 means "we do not know who you are" (no key, malformed, unknown, revoked); 403 means "we
know, and your role may not do this". Both are counted in ``/metrics``. Nothing from a header
other than the key itself is ever read, so text planted in headers cannot reach a model.
A run's local key (:mod:`trishield.service.local_key`) is checked here too, and only from a
loopback peer.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException, Request
from fastapi.security import HTTPBearer

from trishield.provenance.keys import ApiKey, AuthError, Role
from trishield.service.local_key import is_local_token, loopback_peer
from trishield.service.runtime import Runtime

bearer_scheme = HTTPBearer(auto_error=False, description="An API key from "
                                                         "`trishield keys create`.")
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="trishield"'}


def authenticate(runtime: Runtime, header: str | None, peer: str | None = None) -> ApiKey:
    """The key of an ``Authorization`` header; ``peer`` is the caller's address (a local
    key is honoured only from a loopback one)."""
    if header is None:
        raise AuthError("missing API key: send 'Authorization: Bearer <key>'")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("malformed Authorization header: expected 'Bearer <key>'")
    token = token.strip()
    if is_local_token(token):
        local = runtime.local_key
        # one message for every refusal: a caller learns nothing about whether a local key
        # exists or why this one is not it
        if local is None or not loopback_peer(peer) or not local.matches(token):
            raise AuthError("invalid local key: it is honoured only by the server run that "
                            "issued it, from this machine")
        runtime.metrics.local_key_requests.inc()
        return local.identity
    return runtime.keys.authenticate(token)


def require(runtime: Runtime, role: Role, action: str) -> Callable[[Request], ApiKey]:
    """A FastAPI dependency: the caller's key, if its role is at least ``role``."""

    def dependency(request: Request) -> ApiKey:
        try:
            key = authenticate(runtime, request.headers.get("authorization"),
                               request.client.host if request.client else None)
        except AuthError as error:
            runtime.metrics.auth_failures.labels("401").inc()
            raise HTTPException(401, str(error), headers=_CHALLENGE) from None
        if key.role < role:
            runtime.metrics.auth_failures.labels("403").inc()
            raise HTTPException(403, f"key {key.key_id} ({key.name}) has role "
                                     f"{key.role.label}; {action} needs {role.label}")
        return key

    return dependency
