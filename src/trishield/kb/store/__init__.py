"""The KB's truth: one SQLite database and everything kept inside its transactions.

``sqlite`` (:class:`Store`: connections, transactions, the documents, chunks, quarantine
and audit tables, and the reads the rest of kb/ needs; its read queries are in ``queries``,
its record keeping in ``records``), ``migrations`` (the schema, versioned), ``fts`` (the FTS5
table the lexical index reads, kept by triggers), ``change_log`` (the chunk change log the
indexes follow), ``writer_counts`` (documents per writer, kept by triggers), ``ownership``
(who owns an id and a text) and ``disputes`` + ``dispute_resolution`` (conflicts between
writers and settling them). Nothing here imports the indexes or the screening.

The names below are imported on first use (PEP 562), so that a light submodule
(``trishield.kb.store.disputes``) does not load the store and numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trishield.kb.store.sqlite import SCHEMA_VERSION, Store, StoredChunk, storage_errors

_NAMES = ("SCHEMA_VERSION", "Store", "StoredChunk", "storage_errors")


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from :mod:`trishield.kb.store.sqlite` on first use."""
    if name not in _NAMES:
        raise AttributeError(f"module 'trishield.kb.store' has no attribute {name!r}")
    value = getattr(importlib.import_module("trishield.kb.store.sqlite"), name)
    globals()[name] = value
    return value


__all__ = ["SCHEMA_VERSION", "Store", "StoredChunk", "storage_errors"]
