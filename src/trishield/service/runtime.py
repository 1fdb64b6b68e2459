"""What the service shares between requests: KB handles, the writer, the panel, the limits.

Concurrency model (and why):

* A :class:`~trishield.kb.KnowledgeBase` handle is not thread-safe (one SQLite connection,
  cached indexes), so readers borrow a handle from a pool of ``workers`` handles, one request
  at a time each. Each handle notices a new KB generation on its next search and reloads.
* Writes (ingest, delete, release) go through one writer handle behind a lock; the KB's own
  file lock also serialises them against CLI writers in other processes. Reads never wait for
  a write: SQLite runs in WAL mode and an ingest commits its batch in one transaction.
* Asks are bounded by ``max_concurrent_asks`` (default 2, the cores of the target machine):
  panel members are CPU-bound llama.cpp calls, and each local model already answers one
  prompt at a time, so more parallel asks would only queue inside the models and add memory.
  Searches are not bounded beyond the pool: they cost milliseconds.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from trishield.defenses import build_defense
from trishield.errors import InputError
from trishield.kb import KnowledgeBase
from trishield.llm.base import Reader
from trishield.llm.cache import ResponseCache
from trishield.llm.panel import EXTRACTIVE, MemberSpec, build_reader
from trishield.pipeline import Pipeline
from trishield.provenance.keys import KeyStore
from trishield.service.metrics import ServiceMetrics
from trishield.settings import Settings

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
QUERY_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class ServiceConfig:
    """How one service instance runs (``trishield serve`` flags)."""

    kb_dir: Path
    settings: Settings = field(default_factory=Settings)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    workers: int = 4
    max_concurrent_asks: int = 2
    allowed_members: tuple[str, ...] | None = None
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise InputError(f"max body size must be at least 1024 bytes, got "
                             f"{self.max_body_bytes}")
        if not 1 <= self.workers <= 64:
            raise InputError(f"workers must be between 1 and 64, got {self.workers}")
        if not 1 <= self.max_concurrent_asks <= 64:
            raise InputError(f"max concurrent asks must be between 1 and 64, got "
                             f"{self.max_concurrent_asks}")


def _member_name(spec: MemberSpec) -> str:
    if isinstance(spec, str):
        return spec
    return str(spec.get("name") or f"{spec.get('kind')}:{spec.get('model')}")


class Runtime:
    """The service's shared state; built once per app."""

    def __init__(self, config: ServiceConfig):
        self.config = config
        self.metrics = ServiceMetrics()
        self.writer = KnowledgeBase.open(config.kb_dir, create=True)
        self.keys = KeyStore(config.kb_dir)
        self._write_lock = threading.Lock()
        self._handles: queue.Queue[KnowledgeBase] = queue.Queue()
        for _ in range(config.workers):
            self._handles.put(KnowledgeBase.open(config.kb_dir))
        self._asks = threading.BoundedSemaphore(config.max_concurrent_asks)
        self._cache = ResponseCache() if config.use_cache else None
        self._readers: dict[str, Reader] = {}
        self._readers_lock = threading.Lock()
        self.default_specs = {_member_name(spec): spec for spec in config.settings.panel}
        # a request may pick among these only: naming any model would let a reader make the
        # server load (and keep in memory) every model it knows
        allowed = (list(config.allowed_members) if config.allowed_members is not None
                   else [*self.default_specs, EXTRACTIVE])
        self.allowed = tuple(dict.fromkeys(allowed))

    def close(self) -> None:
        self.writer.close()
        while not self._handles.empty():
            self._handles.get_nowait().close()

    def warm_up(self) -> None:
        """Load the embedder and the indexes before the first request, not during it."""
        with self.reader() as kb:
            kb.indexes()
            kb.embedder.encode(["warm up"])

    @contextmanager
    def reader(self) -> Iterator[KnowledgeBase]:
        kb = self._handles.get()
        try:
            yield kb
        finally:
            self._handles.put(kb)

    @contextmanager
    def writing(self) -> Iterator[KnowledgeBase]:
        with self._write_lock:
            yield self.writer

    @contextmanager
    def ask_slot(self) -> Iterator[None]:
        with self._asks:
            self.metrics.asks_in_flight.inc()
            try:
                yield
            finally:
                self.metrics.asks_in_flight.dec()

    def panel(self, names: Sequence[str] | None) -> list[Reader]:
        """Readers for ``names`` (default: the configured panel), each built once and shared:
        a local model is loaded once per process and answers one prompt at a time."""
        if names is None:
            names = list(self.default_specs)
        unknown = [n for n in names if n not in self.allowed]
        if unknown:
            raise InputError(f"unknown panel member(s) {', '.join(map(repr, unknown))}; "
                             f"allowed: {', '.join(self.allowed)}")
        if len(set(names)) != len(names):
            raise InputError("a panel member is named twice")
        with self._readers_lock:
            for name in names:
                if name not in self._readers:
                    spec = self.default_specs.get(name, name)
                    self._readers[name] = build_reader(spec, cache=self._cache)
            return [self._readers[name] for name in names]

    def pipeline(self, kb: KnowledgeBase, panel: list[Reader], backend: str | None,
                 gate: str | None, defense: str) -> Pipeline:
        config = self.config.settings.pipeline.with_overrides(backend=backend, gate=gate)
        return build_defense(defense, kb, panel, config=config)
