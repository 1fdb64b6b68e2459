"""API keys (writers, roles, tiers) and registered publishers, stored beside the KB.

Where: ``DIR/keys.sqlite``, a database of its own next to ``DIR/kb.sqlite``. Credentials are
not knowledge: keeping them apart means a KB can be copied, shared or restored without its
keys, the file can be ``0600`` while the KB stays readable, and creating or revoking a key
never takes the KB's write lock or moves its generation.

How: a key is ``tsk_<key id>_<secret>`` with a 256-bit random secret. Only the sha256 of the
whole token is stored (a slow password hash buys nothing for a 256-bit random secret), the
``key id`` finds the row, and the digests are compared in constant time. The token is shown
once, when it is created. Every request opens the database anew, so a revocation made with
the CLI while the service runs takes effect on the next request.

Checking a key writes nothing: the database uses a rollback journal (not WAL, whose readers
need a ``-shm`` file) and reads open it ``mode=ro``, so keys are checked on a full disk and in
a read-only directory (there, if an old WAL-mode file cannot be opened otherwise, it is opened
``immutable``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from trishield.errors import ConflictError, InputError, NotFoundError
from trishield.kb.documents import Tier

KEYS_DATABASE = "keys.sqlite"
TOKEN_PREFIX = "tsk"
MAX_TOKEN_CHARS = 128
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_TOKEN = re.compile(rf"^{TOKEN_PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{43}})$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('reader', 'writer', 'admin')),
    tier TEXT NOT NULL CHECK (tier IN ('trusted', 'neutral', 'untrusted')),
    token_sha256 TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL
);
CREATE TABLE IF NOT EXISTS publishers (
    name TEXT PRIMARY KEY,
    public_key TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL
);
CREATE TABLE IF NOT EXISTS withdrawn_signatures (
    publisher TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    up_to_version INTEGER NOT NULL,
    withdrawn_at REAL NOT NULL,
    withdrawn_by TEXT NOT NULL,
    PRIMARY KEY (publisher, doc_id)
);
"""
_UNIQUE_NAMES = ("CREATE UNIQUE INDEX IF NOT EXISTS api_keys_unique_name "
                 "ON api_keys(name COLLATE NOCASE)")
RESERVED_NAMES = frozenset({"cli"})
"""Writer names no key may take: ``cli`` is the CLI's default writer for local ingests."""


class Role(IntEnum):
    """What a key may do; each role includes the ones below it."""

    READER = 1  # search, ask, read documents
    WRITER = 2  # + ingest, delete its own documents
    ADMIN = 3  # + review and release the quarantine, delete any document

    @classmethod
    def parse(cls, name: str) -> Role:
        try:
            return cls[name.upper()]
        except KeyError:
            raise InputError(f"unknown role {name!r}; choose from reader, writer, admin") from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class ApiKey:
    """A key's identity as the service sees it after authentication (never the secret)."""

    key_id: str
    name: str
    role: Role
    tier: str
    created_at: float
    revoked_at: float | None

    def as_dict(self) -> dict[str, object]:
        return {"key_id": self.key_id, "name": self.name, "role": self.role.label,
                "tier": self.tier, "created_at": self.created_at,
                "revoked": self.revoked_at is not None}


@dataclass(frozen=True)
class Publisher:
    name: str
    public_key: str  # base64 of the raw 32-byte Ed25519 public key
    created_at: float
    revoked_at: float | None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "public_key": self.public_key,
                "created_at": self.created_at, "revoked": self.revoked_at is not None}


class AuthError(Exception):
    """A request's credentials are missing, malformed, unknown or revoked (HTTP 401)."""


def check_name(name: str, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"{what} {name!r} must be 1-64 characters of letters, digits, "
                         "'.', '_', '@' or '-', starting with a letter or digit")
    return name


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


