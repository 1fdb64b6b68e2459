"""How ``trishield ask/search --kb DIR`` finds a ``trishield serve`` running over DIR.

A server writes :data:`SERVER_FILE` into the KB directory once its port is open: its URL,
process id, user id and this run's local key (a reader's, :mod:`trishield.service.local_key`),
readable by its user only (mode 0600), and removes it when it stops. The CLI uses the server
(the warm path: models and indexes loaded) when the file is there and trustworthy, with the
local key unless ``--token``/``$TRISHIELD_API_KEY`` names another, and opens the KB itself
otherwise:

* the file must be a regular file owned by the caller's user, with no group or other
  permission bits, naming the caller's user id: a server of another user is never used
  (and another user cannot plant a file that sends this user's questions elsewhere);
* its process must be alive (a server killed without its shutdown leaves a stale file,
  which is ignored) and its URL must be a loopback http URL;
* ``/healthz`` must answer within :data:`PROBE_TIMEOUT_S`.

The key is written only after the file is known to be the server user's alone (its mode read
back from the open descriptor): on a file system that ignores ``chmod`` the file says where
the server is, never its key (and the CLI, seeing the permissions, ignores it anyway).

Nothing here imports the server's stack (FastAPI, uvicorn): the CLI reads and probes the
file with the standard library and httpx.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from urllib.parse import urlsplit

SERVER_FILE = ".trishield-serve.json"
LOCAL_TOKEN_PREFIX = "tsl"
LOCAL_TOKEN = re.compile(rf"^{LOCAL_TOKEN_PREFIX}_[A-Za-z0-9_-]{{43}}$")
"""The form of a run's local key (:mod:`trishield.service.local_key` issues them): defined
here so that the CLI checks what it reads without importing the key store."""
PROBE_TIMEOUT_S = 1.0
"""A local server answers /healthz in milliseconds; a busy machine gets a second."""


@dataclass(frozen=True)
class RunningServer:
    """A ``trishield serve`` found through its KB directory."""

    url: str
    pid: int
    local_key: str | None = None
    """The run's local key (a reader's), or ``None`` when the server issued none."""


def url_for(host: str, port: int) -> str:
    """The URL a local client reaches ``host:port`` by (a wildcard address: loopback)."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def announce(kb_dir: Path, url: str, local_key: str | None = None) -> Path:
    """Write the server file of ``kb_dir`` atomically, mode 0600 from its creation;
    ``local_key`` only if the file is then this user's alone (see the module docstring)."""
    path = kb_dir / SERVER_FILE
    record: dict[str, object] = {"url": url, "pid": os.getpid(), "uid": os.getuid(),
                                 "started_at": time.time()}
    descriptor, scratch = tempfile.mkstemp(dir=kb_dir, prefix=".serve-", suffix=".tmp")
    try:
        os.fchmod(descriptor, 0o600)
        if local_key is not None and _private(os.fstat(descriptor)):
            record["local_key"] = local_key
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
    return path


def withdraw(kb_dir: Path) -> None:
    """Remove the server file if this process wrote it (another server's stays)."""
    path = kb_dir / SERVER_FILE
    record = _read(path)
    if record is not None and record.get("pid") == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def find(kb_dir: Path) -> RunningServer | None:
    """The server running over ``kb_dir`` for this user, or ``None`` (see the module
    docstring for every check)."""
    record = _read(kb_dir / SERVER_FILE)
    if record is None or record.get("uid") != os.getuid():
        return None
    pid, url, key = record.get("pid"), record.get("url"), record.get("local_key")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 \
            or not isinstance(url, str) or not _loopback(url) or not _alive(pid):
        return None
    if not (isinstance(key, str) and LOCAL_TOKEN.match(key)):
        key = None
    import httpx

    try:
        healthy = httpx.get(f"{url}/healthz", timeout=PROBE_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return None
    return RunningServer(url, pid, key) if healthy else None


def _read(path: Path) -> dict | None:
    """The file's record if it is a regular file of this user that only this user can read
    or write; ``None`` for anything else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not _private(info) or info.st_size > 4096:
            return None
        try:
            record = json.loads(handle.read())
        except (ValueError, UnicodeDecodeError):
            return None
    return record if isinstance(record, dict) else None


def _private(info: os.stat_result) -> bool:
    """A regular file of this user that no group or other user may read or write."""
    return (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
            and not info.st_mode & 0o077)


def _loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.path or parts.query:
        return False
    try:
        return ip_address(parts.hostname).is_loopback
    except ValueError:
        return parts.hostname == "localhost"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's: not ours to use
        return False
    return True
