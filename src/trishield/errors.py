"""Errors that TriShield reports to users.

Every error that crosses the public API or the CLI is a :class:`TriShieldError`, so that the CLI
can print one clear line and exit non-zero instead of a traceback. Input errors carry the file
and line they came from, because a user fixing a 10,000-line JSONL file needs to know where.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence


class TriShieldError(Exception):
    """Base class for every error TriShield reports on purpose."""

    exit_code = 1


class InputError(TriShieldError):
    """Bad user input: a malformed file, an invalid argument, an impossible configuration."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.message = message
        self.path = path
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        return f"{where}{self.message}"


class ContextOverflowError(InputError):
    """The question alone does not fit the reader's context window, whatever passages are
    left out: the same request fails every time, so it is the request's fault (HTTP 413),
    not a busy service. Passages that do not fit are cut or left out instead
    (:mod:`trishield.llm.context_budget`)."""

    exit_code = 6


class NotFoundError(InputError):
    """The thing named (a document, a key, a publisher) does not exist; HTTP maps it to 404."""


class ConflictError(InputError):
    """The request contradicts the stored state (a document already released, an id already
    used for another text); HTTP maps it to 409."""


class ForbiddenError(InputError):
    """The caller is known but may not do this to this thing (another writer's document);
    HTTP maps it to 403."""


class KnowledgeBaseError(TriShieldError):
    """The knowledge base cannot be used as asked (model mismatch, corrupt files, ...)."""

    exit_code = 3


class ModelError(TriShieldError):
    """A model is missing, fails its hash check, or cannot be loaded."""

    exit_code = 4


class MissingExtraError(ModelError):
    """An optional part of TriShield was used without the extra that installs its packages.

    The product installs what answering needs; the baselines, the benchmarks and the RAG
    libraries' integrations are extras (``pyproject.toml``), so a user who reaches one of them
    is told which ``pip install 'trishield[EXTRA]'`` brings it, not shown an ImportError from
    deep inside a library."""

    def __init__(self, purpose: str, extra: str, missing: Sequence[str]):
        self.extra = extra
        self.missing = tuple(missing)
        super().__init__(f"{purpose} needs {', '.join(self.missing)}, which TriShield's "
                         f"runtime does not install: pip install 'trishield[{extra}]'")


def require_extra(purpose: str, extra: str, modules: Sequence[str]) -> None:
    """Raise :class:`MissingExtraError` unless every top-level module in ``modules`` can be
    imported. Only looks them up (``importlib.util.find_spec``), so the check costs no
    import; the caller imports what it needs afterwards."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(purpose, extra, missing)


class DatasetError(TriShieldError):
    """A data set is missing from the data directory or fails its sha256 check."""

    exit_code = 5


class BusyError(KnowledgeBaseError):
    """The knowledge base is busy (another writer holds its lock, SQLite is locked by another
    process, the write backlog is full): nothing was done, and the same request can be retried
    after ``retry_after`` seconds. HTTP maps it to 503 with ``Retry-After``."""

    def __init__(self, message: str, *, retry_after: int = 5):
        super().__init__(message)
        self.retry_after = retry_after


class StorageFullError(KnowledgeBaseError):
    """The disk is full. ``committed`` tells the truth about the write that hit it: False means
    nothing was written. HTTP maps it to 507 Insufficient Storage."""

    def __init__(self, message: str, *, committed: bool = False):
        super().__init__(message)
        self.committed = committed


class ReadOnlyError(KnowledgeBaseError):
    """The knowledge base is served read-only (its directory or database cannot be written):
    reads work, every write is refused before anything is tried. HTTP maps it to 503."""
