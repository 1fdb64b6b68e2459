"""The local key: what lets ``trishield ask/search --kb DIR`` use a running server of the same
user without an API key.

``trishield serve`` issues one per run (unless ``--no-local-key``): a 256-bit random token,
``tsl_<secret>``, with reader rights only. The server keeps nothing but its sha256 in memory;
the token itself is written into the KB directory's server file
(:mod:`trishield.service.discovery`), which is mode 0600, owned by the server's user, checked
for both by the CLI before it is read, and removed when the server stops. Hence:

* another user can neither read the token (the file's mode) nor plant one (the CLI trusts only
  a file of its own user with no group or other permission bits);
* the key cannot write, review the quarantine or delete: a reader's rights, nothing more;
* it is accepted only from a loopback peer, so a server listening on a public address does not
  honour it from elsewhere even if it leaked;
* it dies with its run: a new run issues another one, so a file left by a killed server holds
  a token no server accepts;
* requests made with it are told apart from every API key: its name ``local:uid<N>`` is one no
  API key can have (``:`` is not allowed in key names), it shows in ``/v1/whoami``, in the
  telemetry's ``key_id``, and ``/metrics`` counts them (``trishield_local_key_requests``).

Nothing here imports the server's stack; the token format is checked by the CLI too.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from ipaddress import ip_address

from trishield.provenance.keys import ApiKey, Role
from trishield.service.discovery import LOCAL_TOKEN, LOCAL_TOKEN_PREFIX

LOCAL_KEY_TIER = "neutral"
"""A reader's tier is never used (readers write nothing); neutral is what a reader key gets by
default."""


def is_local_token(token: str) -> bool:
    """Whether ``token`` has the local key's form (``tsl_`` and 43 base64url characters)."""
    return isinstance(token, str) and LOCAL_TOKEN.match(token) is not None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def loopback_peer(host: str | None) -> bool:
    """Whether a request came from this machine (an IP address on the loopback network)."""
    if not host:
        return False
    try:
        return ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class LocalKey:
    """One run's local key, as the server holds it: the identity and the token's digest."""

    identity: ApiKey
    token_sha256: str

    @staticmethod
    def issue() -> tuple[LocalKey, str]:
        """A new local key for this process's user, and its token (to be written only into
        the 0600 server file)."""
        token = f"{LOCAL_TOKEN_PREFIX}_{secrets.token_urlsafe(32)}"
        identity = ApiKey(key_id=f"local-{secrets.token_hex(4)}", name=f"local:uid{os.getuid()}",
                          role=Role.READER, tier=LOCAL_KEY_TIER, created_at=time.time(),
                          revoked_at=None)
        return LocalKey(identity, _digest(token)), token

    def matches(self, token: str) -> bool:
        """Whether ``token`` is this key's (compared in constant time)."""
        return is_local_token(token) and hmac.compare_digest(self.token_sha256, _digest(token))
