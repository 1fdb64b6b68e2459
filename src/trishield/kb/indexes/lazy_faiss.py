"""faiss, imported on first use rather than when the KB's modules are imported.

Opening a knowledge base to list its documents, show its quarantine or manage its keys
reads only the SQLite store; importing faiss there cost about a tenth of a second of every
such command (docs/speed.md, "Start-up"). The index modules name ``faiss`` through this
proxy, so the library loads the first time an index is built, read or searched.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyFaiss:
    """Attribute access on the faiss module, importing it the first time."""

    _module: ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        module = _LazyFaiss._module
        if module is None:
            module = _LazyFaiss._module = importlib.import_module("faiss")
        return getattr(module, name)


faiss: Any = _LazyFaiss()
"""Use as the ``faiss`` module: ``faiss.IndexFlatIP(...)``."""
