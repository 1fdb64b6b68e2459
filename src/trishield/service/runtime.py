"""What the service shares between requests: KB handles, the writer, the panel, the limits.

Concurrency model (and why):

* A :class:`~trishield.kb.KnowledgeBase` handle is not thread-safe (one SQLite connection,
  cached indexes), so readers borrow a handle from a pool of ``workers`` handles, one request
  at a time each. Each handle notices a new KB generation on its next search and reloads.
* Writes (ingest, delete, release) run on one writer thread of their own
  (:mod:`trishield.service.writes`: a bounded backlog, a wait limit) through one writer
  handle; the KB's file lock, waited for at most ``lock_timeout_s``, also serialises them
  against CLI writers in other processes, and an ingest stops after ``write_time_limit_s``.
  Reads never wait for a write, nor for the write lock: SQLite runs in WAL mode, an ingest
  commits its batch in one transaction, and readers never save indexes.
* Asks are bounded by ``max_concurrent_asks`` (default 2, the cores of the target machine):
  panel members are CPU-bound llama.cpp calls, and each local model already answers one
  prompt at a time, so more parallel asks would only queue inside the models and add memory.
  They wait for their slot on the event loop and run on threads of their own, shared between
  API keys in turn (:mod:`trishield.service.fairness`: ``asks_per_key``, ``ask_queue``), so a
  queue of one key's asks never holds the request threads that cheap requests need.
  Searches cost milliseconds: they are not queued, but one key may have at most
  ``searches_per_key`` in flight (429 beyond), so a burst cannot fill the request threads
  either. A request that cannot get
  a handle or an ask slot within ``read_wait_s`` gets 503 + ``Retry-After``.
* ``/healthz`` runs on a thread and a KB handle of its own: it answers whatever the other
  requests are doing.
* A KB directory that cannot be written is served read-only: reads work, writes get 503.
"""

from __future__ import annotations

import asyncio
import gc
import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from trishield.defenses import build_defense
from trishield.errors import BusyError, InputError
from trishield.kb import KnowledgeBase
from trishield.llm.base import Reader
from trishield.llm.cache import ResponseCache
from trishield.llm.panel import EXTRACTIVE, MemberSpec, build_reader
from trishield.pipeline import Pipeline
from trishield.provenance.keys import KeyStore
from trishield.rings.analysis import DEFAULT_ANALYSER
from trishield.service.fairness import AskGate, KeyOverShare, KeyShare, Slot
from trishield.service.local_key import LocalKey
from trishield.service.metrics import ServiceMetrics
from trishield.service.writes import WriteQueue
from trishield.settings import Settings
from trishield.telemetry import EXPORTERS, SpanObserver, Telemetry

DEFAULT_MAX_BODY_BYTES = 512 * 1024
"""About half a million characters, about three minutes of embedding on two busy cores (92k
characters took 30 s at load average 12): well inside the 600 s write time limit, so a
maximum-size request completes, and the one writer is never held for long. Larger documents
(up to ``MAX_DOCUMENT_CHARS``) go in with ``trishield ingest`` or a larger
``--max-body-bytes``."""
QUERY_BODY_BYTES = 64 * 1024
HEALTH_TIMEOUT_S = 5.0


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
    write_backlog: int = 8
    write_wait_s: float = 60.0
    write_time_limit_s: float = 600.0
    lock_timeout_s: float = 10.0
    read_wait_s: float = 30.0
    telemetry: str | None = None
    """OpenTelemetry exporter (``console``, ``otlp``) or ``None``: off (``trishield serve``
    reads ``--otel``, else ``TRISHIELD_OTEL``)."""

    def __post_init__(self) -> None:
        if self.telemetry is not None and self.telemetry not in EXPORTERS:
            raise InputError(f"telemetry exporter must be one of {', '.join(EXPORTERS)} or "
                             f"none, got {self.telemetry!r}")
        if self.max_body_bytes < 1024:
            raise InputError(f"max body size must be at least 1024 bytes, got "
                             f"{self.max_body_bytes}")
        if not 1 <= self.workers <= 64:
            raise InputError(f"workers must be between 1 and 64, got {self.workers}")
        if not 1 <= self.max_concurrent_asks <= 64:
            raise InputError(f"max concurrent asks must be between 1 and 64, got "
                             f"{self.max_concurrent_asks}")
        if not 0 <= self.write_backlog <= 1000:
            raise InputError(f"write backlog must be between 0 and 1000, got "
                             f"{self.write_backlog}")
        for name in ("write_wait_s", "write_time_limit_s", "lock_timeout_s", "read_wait_s"):
            if not 0 < getattr(self, name) <= 86400:
                raise InputError(f"{name} must be between 0 and 86400 seconds, got "
                                 f"{getattr(self, name)}")


