"""Named extension points: LLM backend kinds, retrieval backends and defenses.

Each category is one :class:`Registry`. An implementation registers itself with a decorator
where it is defined, and every list of names (CLI choices, config validation, error messages)
is read from the registry, so adding a kind means writing it, not editing if-chains in three
places. Third-party packages extend a category through the entry-point group
named by the registry (``trishield.defenses``, ``trishield.llm_kinds``,
``trishield.retrieval_backends``), as ``simonw/llm`` plugins do: each entry point names a module
that registers on import.

Registries load their built-in modules lazily (``builtin_modules``), so that a low layer can
hold the registry while a higher layer (the evaluation's baselines, say) fills it, without the
low layer importing the high one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from trishield.errors import InputError

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered implementation and what is known about it without building it."""

    name: str
    value: T
    meta: dict[str, Any] = field(default_factory=dict)
    summary: str = ""


class Registry(Generic[T]):
    """Name -> implementation for one category, in registration order."""

    def __init__(self, category: str, *, group: str, builtin_modules: tuple[str, ...] = ()):
        self.category = category
        self.group = group
        """The entry-point group third-party packages register under."""
        self.builtin_modules = builtin_modules
        self._entries: dict[str, Entry[T]] = {}
        self._loaded = False

    def register(self, name: str, *, summary: str = "",
                 **meta: Any) -> Callable[[T], T]:
        """Decorator: register the decorated object under ``name`` (twice is an error)."""
        def decorate(value: T) -> T:
            self.add(name, value, summary=summary, **meta)
            return value
        return decorate

    def add(self, name: str, value: T, *, summary: str = "", **meta: Any) -> None:
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.category} needs a non-empty name, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.category} {name!r} is registered twice")
        self._entries[name] = Entry(name, value, dict(meta), summary)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self.builtin_modules:
            importlib.import_module(module)
        for point in entry_points(group=self.group):
            point.load()

    def entry(self, name: str) -> Entry[T]:
        self._load()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise InputError(f"unknown {self.category} {name!r}; choose from "
                             f"{', '.join(self.names())}") from None

    def get(self, name: str) -> T:
        return self.entry(name).value

    def names(self, **where: Any) -> tuple[str, ...]:
        """Every registered name, or those whose metadata matches ``where``."""
        self._load()
        return tuple(name for name, entry in self._entries.items()
                     if all(entry.meta.get(key) == value for key, value in where.items()))

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        self._load()
        return iter(list(self._entries.values()))