class KeyStore:
    """The keys database of one KB directory."""

    def __init__(self, directory: str | Path):
        self.path = Path(directory) / KEYS_DATABASE
        if not self.path.parent.is_dir():
            raise InputError(f"{self.path.parent} is not a directory")
        fresh = not self.path.exists()
        self.read_only = not os.access(self.path.parent, os.W_OK) or (
            not fresh and not os.access(self.path, os.W_OK))
        if self.read_only:
            return
        with self._connect(write=True) as connection:
            connection.executescript(_SCHEMA)
            # a keys database from before names were unique keeps its duplicates (and
            # create_key still checks); ownership is bound to key ids, not names, anyway
            with contextlib.suppress(sqlite3.IntegrityError):
                connection.execute(_UNIQUE_NAMES)
            # files made in WAL mode by earlier versions: then readers write nothing; if
            # another process has it open, the next start converts it
            with contextlib.suppress(sqlite3.OperationalError):
                connection.execute("PRAGMA journal_mode=DELETE")
        if fresh:
            os.chmod(self.path, 0o600)

    @contextmanager
    def _connect(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection for one operation: read-only unless ``write`` (see the module doc)."""
        if write and self.read_only:
            raise InputError(f"{self.path} is read-only; keys cannot be created or revoked "
                             "here")
        if write:
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        else:
            connection = self._open_read_only()
        try:
            yield connection
        finally:
            connection.close()

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.exists():  # a read-only directory that never had keys: none exist
            empty = sqlite3.connect(":memory:", isolation_level=None)
            empty.executescript(_SCHEMA)
            return empty
        uri = f"file:{urllib.parse.quote(str(self.path.resolve()))}?mode=ro"
        connection = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=5.0)
        try:
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.OperationalError:
            connection.close()
            if not self.read_only:
                raise
        return sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None)

    # -- API keys ---------------------------------------------------------------------------
    def create_key(self, name: str, role: str, tier: str) -> tuple[ApiKey, str]:
        """A new key; returns it and the token, which is never stored and never shown again.

        The name is the writer's identity in the audit log, in provenance notes and to Ring
        1, so it is unique (ignoring case) among all keys ever created, revoked ones too: a
        name always means one key. ``cli`` is reserved for local writes."""
        check_name(name, "writer name")
        if name.lower() in RESERVED_NAMES:
            raise InputError(f"writer name {name!r} is reserved for local (CLI) writes")
        parsed_role = Role.parse(role)
        try:
            tier = Tier(tier).value
        except ValueError:
            raise InputError(f"unknown tier {tier!r}; choose from trusted, neutral, "
                             "untrusted") from None
        key_id = secrets.token_hex(6)
        token = f"{TOKEN_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        now = time.time()
        with self._connect(write=True) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                taken = connection.execute(
                    "SELECT key_id, revoked_at FROM api_keys WHERE name = ? COLLATE NOCASE",
                    (name,)).fetchone()
                if taken is not None:
                    state = "revoked " if taken[1] is not None else ""
                    raise ConflictError(
                        f"writer name {name!r} is taken by {state}key {taken[0]}; a name "
                        "always means one key (revoked names are not reused), pick another")
                connection.execute(
                    "INSERT INTO api_keys(key_id, name, role, tier, token_sha256, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (key_id, name, parsed_role.label, tier, _digest(token), now))
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        return ApiKey(key_id, name, parsed_role, tier, now, None), token

    def api_keys(self) -> list[ApiKey]:
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT key_id, name, role, tier, created_at, revoked_at FROM api_keys "
                "ORDER BY created_at").fetchall()
        return [ApiKey(k, n, Role.parse(r), t, c, v) for k, n, r, t, c, v in rows]

    def revoke_key(self, key_id: str) -> ApiKey:
        with self._connect(write=True) as connection:
            changed = connection.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
                (time.time(), key_id)).rowcount
        found = [k for k in self.api_keys() if k.key_id == key_id]
        if not found:
            raise NotFoundError(f"no API key with id {key_id!r} (see `trishield keys list`)")
        if not changed:
            raise ConflictError(f"API key {key_id!r} was already revoked")
        return found[0]

    def authenticate(self, token: str) -> ApiKey:
        """The key a bearer token belongs to; :class:`AuthError` saying why when none."""
        if len(token) > MAX_TOKEN_CHARS:
            raise AuthError("malformed API key (too long)")
        match = _TOKEN.match(token)
        if match is None:
            raise AuthError(f"malformed API key: expected {TOKEN_PREFIX}_<id>_<secret> as "
                            "created by `trishield keys create`")
        with self._connect() as connection:
            row = connection.execute(
                "SELECT key_id, name, role, tier, created_at, revoked_at, token_sha256 "
                "FROM api_keys WHERE key_id = ?", (match.group(1),)).fetchone()
        # compare even when the id is unknown, so timing does not tell which ids exist
        stored = row[6] if row else "0" * 64
        if not hmac.compare_digest(stored, _digest(token)) or row is None:
            raise AuthError("invalid API key")
        if row[5] is not None:
            raise AuthError(f"API key {row[0]} has been revoked")
        return ApiKey(row[0], row[1], Role.parse(row[2]), row[3], row[4], row[5])

    # -- publishers -------------------------------------------------------------------------
    def add_publisher(self, name: str, public_key: str) -> Publisher:
        """Register a trusted publisher's Ed25519 public key (base64 of the raw 32 bytes)."""
        check_name(name, "publisher name")
        now = time.time()
        with self._connect(write=True) as connection:
            try:
                connection.execute(
                    "INSERT INTO publishers(name, public_key, created_at) VALUES (?, ?, ?)",
                    (name, public_key, now))
            except sqlite3.IntegrityError:
                raise ConflictError(f"a publisher named {name!r} is already registered "
                                    "(revoked names are not reused)") from None
        return Publisher(name, public_key, now, None)

    def publishers(self) -> list[Publisher]:
        with self._connect() as connection:
            rows = connection.execute("SELECT name, public_key, created_at, revoked_at "
                                      "FROM publishers ORDER BY created_at").fetchall()
        return [Publisher(*row) for row in rows]

    def publisher(self, name: str) -> Publisher | None:
        with self._connect() as connection:
            row = connection.execute("SELECT name, public_key, created_at, revoked_at "
                                     "FROM publishers WHERE name = ?", (name,)).fetchone()
        return None if row is None else Publisher(*row)

    def withdraw_signature(self, publisher: str, doc_id: str, version: int, *,
                           by: str) -> int:
        """Withdraw ``publisher``'s signed records of ``doc_id`` up to ``version``: they no
        longer make that document trusted (a new version must be signed). Returns the
        version withdrawn up to (never lowered by a later, smaller withdrawal)."""
        check_name(publisher, "publisher name")
        if not 1 <= version <= 2**31 - 1:
            raise InputError(f"version must be between 1 and {2**31 - 1}, got {version}")
        with self._connect(write=True) as connection:
            connection.execute(
                "INSERT INTO withdrawn_signatures(publisher, doc_id, up_to_version, "
                "withdrawn_at, withdrawn_by) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(publisher, doc_id) DO UPDATE SET "
                "up_to_version = MAX(up_to_version, excluded.up_to_version), "
                "withdrawn_at = excluded.withdrawn_at, withdrawn_by = excluded.withdrawn_by",
                (publisher, doc_id, version, time.time(), by))
        return self.withdrawn_version(publisher, doc_id) or version

    def withdrawn_version(self, publisher: str, doc_id: str) -> int | None:
        """The highest withdrawn version of ``doc_id`` signed by ``publisher``, if any."""
        with self._connect() as connection:
            known = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                       "name = 'withdrawn_signatures'").fetchone()
            if known is None:  # a keys file from before withdrawals, opened read-only
                return None
            row = connection.execute(
                "SELECT up_to_version FROM withdrawn_signatures WHERE publisher = ? "
                "AND doc_id = ?", (publisher, doc_id)).fetchone()
        return None if row is None else row[0]

    def revoke_publisher(self, name: str) -> Publisher:
        with self._connect(write=True) as connection:
            changed = connection.execute(
                "UPDATE publishers SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
                (time.time(), name)).rowcount
        found = self.publisher(name)
        if found is None:
            raise NotFoundError(f"no publisher named {name!r}")
        if not changed:
            raise ConflictError(f"publisher {name!r} was already revoked")
        return found