def freeze_startup_heap() -> int:
    """Collect once, then move every object alive now out of the garbage collector's view
    (``gc.freeze``); returns how many objects are frozen.

    Why: after start-up the process holds about half a million objects the collector tracks
    (imported libraries, the embedder, the KB's handles and indexes) that live as long as the
    process does. Python's full collection traverses every one of them: measured on the
    wiki5k KB with Rings 1+2 and the extractive reader, one full collection every few hundred
    asks took 310-330 ms (`benchmarks/studies/gc_pause.py`), landing on whichever request was
    running and, since it holds the GIL, stalling every other request thread too. Frozen, they are
    never traversed again; what requests allocate later is collected as before. Called once,
    after :meth:`Runtime.warm_up`, by ``trishield serve``: a library cannot know when its
    host's start-up is over, so :mod:`trishield.api` leaves the collector alone."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _member_name(spec: MemberSpec) -> str:
    if isinstance(spec, str):
        return spec
    return str(spec.get("name") or f"{spec.get('kind')}:{spec.get('model')}")


class Runtime:
    """The service's shared state; built once per app."""

    def __init__(self, config: ServiceConfig):
        self.config = config
        self.metrics = ServiceMetrics()
        self.writer = KnowledgeBase.open(config.kb_dir, create=True,
                                         analyser=DEFAULT_ANALYSER,
                                         lock_timeout=config.lock_timeout_s,
                                         write_time_limit=config.write_time_limit_s)
        self.read_only = self.writer.read_only
        self.keys = KeyStore(config.kb_dir)
        self.local_key: LocalKey | None = None
        """This run's local key (:mod:`trishield.service.local_key`), set by ``trishield
        serve`` when it issues one; an app built otherwise honours API keys only."""
        self._write_lock = threading.Lock()
        self.writes = WriteQueue(backlog=config.write_backlog, wait_s=config.write_wait_s)
        self._handles: queue.Queue[KnowledgeBase] = queue.Queue()
        for _ in range(config.workers):
            self._handles.put(KnowledgeBase.open(config.kb_dir))
        self._health_kb = KnowledgeBase.open(config.kb_dir, read_only=True)
        self._health_thread = ThreadPoolExecutor(max_workers=1,
                                                 thread_name_prefix="trishield-health")
        limits = config.settings.service
        self.asks = AskGate(slots=config.max_concurrent_asks, per_key=limits.asks_per_key,
                            queue_limit=limits.ask_queue, wait_s=config.read_wait_s)
        self._searches = KeyShare(limits.searches_per_key, "searches")
        self._cache = ResponseCache() if config.use_cache else None
        self._readers: dict[str, Reader] = {}
        self._readers_lock = threading.Lock()
        second = config.settings.second_reader
        self.second_reader = (None if second is None
                              else build_reader(second, cache=self._cache))
        self.default_specs = {_member_name(spec): spec for spec in config.settings.panel}
        # a request may pick among these only: naming any model would let a reader make the
        # server load (and keep in memory) every model it knows
        allowed = (list(config.allowed_members) if config.allowed_members is not None
                   else [*self.default_specs, EXTRACTIVE])
        self.allowed = tuple(dict.fromkeys(allowed))
        self.telemetry = (None if config.telemetry is None
                          else Telemetry.from_setting(config.telemetry))

    def close(self) -> None:
        if self.telemetry is not None:
            self.telemetry.shutdown()
        self.writes.close()
        self.asks.close()
        self._health_thread.shutdown(wait=True, cancel_futures=True)
        self.writer.close()
        self._health_kb.close()
        while not self._handles.empty():
            self._handles.get_nowait().close()

    async def health(self) -> dict[str, object]:
        """What ``/healthz`` reports, read on the health thread's own handle, so that no
        request (a write, a queue of asks) can make it wait; :class:`BusyError` if even that
        takes over ``HEALTH_TIMEOUT_S`` (the database itself is stuck)."""

        def snapshot() -> dict[str, object]:
            counts = self._health_kb.store.counts()
            return {"status": "ok", "documents": counts["documents"],
                    "chunks": counts["chunks"], "quarantined": counts["quarantined"],
                    "generation": self._health_kb.store.generation(),
                    "read_only": self.read_only}

        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self._health_thread, snapshot),
                                          HEALTH_TIMEOUT_S)
        except TimeoutError:
            raise BusyError(f"the knowledge base did not answer within {HEALTH_TIMEOUT_S:g} s",
                            retry_after=5) from None

    def warm_up(self) -> None:
        """Load the embedder and the indexes before the first request, not during it."""
        with self.reader() as kb:
            kb.indexes()
            kb.embedder.encode(["warm up"])

    @contextmanager
    def reader(self) -> Iterator[KnowledgeBase]:
        try:
            kb = self._handles.get(timeout=self.config.read_wait_s)
        except queue.Empty:
            raise BusyError(f"all {self.config.workers} knowledge-base handles stayed busy for "
                            f"{self.config.read_wait_s:g} s", retry_after=5) from None
        try:
            yield kb
        finally:
            self._handles.put(kb)

    @contextmanager
    def writing(self) -> Iterator[KnowledgeBase]:
        """The writer handle. Routes that write are wrapped in ``writes.serialised`` and so
        already run on the writer thread; the lock keeps any other caller in line."""
        with self._write_lock:
            yield self.writer

    async def admit_ask(self, key_id: str) -> Slot:
        """A slot for one ask of ``key_id`` (waiting on the event loop, not on a thread);
        refusals are counted by reason."""
        try:
            return await self.asks.admit(key_id)
        except KeyOverShare:
            self.metrics.asks_refused.labels("key_share").inc()
            raise
        except BusyError:
            self.metrics.asks_refused.labels("busy").inc()
            raise

    @contextmanager
    def searching(self, key_id: str) -> Iterator[None]:
        """One search of ``key_id`` within its share (429 beyond it, counted)."""
        try:
            with self._searches.held(key_id):
                yield
        except KeyOverShare:
            self.metrics.searches_refused.inc()
            raise

    @contextmanager
    def asking(self) -> Iterator[None]:
        """Counts one ask inside the pipeline in ``/metrics``."""
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

    def observers(self, key_id: str) -> list[SpanObserver]:
        """The observers of one ask: its spans when telemetry is on, else none."""
        if self.telemetry is None:
            return []
        return [self.telemetry.observer(**{"trishield.key_id": key_id})]

    def pipeline(self, kb: KnowledgeBase, panel: list[Reader], backend: str | None,
                 gate: str | None, defense: str, *, own_panel: bool = False) -> Pipeline:
        """The defense for one request; a request that names its panel names every reader,
        so the configured second reader answers only for the configured panel."""
        config = self.config.settings.pipeline.with_overrides(backend=backend, gate=gate)
        return build_defense(defense, kb, panel, config=config,
                             second_reader=None if own_panel else self.second_reader)
