"""Names a package exports, imported from their modules on first use (PEP 562).

``import trishield`` and ``import trishield.kb`` must cost nothing but their own file: the CLI's
start-up (``trishield --help``, ``documents list``) needs no numpy, torch or index, and a light
submodule (``trishield.kb.documents``) must not drag the whole KB in (docs/speed.md,
"Start-up"). Each such package names where its public names live and takes its
``__getattr__`` and ``__dir__`` from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, tuple[str, ...]],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names live in the
    modules of ``homes`` (module -> names); a name is imported once, then kept in
    ``namespace`` (the package's ``globals()``)."""
    module_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__
