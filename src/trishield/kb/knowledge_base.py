"""A knowledge base directory: SQLite (truth, and the lexical index) + a FAISS dense index.

Layout of ``DIR``::

    kb.sqlite                      documents, chunks (+ embeddings), batches, audit log, meta;
                                   the FTS5 lexical index and the chunk change log (kept by
                                   triggers on ``chunks`` in the writing transaction)
    kb.lock                        writers take an exclusive lock on it; one ingest at a time
    ring1-neighbours.npz           Ring 1's reference lists at ingest, saved when a handle
                                   closes (derived data: kb/screening/neighbour_cache_file.py)
    dense-s<pos>.<serial>.faiss    snapshot of the dense index at change-log position <pos>
    checksums-s<pos>.<serial>.json sha256 of the snapshot, written after it

An ingest embeds first, then commits the whole batch in one SQLite transaction (the atomic
point: rows, lexical index and change log together). The dense index in memory then takes in
the batch's rows (:func:`~trishield.kb.indexes.backend.catch_up`), and a snapshot is saved when
one is due (after every write of a small KB, else when the changes since the last one reach a
share of it). A crash before the commit leaves the KB as before; a crash after it leaves a
snapshot behind the database, which any reader brings up to date from the change log. Readers
notice other processes' writes with one indexed lookup of the log's newest position per
search. A snapshot that does not match its checksums (a truncated or emptied file) is never
used: the index is rebuilt from the database instead. Readers never write: a reader that
rebuilds keeps the result in memory, and the next write (or ``trishield repair``) saves it.

A directory that cannot be written is opened read-only: searches work, writes raise
:class:`~trishield.errors.ReadOnlyError` before anything is tried.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from trishield.errors import (
    BusyError,
    ConflictError,
    ForbiddenError,
    InputError,
    KnowledgeBaseError,
    NotFoundError,
    ReadOnlyError,
    StorageFullError,
    TriShieldError,
)
from trishield.kb.analysis import ChunkAnalyser
from trishield.kb.chunking import ChunkingConfig, chunk_document, embedding_text
from trishield.kb.documents import Chunk, Document, Tier
from trishield.kb.indexes.backend import EmbeddedBackend, catch_up
from trishield.kb.indexes.dense import (
    DENSE_KINDS,
    IVF_MIN_TRAIN,
    TOMBSTONE_SHARE,
    DenseIndex,
    file_digests,
)
from trishield.kb.indexes.engines import sync as engine_sync
from trishield.kb.indexes.engines.config import EngineConfig
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.indexes.retrieval import BACKENDS, RETRIEVAL_BACKENDS, Candidate, Searchers
from trishield.kb.ingest_report import (
    CommitPacer,
    IngestInterrupted,
    IngestReport,
    ProgressCallback,
    ProgressTracker,
)
from trishield.kb.screening import Screener, ScreeningVerdict
from trishield.kb.screening.analysis_backfill import BackfillReport, backfill
from trishield.kb.screening.neighbour_cache import NeighbourCache
from trishield.kb.screening.neighbour_cache_file import SavedNeighbours
from trishield.kb.screening.neighbourhood import StoredNeighbourhood
from trishield.kb.store import SCHEMA_VERSION, Store, dispute_resolution, disputes
from trishield.kb.store.change_log import Position
from trishield.kb.store.disputes import Dispute, Recorded, Resolution
from trishield.kb.store.fts import TABLE as FTS_TABLE
from trishield.kb.store.ownership import (
    BatchPlan,
    displacement_reason,
    duplicate_audit_detail,
    owns,
    plan_batch,
    public_duplicates,
    set_aside_reason,
)
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, get_embedding_model, load_embedder

DATABASE = "kb.sqlite"
LOCK = "kb.lock"
MAX_K = 1000
OUTLIER_REFERENCE_SIZE = 2000
EMBED_SLICE = 256
"""Chunks embedded between two checks of a write's time limit."""
SNAPSHOT_ALWAYS_BELOW = 2000
"""A KB with fewer chunks saves its dense snapshot after every write (a few megabytes)."""
SNAPSHOT_MIN_CHANGES = 1000
SNAPSHOT_SHARE = 0.1
"""A larger KB saves a snapshot once the change-log entries since the last one reach this
share of its rows (and at least :data:`SNAPSHOT_MIN_CHANGES`): a write costs its own rows,
and a reader starting cold replays at most that share from SQLite."""
FAULT_PAUSE_ENV = "TRISHIELD_FAULT_PAUSE"
"""Crash-test hook: names an ingest phase at which the process stops and waits to be killed."""
FAULT_RESUME_ENV = "TRISHIELD_FAULT_RESUME"
"""With the pause hook: a file whose appearance lets the paused process go on (to change the
machine under it, a full disk for instance, and watch what the rest of the write does)."""
ENGINE_OWNER = "engine_owner"
"""Meta key: this KB's id in the engine collection's properties (so a collection another KB
wrote, or an earlier attach, is reloaded rather than trusted)."""
log = logging.getLogger("trishield.kb")
Snapshot = tuple[int, int]
"""A saved dense snapshot: ``(change-log position, serial)``."""


@dataclass(frozen=True)
class KBSettings:
    """What a KB was built with. Mixing embedding models or chunkings in one KB is refused."""

    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    dense_index: str = "flat"
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Where searches run: the embedded indexes, or a Milvus collection (kb/engines)."""

    def as_meta(self) -> dict[str, str]:
        return {
            "schema_version": str(SCHEMA_VERSION),
            "embedding_model": self.embedding_model,
            "embedding_dimension": str(get_embedding_model(self.embedding_model).dimension),
            "chunk_words": str(self.chunking.words),
            "chunk_overlap": str(self.chunking.overlap),
            "chunk_strategy": self.chunking.strategy,
            "dense_index": self.dense_index,
            **self.engine.as_meta(),
        }

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> KBSettings:
        return cls(meta["embedding_model"],
                   ChunkingConfig(int(meta["chunk_words"]), int(meta["chunk_overlap"]),
                                  meta.get("chunk_strategy", "window")),  # type: ignore[arg-type]
                   meta["dense_index"], EngineConfig.from_meta(meta))


@dataclass(frozen=True)
class _BatchWrite:
    """What every batch of one ingest shares: who writes, from where, screened by what."""

    tier: str
    writer: str
    source: str
    writer_key: str
    guard: Screener | None
    progress: bool
    started: float


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name or name != name.strip():
        raise InputError(f"{what} name {name!r} is empty or has surrounding whitespace")


def _distinct_ids(doc_ids: Sequence[str]) -> list[str]:
    """The ids of a multi-document command, repeats dropped (first order kept)."""
    if isinstance(doc_ids, str):
        raise InputError("give a list of document ids, not one string")
    ids = list(dict.fromkeys(doc_ids))
    if not ids:
        raise InputError("no document ids given")
    for doc_id in ids:
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(f"document id {doc_id!r} is not a non-empty string")
    return ids


_FAULT_HITS: dict[str, int] = {}


def _check_new_ids(documents: Sequence[Document], known: set[str]) -> None:
    """Refuse a document whose id is new to the KB and outside the id policy
    (:mod:`trishield.kb.id_policy`). An id the KB already stores or holds keeps working, so
    that a KB written before the policy can still update and replace its documents."""
    from trishield.kb.id_policy import new_id_problem  # its confusables tables: on writes only

    for document in documents:
        if document.id in known:
            continue
        problem = new_id_problem(document.id)
        if problem is not None:
            raise InputError(f"document id {document.id!r} {problem}",
                             path=document.origin or None)


def _fault_point(phase: str) -> None:
    """Pause at ``phase`` when :data:`FAULT_PAUSE_ENV` names it (``phase#N``: only the N-th
    time this process reaches it, e.g. the second batch of a batched ingest)."""
    wanted, _, nth = (os.environ.get(FAULT_PAUSE_ENV) or "").partition("#")
    if wanted != phase:
        return
    _FAULT_HITS[phase] = _FAULT_HITS.get(phase, 0) + 1
    if nth and _FAULT_HITS[phase] != int(nth):
        return
    resume = os.environ.get(FAULT_RESUME_ENV)
    if resume and Path(resume).exists():
        return
    print(f"FAULT-PAUSE {phase}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline and not (resume and Path(resume).exists()):
        time.sleep(0.05)


class KnowledgeBase:
    """Open with :meth:`open`; ingest documents; search with any backend.

    A ``screener`` given here (Ring 1, for instance) judges every ingest that does not pass
    its own ``guard``: a higher layer can open a KB that is guarded by default. Without one the
    KB layer ingests unscreened, as it always has. An ``analyser`` likewise analyses every
    chunk written through this handle (:mod:`trishield.kb.analysis`).
    """

    def __init__(self, directory: Path, store: Store, settings: KBSettings, *,
                 screener: Screener | None = None, analyser: ChunkAnalyser | None = None,
                 lock_timeout: float | None = None, write_time_limit: float | None = None):
        if analyser is not None and not isinstance(analyser, ChunkAnalyser):
            raise InputError(f"{type(analyser).__name__} is not a chunk analyser (it needs a "
                             "version and analyse(texts))")
        self.directory = directory
        self.store = store
        self.settings = settings
        self.screener = screener
        self.analyser = analyser
        self.lock_timeout = lock_timeout
        self.write_time_limit = write_time_limit
        self.dimension = get_embedding_model(settings.embedding_model).dimension
        self._backend: EmbeddedBackend | None = None
        self._engine = None  # the MilvusBackend of a KB whose engine is Milvus, once opened
        self._saved_position: int | None = None
        self._snapshot_missing = False
        self._writer_records: tuple[int, dict[str, int], dict[str, float]] | None = None
        self._neighbour_cache = NeighbourCache()  # Ring 1's reference lists between writes
        self._saved_neighbours = SavedNeighbours(directory, self._neighbour_identity,
                                                 self.dimension)  # ... and between processes

    @property
    def read_only(self) -> bool:
        return self.store.read_only

    @property
    def clock(self) -> Callable[[], float]:
        """The clock that stamps this handle's writes (UTC Unix seconds): every document's
        ``ingested_at``, and so every writer's first document (its tenure) and every source's
        time stood in the evidence. Set only by :meth:`open`'s ``clock``, which neither the
        CLI nor the service exposes: a client's timestamp is never provenance."""
        return self.store.clock

    def now(self) -> float:
        """The KB clock's time (what a write now would be stamped with)."""
        return self.store.clock()

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str | Path,
        *,
        create: bool = False,
        embedding_model: str | None = None,
        chunking: ChunkingConfig | None = None,
        dense_index: str | None = None,
        engine: EngineConfig | str | None = None,
        screener: Screener | None = None,
        analyser: ChunkAnalyser | None = None,
        read_only: bool | None = None,
        lock_timeout: float | None = None,
        write_time_limit: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> KnowledgeBase:
        """Open the KB in ``directory``; with ``create``, make it if it does not exist yet.

        Settings given for an existing KB must match what it was built with. ``read_only``
        defaults to whether the directory or its database cannot be written. A writer waits
        at most ``lock_timeout`` seconds for the KB's lock (None: as long as it takes) and
        an ingest stops embedding after ``write_time_limit`` seconds, both with
        :class:`BusyError` and nothing written.

        ``analyser`` (Ring 1's, :mod:`trishield.kb.analysis`) analyses every chunk this handle
        writes, stored with it in the same transaction, and is what :meth:`compact`
        backfills with.

        ``engine`` (an :class:`EngineConfig`, or a URI with the default collection and index)
        chooses where a new KB searches; for an existing KB it must match, like the other
        settings (:meth:`attach_engine` moves one deliberately).

        ``clock`` (a callable returning UTC Unix seconds; default the wall clock) stamps what
        this handle writes, the KB's creation included: a simulation (the PoisonedRAG matrix's
        base KB "a year ago") can build a KB with a history, since the evidence's time stood,
        tenure and bursts read ingest times. Not exposed to writers: the service and the CLI
        never set it, and no field of a request or a document (front matter, a signed
        record's ``issued_at``) becomes a stored time.
        """
        directory = Path(directory)
        if isinstance(engine, str):
            engine = EngineConfig.parse(engine)
        database = directory / DATABASE
        if read_only is None:
            read_only = database.is_file() and not (os.access(directory, os.W_OK)
                                                    and os.access(database, os.W_OK))
        if not database.is_file():
            if not create:
                raise KnowledgeBaseError(f"{directory} is not a TriShield knowledge base "
                                         f"(no {DATABASE}); ingest something to create one")
            if directory.exists() and not directory.is_dir():
                raise KnowledgeBaseError(f"{directory} exists and is not a directory")
            if directory.is_dir() and any(p.name != LOCK for p in directory.iterdir()):
                raise KnowledgeBaseError(f"{directory} is not empty and is not a TriShield "
                                         "knowledge base; refusing to write into it")
            directory.mkdir(parents=True, exist_ok=True)
        if dense_index is not None and dense_index not in DENSE_KINDS:
            raise InputError(f"unknown dense index {dense_index!r}; choose from "
                             f"{', '.join(DENSE_KINDS)}")
        if embedding_model is not None:
            get_embedding_model(embedding_model)
        if clock is not None and not callable(clock):
            raise InputError(f"a KB clock is a callable returning Unix seconds, not "
                             f"{type(clock).__name__}")
        store = Store(database, read_only=read_only, clock=clock or time.time)
        meta = store.meta()
        if "embedding_model" not in meta and read_only:
            store.close()
            raise KnowledgeBaseError(f"{directory} was never initialised and is read-only")
        if "embedding_model" not in meta:
            settings = KBSettings(embedding_model or DEFAULT_EMBEDDING_MODEL,
                                  chunking or ChunkingConfig(), dense_index or "flat",
                                  engine or EngineConfig())
            with store.transaction() as connection:
                if "embedding_model" not in store.meta():
                    store.set_meta(settings.as_meta() | {"generation": "0",
                                                         "created_at": f"{store.clock():.3f}",
                                                         ENGINE_OWNER: uuid.uuid4().hex},
                                   connection)
            meta = store.meta()
        settings = KBSettings.from_meta(meta)
        try:
            cls._refuse_mismatch(directory, settings, embedding_model, chunking, dense_index,
                                 engine)
        except KnowledgeBaseError:
            store.close()
            raise
        return cls(directory, store, settings, screener=screener, analyser=analyser,
                   lock_timeout=lock_timeout, write_time_limit=write_time_limit)

    @staticmethod
    def _refuse_mismatch(directory: Path, settings: KBSettings, embedding_model: str | None,
                         chunking: ChunkingConfig | None, dense_index: str | None,
                         engine: EngineConfig | None = None) -> None:
        asked = {"embedding model": (embedding_model, settings.embedding_model),
                 "chunking": (chunking, settings.chunking),
                 "dense index": (dense_index, settings.dense_index),
                 "search engine": (engine, settings.engine)}
        for what, (wanted, recorded) in asked.items():
            if wanted is not None and wanted != recorded:
                raise KnowledgeBaseError(
                    f"{directory} was built with {what} {recorded}; refusing to mix in "
                    f"{wanted}. Use a new --kb directory for a different {what}"
                    + (" (or `trishield engine attach` to move this KB's search)."
                       if what == "search engine" else "."))

    def close(self) -> None:
        if not self.read_only:
            self._saved_neighbours.save(self._neighbour_cache)
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
        self.store.close()

    def _neighbour_identity(self) -> dict[str, str]:
        """Which KB the saved neighbour lists belong to (kb/screening/neighbour_cache_file.py)."""
        meta = self.store.meta()
        return {"created_at": meta.get("created_at", ""),
                "embedding_model": self.settings.embedding_model}

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self):
        return load_embedder(self.settings.embedding_model)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        """The KB's exclusive file lock, waited for at most ``lock_timeout`` seconds."""
        if self.read_only:
            raise ReadOnlyError(f"{self.directory} is served read-only (the directory or its "
                                "database cannot be written); writes are refused")
        try:
            handle = (self.directory / LOCK).open("a")
        except OSError as error:
            if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise ReadOnlyError(f"{self.directory} cannot be written ({error.strerror}); "
                                    "writes are refused") from None
            raise
        with handle:
            self._acquire(handle)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _acquire(self, handle) -> None:
        if self.lock_timeout is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
            return
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BusyError(f"another writer holds {self.directory / LOCK} (waited "
                                    f"{self.lock_timeout:g} s); nothing was written",
                                    retry_after=max(1, round(self.lock_timeout))) from None
                time.sleep(0.05)

    def _embed(self, texts: list[str], *, progress: bool, started: float,
               on_slice: Callable[[int, float], None] | None = None) -> np.ndarray:
        """Embed ``texts``, in slices when the write has a time limit, so that a batch too
        large for it stops with :class:`BusyError` (nothing written) instead of holding the
        writer for as long as it takes. ``on_slice`` is told how many chunks each encoder
        batch embedded and how long it took (a progress bar's rate and ETA)."""
        if self.write_time_limit is None:
            return self.embedder.encode(texts, progress=progress, on_batch=on_slice)
        parts = []
        for start in range(0, len(texts), EMBED_SLICE):
            if time.perf_counter() - started > self.write_time_limit:
                raise BusyError(f"the write took longer than {self.write_time_limit:g} s after "
                                f"embedding {start} of {len(texts)} chunks; nothing was "
                                "written: send smaller batches", retry_after=30)
            parts.append(self.embedder.encode(texts[start:start + EMBED_SLICE],
                                              progress=progress, on_batch=on_slice))
        return np.concatenate(parts) if parts else np.zeros((0, self.dimension), np.float32)

    # -- writing ----------------------------------------------------------------------------
    def ingest(
        self,
        documents: Sequence[Document],
        *,
        tier: str = Tier.NEUTRAL,
        writer: str = "cli",
        source: str = "",
        progress: bool = False,
        guard: Screener | None = None,
        writer_key: str = "",
        batch_size: int | None = None,
        update: bool = False,
        on_progress: ProgressCallback | None = None,
        commit_seconds: float | None = None,
    ) -> IngestReport:
        """Add documents; ``writer_key`` is the API key that writes them ('' for a local
        write), which owns what it stores.

        Ownership and deduplication follow :mod:`trishield.kb.store.ownership`: duplicates are
        per writer (another writer's copy of a text is this writer's own document), a
        verified signed record takes its id over from a less trusted document (moved aside
        in the same transaction), and an id this writer may not write refuses the whole
        input before any write. Duplicates, displacements and refusals are audited. With
        ``update``, a changed text of the writer's own id from the same source is stored as
        the document's next version and the stored one is retired (kept, audited).

        Without ``batch_size`` and ``commit_seconds`` the input is one batch, written
        atomically (the HTTP API's all-or-nothing write). With ``commit_seconds``, the new
        documents are committed in batches sized to take about that long (the first one
        small: see :class:`~trishield.kb.ingest_report.CommitPacer`); with ``batch_size``,
        at most that many documents a batch. Each batch is its own transaction followed by
        its indexes: an interrupt raises :class:`IngestInterrupted` with the report of the
        committed batches (the running one is rolled back), and a re-run skips what they
        stored as duplicates.

        With a ``guard`` (Ring 1, or any :class:`~trishield.kb.screening.Screener`), or else
        the KB's own ``screener``, documents it blocks go to the quarantine table with their
        scores and reasons, in the same transaction, instead of into the indexes. A blocked
        update leaves the stored version in place until the new one is released.

        A document whose ``tier`` is set (provenance the service established) keeps it;
        the others get ``tier``. ``on_progress`` is told how far the run is after every
        embedded slice and committed batch.
        """
        started = time.perf_counter()
        tier = self._check_tier(tier)
        for document in documents:
            if document.tier is not None:
                self._check_tier(document.tier)
        if not writer or writer != writer.strip():
            raise InputError(f"writer name {writer!r} is empty or has surrounding whitespace")
        if batch_size is not None and (isinstance(batch_size, bool)
                                       or not isinstance(batch_size, int) or batch_size < 1):
            raise InputError(f"batch size must be a positive number of documents, got "
                             f"{batch_size!r}")
        if commit_seconds is not None and (isinstance(commit_seconds, bool) or not isinstance(
                commit_seconds, int | float) or not 0 < commit_seconds < float("inf")):
            raise InputError(f"commit seconds must be a positive number, got "
                             f"{commit_seconds!r}")
        from trishield.kb.unicode_checks import id_problem  # loaded by a write, not an open

        for document in documents:
            problem = id_problem(document.id)
            if problem is not None:
                raise InputError(f"document id {document.id!r} {problem}",
                                 path=document.origin or None)
        guard = guard if guard is not None else self.screener
        with self._write_lock():
            claims = self.store.claims([d.id for d in documents],
                                       [d.content_hash for d in documents])
            _check_new_ids(documents, {claim.doc_id for claim in claims})
            try:
                plan = plan_batch(documents, claims, tier=tier, writer=writer,
                                  writer_key=writer_key, update=update)
            except TriShieldError as error:
                self.audit_refused("ingest", writer, writer_key,
                                   getattr(error, "doc_id", None), error)
                raise
            report = IngestReport(None, [], public_duplicates(plan.duplicates), 0,
                                  self.store.generation(), 0.0, 0.0,
                                  documents_total=len(plan.new))
            if not plan.new:
                if plan.duplicates:
                    with self.store.transaction() as connection:
                        for duplicate in plan.duplicates:
                            self.store.audit(connection, action="duplicate", writer=writer,
                                             doc_id=duplicate["id"],
                                             content_hash=duplicate["content_hash"],
                                             detail=duplicate_audit_detail(duplicate, writer_key))
                report.seconds = time.perf_counter() - started
                return report
            chunks = [chunk_document(document, self.settings.chunking) for document in plan.new]
            pacer = CommitPacer(commit_seconds, batch_size)
            counts = [len(per) for per in chunks]
            tracker = ProgressTracker(
                on_progress, len(plan.new), sum(counts), None if pacer.by_time else
                -(-len(plan.new) // (batch_size or max(len(plan.new), 1))))
            write = _BatchWrite(tier=tier, writer=writer, source=source, writer_key=writer_key,
                                guard=guard, progress=progress, started=started)
            load_embedder(self.settings.embedding_model)  # loading is not embedding time
            tracker.start()
            try:
                start = 0
                while start < len(plan.new):
                    end = pacer.next_end(counts, start)
                    batch_started = time.perf_counter()
                    self._write_batch(write, plan, plan.new[start:end], chunks[start:end],
                                      plan.duplicates if start == 0 else [], report, tracker,
                                      last=end == len(plan.new))
                    pacer.record(sum(counts[start:end]), time.perf_counter() - batch_started)
                    start = end
            except KeyboardInterrupt:
                report.seconds = time.perf_counter() - started
                raise IngestInterrupted(report) from None
        report.seconds = time.perf_counter() - started
        return report

    def _write_batch(self, write: _BatchWrite, plan: BatchPlan, documents: list[Document],
                     chunks: list[list[Chunk]], duplicates: list[dict[str, str]],
                     report: IngestReport, tracker: ProgressTracker, *, last: bool) -> None:
        """Embed, screen and commit one batch of ``plan``'s new documents (caller holds the
        write lock), then write its indexes; ``report`` counts it once it is committed."""
        texts = [chunk.text for per_document in chunks for chunk in per_document]
        embed_started = time.perf_counter()
        embeddings = self._embed([embedding_text(chunk) for per_document in chunks
                                  for chunk in per_document],
                                 progress=write.progress, started=write.started,
                                 on_slice=tracker.embedded if tracker.watched else None)
        report.embed_seconds += time.perf_counter() - embed_started
        analyses = self._analyse(texts)
        verdicts, neighbourhood = self._screen(
            write.guard, documents, chunks, embeddings, [d.tier or write.tier for d in documents],
            write.writer) if write.guard else ([], None)
        blocked = {v.subject for v in verdicts if v.blocked}
        keep = [i for i, d in enumerate(documents) if d.id not in blocked]
        offsets = np.cumsum([0, *map(len, chunks)])
        kept_rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in keep]
                                   or [np.zeros(0, dtype=int)]).astype(int)
        held = [(documents[i], v.as_dict()) for i, v in enumerate(verdicts) if v.blocked]
        ids = {document.id for document in documents}
        displaced = [(claim, d) for claim, d in plan.displaced if d.id in ids]
        withdrawn = [(claim, d) for claim, d in plan.withdrawn if d.id in ids]
        set_aside = [(claim, d) for claim, d in plan.set_aside if d.id in ids]
        updates = [(claim, d) for claim, d in plan.updates if d.id in ids and d.id not in blocked]
        _fault_point("before-commit")
        with self.store.transaction() as connection:
            for claim, document in displaced:
                reason = displacement_reason(claim, document, write.writer)
                if claim.state == "stored":
                    self.store.delete_document(connection, claim.doc_id, by=write.writer,
                                               reason=reason)
                else:
                    self.store.close_quarantined(connection, claim.doc_id, state="discarded",
                                                 by=write.writer, reason=reason)
            for claim, document in set_aside:  # audited; never in the writer's report
                self.store.close_quarantined(
                    connection, claim.doc_id, state="discarded", by=write.writer,
                    reason=set_aside_reason(document.tier or write.tier, write.writer))
            for claim, document in withdrawn:
                self.store.close_quarantined(
                    connection, claim.doc_id, state="withdrawn", by=write.writer,
                    reason=f"replaced by a new version from {document.source or 'its source'}")
            retired = {document.id: self.store.retire_document(
                connection, claim.doc_id, by=write.writer, replaced_by=document.content_hash,
                source=document.source) for claim, document in updates}
            batch_id, chunk_pks = self.store.write_batch(
                connection, documents=[documents[i] for i in keep],
                chunks=[chunks[i] for i in keep], embeddings=embeddings[kept_rows],
                tier=write.tier, writer=write.writer, source=write.source,
                duplicates=[d | {"writer_key": write.writer_key} for d in duplicates],
                quarantined=held, writer_key=write.writer_key,
                **self._analyses_of(analyses, kept_rows))
            self._record_contradictions(connection, verdicts, documents, write)
            _fault_point("inside-commit")
        if neighbourhood is not None:
            bounds = np.cumsum([0, *(len(chunks[i]) for i in keep)])
            neighbourhood.hand_over(keep, [chunk_pks[bounds[n]:bounds[n + 1]]
                                           for n in range(len(keep))])
        report.batch_id = report.batch_id or batch_id
        report.batch_ids.append(batch_id)
        report.added.extend(documents[i].id for i in keep)
        report.updated.extend({"id": doc_id, "version": version + 1}
                              for doc_id, version in retired.items() if version is not None)
        report.withdrawn.extend(claim.doc_id for claim, _ in withdrawn)
        report.quarantined.extend(v.as_dict() for v in verdicts if v.blocked)
        report.screened += len(verdicts)
        report.displaced.extend(claim.doc_id for claim, _ in displaced)
        report.chunks_added += len(kept_rows)
        tracker.committed(len(documents), last=last)
        _fault_point("after-commit")
        report.warnings.extend(self._after_commit())
        report.generation = self.store.generation()

    def _record_contradictions(self, connection, verdicts: Sequence[ScreeningVerdict],
                               documents: Sequence[Document], write: _BatchWrite) -> None:
        """Record as disputes, in the batch's transaction, the stored documents of other
        writers that the screener found a new document contradicts (Ring 1's tampered copies:
        a verdict's optional ``contradiction``). Ring 1 compared them already; this is one
        upsert each."""
        tiers = {d.id: d.tier or write.tier for d in documents}
        for verdict in verdicts:
            found = getattr(verdict, "contradiction", None)
            if found is not None:
                disputes.record_contradiction(
                    connection, found, doc_id=verdict.subject, writer=write.writer,
                    tier=tiers[verdict.subject], blocked=verdict.blocked, now=self.store.clock())

    def _analyse(self, texts: list[str]) -> list[str] | None:
        """The analyser's analysis of each chunk text (``None`` without an analyser),
        computed before the write transaction opens."""
        if self.analyser is None:
            return None
        analyses = list(self.analyser.analyse(texts))
        if len(analyses) != len(texts) or not all(isinstance(a, str) for a in analyses):
            raise KnowledgeBaseError(f"the chunk analyser returned {len(analyses)} analyses "
                                     f"for {len(texts)} chunks (one string each needed); "
                                     "nothing was written")
        return analyses

    def _analyses_of(self, analyses: list[str] | None, rows: np.ndarray) -> dict:
        """``write_batch``'s analysis arguments for the chunks at ``rows``."""
        if analyses is None or self.analyser is None:
            return {}
        return {"analyses": [analyses[row] for row in rows],
                "analysis_version": self.analyser.version}

    def _screen(self, guard: Screener, documents: Sequence[Document],
                chunks: Sequence[Sequence[Chunk]], embeddings: np.ndarray,
                tiers: Sequence[str], writer: str
                ) -> tuple[Sequence[ScreeningVerdict], StoredNeighbourhood]:
        """Ring 1 at ingest: each document alone, plus its distance from what the KB already
        stores from *other* writers (never the batch itself, never the writer's own earlier
        documents), so a verdict does not depend on how the batch was cut. The neighbourhood
        comes back so that the documents stored can hand their neighbours to the handle's
        cache (:meth:`StoredNeighbourhood.hand_over`)."""
        vectors, start = [], 0
        for per_document in chunks:
            mean = embeddings[start:start + len(per_document)].mean(axis=0)
            vectors.append(mean / (np.linalg.norm(mean) or 1.0))
            start += len(per_document)
        _, dense, _ = self._refresh_indexes(persist=False)
        self._neighbour_cache = self._saved_neighbours.restore(self._neighbour_cache)
        neighbourhood = StoredNeighbourhood(self.store, dense, self.dimension, writer,
                                            cache=self._neighbour_cache)
        verdicts = guard.screen([d.id for d in documents], [d.text for d in documents],
                                tiers=list(tiers),
                                embeddings=np.asarray(vectors, dtype=np.float32),
                                neighbourhood=neighbourhood)
        return verdicts, neighbourhood

    def release(self, doc_id: str, *, by: str, progress: bool = False) -> IngestReport:
        """Move a quarantined document into the KB (an admin decision, audited)."""
        return self.release_many([doc_id], by=by, progress=progress)

    def release_many(self, doc_ids: Sequence[str], *, by: str,
                     progress: bool = False) -> IngestReport:
        """Move quarantined documents into the KB in one transaction (an admin decision,
        audited for each): all of them, or none when one is not held.

        A held new version of a document its writer still stores (an update Ring 1 blocked)
        replaces the stored one on release, which is retired as an update is."""
        _check_name(by, "releaser")
        ids = _distinct_ids(doc_ids)
        with self._write_lock():
            records = self._held_records(ids, "released")
            documents = [Document(id=r["id"], text=r["text"], title=r["title"],
                                  source=r["source"], origin=r["origin"], tier=r["tier"],
                                  provenance=r["provenance"], signed=r["signed"],
                                  metadata=r["metadata"]) for r in records]
            stored = {r["id"]: self.store.document(r["id"]) for r in records}
            for record in records:
                current = stored[record["id"]]
                if current is not None and not owns(current, record["writer"],
                                                    record["writer_key"]):
                    raise ConflictError(f"{record['id']!r} is stored by {current['writer']}; "
                                        "the held copy cannot replace it: discard it")
            chunks = [chunk_document(d, self.settings.chunking) for d in documents]
            texts = [c.text for per in chunks for c in per]
            embeddings = self.embedder.encode([embedding_text(c) for per in chunks for c in per],
                                              progress=progress)
            analyses = self._analyse(texts)
            offsets = np.cumsum([0, *map(len, chunks)])
            report = IngestReport(None, [], [], 0, self.store.generation(), 0.0, 0.0,
                                  documents_total=len(documents))
            groups: dict[tuple[str, str], list[int]] = {}
            for number, record in enumerate(records):
                groups.setdefault((record["writer"], record["writer_key"]), []).append(number)
            with self.store.transaction() as connection:
                for record, document in zip(records, documents, strict=True):
                    if not self.store.close_quarantined(connection, record["id"],
                                                        state="released", by=by, reason=""):
                        raise ConflictError(f"document {record['id']!r} left the quarantine "
                                            "while it was being released (another writer "
                                            "decided first)")
                    if stored[record["id"]] is not None:
                        version = self.store.retire_document(
                            connection, record["id"], by=by, replaced_by=document.content_hash,
                            source=document.source)
                        report.updated.append({"id": record["id"], "version": version + 1})
                for (writer, writer_key), numbers in groups.items():
                    rows = np.concatenate([np.arange(offsets[n], offsets[n + 1])
                                           for n in numbers]).astype(int)
                    batch_id, _ = self.store.write_batch(
                        connection, documents=[documents[n] for n in numbers],
                        chunks=[chunks[n] for n in numbers], embeddings=embeddings[rows],
                        tier=records[numbers[0]]["tier"], writer=writer,
                        source=f"released from quarantine by {by}", writer_key=writer_key,
                        **self._analyses_of(analyses, rows))
                    report.batch_ids.append(batch_id)
            report.batch_id = report.batch_ids[0]
            report.added = [d.id for d in documents]
            report.chunks_added = int(offsets[-1])
            report.warnings = self._after_commit()
            report.generation = self.store.generation()
        return report

    def _held_records(self, ids: list[str], verb: str) -> list[dict]:
        """The quarantine rows holding ``ids`` now; :class:`NotFoundError` naming every id
        that is not held (:class:`ConflictError` for one id that was already decided), so
        that a list with one bad id changes nothing."""
        records = [self.store.quarantined_document(doc_id) for doc_id in ids]
        missing = [doc_id for doc_id, r in zip(ids, records, strict=True) if r is None]
        closed = [r for r in records if r is not None and r["state"] != "held"]
        if len(ids) == 1 and closed:
            raise ConflictError(f"document {ids[0]!r} is no longer held in quarantine: it was "
                                f"already {closed[0]['state']} by {closed[0]['closed_by']}")
        if missing or closed:
            names = ", ".join(repr(i) for i in [*missing, *(r["id"] for r in closed)])
            raise NotFoundError(f"no document {names} is held in quarantine" if len(ids) == 1
                                else f"not held in quarantine: {names}; nothing was {verb}")
        return records

    def discard_many(self, doc_ids: Sequence[str], *, by: str, reason: str = "") -> list[dict]:
        """End the quarantine hold on several documents at once (an admin decision, audited
        for each, in one transaction): all of them, or none when one is not held."""
        _check_name(by, "name")
        ids = _distinct_ids(doc_ids)
        with self._write_lock():
            self._held_records(ids, "discarded")
            with self.store.transaction() as connection:
                for doc_id in ids:
                    if not self.store.close_quarantined(connection, doc_id, state="discarded",
                                                        by=by, reason=reason):
                        raise ConflictError(f"document {doc_id!r} left the quarantine while it "
                                            "was being discarded; nothing was discarded")
        return [self.store.quarantined_document(doc_id) for doc_id in ids]

    def held_ids(self, *, writer: str | None = None) -> list[str]:
        """Ids held in quarantine now, oldest first; with ``writer``, only that writer's."""
        return self.store.held_ids(writer=writer)

    # -- documents --------------------------------------------------------------------------
    def documents(self, *, writer: str | None = None, prefix: str | None = None,
                  limit: int | None = None) -> list[dict]:
        """Stored documents without their text (id, title, writer, tier, version, source,
        ingested_at, content_hash, chunks), oldest first; optionally one ``writer``'s, or
        those whose id starts with ``prefix``, at most ``limit``."""
        if limit is not None and (isinstance(limit, bool) or limit < 1):
            raise InputError(f"limit must be a positive number, got {limit!r}")
        return self.store.list_documents(writer=writer, prefix=prefix, limit=limit)

    def document(self, doc_id: str) -> dict:
        """One stored document in full: text, title, metadata (front matter), provenance,
        its version, chunk count and the earlier versions updates retired.
        :class:`NotFoundError` says whether it was deleted or is held in quarantine."""
        record = self.store.document(doc_id)
        if record is None:
            tombstone = self.store.deleted_document(doc_id)
            held = self.store.quarantined_document(doc_id)
            why = ("" if tombstone is None else
                   f"; it was deleted by {tombstone['deleted_by']}"
                   + (f" ({tombstone['reason']})" if tombstone["reason"] else ""))
            if held is not None and held["state"] == "held":
                why = "; it is held in quarantine (see `trishield quarantine show`)"
            raise NotFoundError(f"no document {doc_id!r} is stored in the knowledge base{why}")
        return record | {"chunks": self.store.chunk_count(doc_id),
                         "earlier_versions": self.store.retired_versions(doc_id)}

    def delete_many(self, doc_ids: Sequence[str], *, by: str, reason: str = "") -> list[dict]:
        """Soft-delete several stored documents in one transaction (audited for each, kept
        in ``deleted_documents``): all of them, or none when one is not stored."""
        _check_name(by, "deleter")
        ids = _distinct_ids(doc_ids)
        with self._write_lock():
            missing = [doc_id for doc_id in ids if self.store.document(doc_id) is None]
            if missing:
                raise NotFoundError(f"not stored in the knowledge base: "
                                    f"{', '.join(repr(i) for i in missing)}; nothing was "
                                    "deleted")
            tombstones = []
            with self.store.transaction() as connection:
                for doc_id in ids:
                    tombstone = self.store.delete_document(connection, doc_id, by=by,
                                                           reason=reason)
                    if tombstone is None:  # deleted by another process since it was read
                        raise NotFoundError(f"{doc_id!r} was deleted by another process "
                                            "meanwhile; nothing was deleted")
                    tombstones.append(tombstone)
            self._after_commit()
        return tombstones

    def delete(self, doc_id: str, *, by: str, reason: str = "",
               owner: tuple[str, str] | None = None) -> dict:
        """Soft-delete a stored document (audited, kept in ``deleted_documents``).

        With ``owner`` (``(writer, writer_key)`` of a caller who is not an admin), only that
        writer's own document: the API key that wrote it, or for a local write ('' key) the
        writer name; anything else is a :class:`ForbiddenError`, audited. Same atomicity as
        an ingest: the rows move and the generation advances in one transaction, then the
        indexes for the new generation are written.
        """
        if not by or by != by.strip():
            raise InputError(f"deleter name {by!r} is empty or has surrounding whitespace")
        with self._write_lock():
            record = self.store.document(doc_id)
            if record is None:
                raise NotFoundError(f"no document {doc_id!r} is stored in the knowledge base")
            if owner is not None and not owns(record, *owner):
                error = ForbiddenError(f"{owner[0]} may delete only its own documents; "
                                       f"{doc_id!r} was written by {record['writer']}")
                self.audit_refused("delete", owner[0], owner[1], doc_id, error)
                raise error
            with self.store.transaction() as connection:
                tombstone = self.store.delete_document(connection, doc_id, by=by,
                                                       reason=reason)
            if tombstone is None:  # deleted by another process since it was read
                raise NotFoundError(f"no document {doc_id!r} is stored in the knowledge base")
            self._after_commit()
        return tombstone

    def discard(self, doc_id: str, *, by: str, reason: str = "",
                owner: tuple[str, str] | None = None) -> dict:
        """End the quarantine hold on ``doc_id`` without storing it, freeing the id: an
        admin *discards* it; with ``owner`` (``(writer, writer_key)``), its own writer
        *withdraws* it. Audited; the row stays in the quarantine's history.

        Another writer's held document is reported as not found (:class:`NotFoundError`),
        not as forbidden: the quarantine is not shown to other writers."""
        if not by or by != by.strip():
            raise InputError(f"name {by!r} is empty or has surrounding whitespace")
        state = "discarded" if owner is None else "withdrawn"
        with self._write_lock():
            record = self.store.quarantined_document(doc_id)
            if record is None or record["state"] != "held" or (
                    owner is not None and not owns(record, *owner)):
                if record is not None and record["state"] == "held":
                    self.audit_refused("withdraw", owner[0], owner[1], doc_id,
                                       ForbiddenError("held for another writer"))
                raise NotFoundError(f"no document {doc_id!r} is held in quarantine"
                                    if owner is None else f"no document {doc_id!r}")
            with self.store.transaction() as connection:
                self.store.close_quarantined(connection, doc_id, state=state, by=by,
                                             reason=reason)
        return self.store.quarantined_document(doc_id)

    def audit_refused(self, action: str, writer: str, writer_key: str, doc_id: str | None,
                      error: Exception) -> None:
        """Audit a refused write (the refusal itself is the caller's to raise; the service
        audits a refusal it decides itself, a signature withdrawal by a non-admin, here)."""
        with self.store.transaction() as connection:
            self.store.audit(connection, action="refused", writer=writer, doc_id=doc_id,
                             content_hash=None,
                             detail={"attempted": action, "error": str(error),
                                     "writer_key": writer_key})

    # -- disputes (kb/store/disputes.py, kb/store/dispute_resolution.py)
    # --------------------------------
    def record_dispute(self, dispute: Dispute) -> Recorded:
        """Record a conflict between writers the evidence met (deduplicated); never raises
        for the KB's state: a read-only or busy KB is said in the result, and logged."""
        return disputes.record(self.store, dispute)

    def disputes(self, *, state: str | None = "open", limit: int = 100) -> list[dict]:
        """Recorded disputes, most recently met first (``state`` ``all`` or None: every
        one)."""
        return disputes.listing(self.store.connection, state=state, limit=limit)

    def dispute(self, dispute_id: int) -> dict:
        """One recorded dispute in full, each passage with its text and its state now
        (stored, held in quarantine, gone); :class:`NotFoundError` when there is none."""
        return disputes.with_texts(self.store.connection,
                                   disputes.get(self.store.connection, dispute_id))

    def resolve_dispute(self, dispute_id: int, *, action: str, side: int | None = None,
                        by: str, note: str = "") -> Resolution:
        """Settle a dispute: ``quarantine`` or ``trust`` side ``side`` (1-based), or
        ``dismiss`` it; one transaction with its audit entries, under the KB's write lock
        (:mod:`trishield.kb.store.dispute_resolution`)."""
        dispute_resolution.check(action, side, note, by)
        with self._write_lock():
            done = dispute_resolution.resolve(self.store, dispute_id, action=action,
                                              side=side, by=by, note=note)
            if action == "quarantine":
                self._after_commit()
        return done

    @staticmethod
    def _check_tier(tier: str) -> str:
        try:
            return Tier(tier).value
        except ValueError:
            raise InputError(f"unknown tier {tier!r}; choose from "
                             f"{', '.join(t.value for t in Tier)}") from None

    # -- indexes ----------------------------------------------------------------------------
    # The lexical index is SQLite's (FTS5, kept by triggers in the writing transaction). The
    # dense index lives in memory and follows the chunk change log; a snapshot of it,
    # ``dense-s<position>.<serial>.faiss`` with ``checksums-s<position>.<serial>.json``, is
    # saved when enough changed since the last one (:meth:`_snapshot_due`), so a write costs
    # its own rows. ``serial`` tells apart two snapshots of one position (a compaction
    # rewrites the index without a write): a new one never replaces a file in place, so a
    # crash while it is written leaves the previous one whole.
    def _index_paths(self, snapshot: Snapshot) -> tuple[Path]:
        return (self.directory / f"dense-s{snapshot[0]}.{snapshot[1]}.faiss",)

    def _checksum_path(self, snapshot: Snapshot) -> Path:
        return self.directory / f"checksums-s{snapshot[0]}.{snapshot[1]}.json"

    def _verified(self, snapshot: Snapshot) -> bool:
        """Whether the snapshot matches the checksums written with it (a missing,
        truncated, emptied or altered file does not)."""
        try:
            recorded = json.loads(self._checksum_path(snapshot).read_text())
            return recorded == file_digests(self._index_paths(snapshot), self.directory)
        except (OSError, ValueError):
            return False

    def _snapshots(self) -> list[Snapshot]:
        """The saved snapshots (both files present), newest first."""
        found = []
        for path in self.directory.glob("dense-s*.faiss"):
            parts = path.name[len("dense-s"):-len(".faiss")].split(".")
            if len(parts) == 2 and all(part.isdigit() for part in parts):
                snapshot = (int(parts[0]), int(parts[1]))
                if self._checksum_path(snapshot).is_file():
                    found.append(snapshot)
        return sorted(found, reverse=True)

    def _load_indexes(self, where: Position) -> EmbeddedBackend | None:
        """The newest intact snapshot the change log can bring up to ``where``, caught up
        and checked against the row count; ``None`` when there is none (call it inside a read
        transaction)."""
        for snapshot in self._snapshots():
            position = snapshot[0]
            if not where.pruned <= position <= where.current or not self._verified(snapshot):
                continue
            try:
                dense = DenseIndex.load(self._index_paths(snapshot)[0],
                                        self.settings.dense_index, self.dimension)
            except Exception as error:  # derived data: any damage means a rebuild
                log.warning("dense snapshot %d cannot be read (%s); rebuilding", position,
                            error)
                continue
            backend = self._backend_for(dense, position)
            if catch_up(backend, self.store, where.current) and \
                    len(dense) == self._chunk_count():
                self._saved_position = position
                return backend
            log.warning("dense snapshot %d disagrees with the database; rebuilding", position)
        return None

    def _chunk_count(self) -> int:
        return int(self.store.connection.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def _backend_for(self, dense: DenseIndex, position: int) -> EmbeddedBackend:
        return EmbeddedBackend(dense, LexicalIndex(self.store.connection), position,
                               exact=self._exact_vectors)

    def _exact_vectors(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings of ``ids`` in the order given (IVF-PQ re-scores with them)."""
        found = self.store.embeddings_of([int(i) for i in ids], self.dimension)
        return np.stack([found[int(i)] for i in ids]) if len(ids) else \
            np.zeros((0, self.dimension), dtype=np.float32)

    def _rebuilt(self, where: Position) -> EmbeddedBackend:
        """A dense index built from every stored chunk (inside the read transaction that
        read ``where``)."""
        ids, vectors = self.store.all_embeddings(self.dimension)
        dense = DenseIndex.build(self.settings.dense_index, self.dimension, ids, vectors)
        return self._backend_for(dense, where.current)

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read transaction (one snapshot of the database) for what runs inside, unless
        one is open already."""
        connection = self.store.connection
        if connection.in_transaction:
            yield
            return
        connection.execute("BEGIN")
        try:
            yield
        finally:
            if connection.in_transaction:
                connection.execute("COMMIT")

    def _refresh_indexes(self, *, persist: bool) -> tuple[int, DenseIndex, LexicalIndex]:
        """Indexes in step with the database: the change-log position and both indexes.

        The dense index in memory takes in the rows written since its position (by this or
        any other process); one that cannot (first use, a pruned log, a damaged snapshot) is
        loaded from the newest snapshot or rebuilt from the database. With ``persist`` (the
        caller holds the write lock) a snapshot is saved when one is due; a save that fails
        (a full disk) leaves the index in memory and raises ``OSError``."""
        with self._reading():
            where = self.store.index_position()
            backend = self._backend
            if backend is None or not catch_up(backend, self.store, where.current):
                backend = self._load_indexes(where)
                self._snapshot_missing = backend is None
                self._backend = backend = backend or self._rebuilt(where)
        if persist:
            self._persist(backend)
        return backend.position, backend.dense_index, backend.lexical_index

    def _snapshot_due(self, position: int, rows: int) -> bool:
        """Whether a snapshot should be saved at ``position`` for an index of ``rows`` rows:
        always for a small KB (cheap), else once the changes since the last one reach a share
        of it, so each write costs its own rows and the snapshots' cost is amortised."""
        if self._snapshot_missing:
            return True  # none intact: this handle rebuilt from the database
        saved = self._saved_position
        if saved is None:
            snapshots = self._snapshots()
            saved = self._saved_position = snapshots[0][0] if snapshots else None
        if saved is None:
            return True
        changes = position - saved
        if changes <= 0:
            return False
        return rows < SNAPSHOT_ALWAYS_BELOW or \
            changes >= max(SNAPSHOT_MIN_CHANGES, SNAPSHOT_SHARE * rows)

    def _persist(self, backend: EmbeddedBackend) -> None:
        """Save a snapshot when due; first rebuild a graph heavy with tombstones or an IVF-PQ
        index that has grown enough to be trained (caller holds the write lock)."""
        dense = backend.dense_index
        rebuild = dense.tombstone_share > TOMBSTONE_SHARE or (
            dense.kind == "ivfpq" and not dense.trained and len(dense) >= IVF_MIN_TRAIN)
        if rebuild:
            with self._reading():
                backend = self._backend = self._rebuilt(self.store.index_position())
        if rebuild or self._snapshot_due(backend.position, len(backend)):
            self._save_indexes(backend.position, backend.dense_index)

    def _save_indexes(self, position: int, dense: DenseIndex, *,
                      prune_through: int | None = None) -> None:
        """Write the dense snapshot of ``position`` and its checksums, then forget the change
        log up to the previous snapshot (readers behind this one still catch up from the log)
        and remove older files (caller holds the write lock)."""
        serials = [serial for at, serial in self._snapshots() if at == position]
        snapshot = (position, max(serials) + 1 if serials else 0)
        self._remove_index_files(snapshot)  # a leftover of a crashed save, never verified
        (dense_path,) = self._index_paths(snapshot)
        previous = self._saved_position
        try:
            dense.save(dense_path)
            _fault_point("snapshot-written")
            digests = file_digests(self._index_paths(snapshot), self.directory)
            temporary = self.directory / f".checksums-s{position}.{snapshot[1]}.json"
            with temporary.open("w") as handle:
                json.dump(digests, handle, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self._checksum_path(snapshot))
        except OSError:
            self._remove_index_files(snapshot)  # half a save is worth nothing: free it
            raise
        self._saved_position = position
        self._snapshot_missing = False
        through = prune_through if prune_through is not None else previous
        if through is not None and not self.settings.engine.embedded:
            # never prune what a lagging engine still needs to catch up (-1: not known)
            through = min(through, self._engine.position if self._engine is not None else -1)
        if through is not None and 0 < through <= position:
            try:
                self.store.prune_index_log(through)
            except TriShieldError as error:  # the snapshot is saved; pruning can wait
                log.warning("the change log was not pruned: %s", error)
        self._remove_stale_indexes(snapshot)

    def _after_commit(self) -> list[str]:
        """After a committed write: the dense index takes in the write's rows, and a snapshot
        is saved when one is due (the lexical index was written with the rows).

        The write is committed whatever happens here, and indexes are derived data, so a
        failed save is reported (a warning) and logged, never raised: readers catch up from
        the change log or rebuild in memory, and a later write or ``trishield repair`` saves
        them. A handle that has not loaded the dense index (a one-off CLI ingest) does not
        load it just to follow the write, unless a snapshot is due. A Milvus engine follows
        first, so the change log it still needs is not pruned under it."""
        engine = self._engine_after_commit()
        try:
            if self._backend is None:
                where = self.store.index_position()
                due = self._snapshot_due(where.current, self._chunk_count())
                _fault_point("between-indexes")
                if due:
                    self._refresh_indexes(persist=True)
            else:
                self._refresh_indexes(persist=False)
                _fault_point("between-indexes")
                self._persist(self._backend)
        except OSError as error:
            full = error.errno in (errno.ENOSPC, errno.EDQUOT)
            why = "the disk is full" if full else (error.strerror or str(error))
            log.error("committed generation %d, but its indexes were not saved: %s",
                      self.store.generation(), why)
            return [f"the write is committed (generation {self.store.generation()}), but its "
                    f"search indexes could not be saved ({why}); they are rebuilt in memory "
                    "until the next write or `trishield repair` saves them", *engine]
        return engine

    def _remove_index_files(self, snapshot: Snapshot) -> None:
        for path in (*self._index_paths(snapshot), self._checksum_path(snapshot)):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def _remove_stale_indexes(self, snapshot: Snapshot) -> None:
        """Remove every index file but ``snapshot``'s: older snapshots, the per-generation
        dense and BM25 files of earlier versions, and temporaries."""
        keep = {path.name for path in (*self._index_paths(snapshot),
                                       self._checksum_path(snapshot))}
        for path in self.directory.iterdir():
            stale = (path.name.startswith(("dense-", "bm25-", "checksums-"))
                     and path.name not in keep)
            if stale or path.name.startswith((".dense-", ".bm25-", ".checksums-")):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    def indexes(self) -> tuple[DenseIndex, LexicalIndex]:
        """Indexes matching the database (the dense one in memory, the lexical one SQLite's).

        A reader that finds the saved snapshot behind the database catches up from the change
        log; one that finds it damaged rebuilds in memory and never writes: a reader works on
        a full disk and in a read-only directory, and never races a writer. Writes and
        :meth:`repair` save snapshots.
        """
        _, dense, lexical = self._refresh_indexes(persist=False)
        return dense, lexical

    def check_indexes(self) -> dict[str, object]:
        """What the saved dense snapshot looks like, without changing anything: ``present``
        (one exists), ``intact`` (its checksums match, it loads, and with the change log it
        holds exactly the stored chunks) and ``generation``."""
        generation = self.store.generation()
        with self._reading():
            where = self.store.index_position()
            present = bool(self._snapshots())
            remembered = self._saved_position
            intact = self._load_indexes(where) is not None
            self._saved_position = remembered
        found: dict[str, object] = {"generation": generation, "present": present,
                                    "intact": intact}
        if not self.settings.engine.embedded:
            engine = self._engine_state()
            found["engine"] = engine
            found["intact"] = intact and bool(engine["consistent"]) and bool(engine["in_step"])
        return found

    def repair(self) -> int:
        """Rebuild the dense index from the database and save its snapshot (after a crash,
        or when a file was damaged), discard Ring 1's saved neighbour lists, and reload a
        Milvus engine in full; returns the generation."""
        with self._write_lock():
            self._saved_neighbours.discard()
            self._neighbour_cache = NeighbourCache()
            self._backend = None
            with self._reading():
                generation = self.store.generation()
                backend = self._rebuilt(self.store.index_position())
            self._backend = backend
            self._save_as_full(backend, generation)
            if not self.settings.engine.embedded:
                engine_sync.sync(self._engine_backend(), self.store)
            return generation

    def _save_as_full(self, backend: EmbeddedBackend, generation: int) -> None:
        """Save ``backend``'s snapshot after a rebuild; the log before it is no longer needed."""
        try:
            self._save_indexes(backend.position, backend.dense_index,
                               prune_through=backend.position)
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise StorageFullError(f"the indexes of generation {generation} were rebuilt "
                                   "but could not be saved: the disk is full") from None

    def backfill_analyses(self, *, say: Callable[[str], None] | None = None) -> BackfillReport:
        """Analyse, with this handle's analyser, every chunk whose stored analysis is missing
        or of another version (:mod:`trishield.kb.screening.analysis_backfill`); ``say`` hears the
        progress."""
        if self.analyser is None:
            raise InputError("this knowledge base was opened without a chunk analyser; "
                             "there is nothing to backfill with")
        with self._write_lock():
            return backfill(self.store, self.analyser, say=say)

    def compact(self, *, say: Callable[[str], None] | None = None) -> dict[str, object]:
        """Rebuild the dense index from the database (dropping HNSW tombstones, training or
        retraining IVF-PQ for the KB's current size), merge the FTS5 table's segments, save
        the snapshot and prune the change log (``trishield compact``); with an analyser,
        backfill the chunk analyses first (``say`` hears its progress)."""
        started = time.perf_counter()
        analyses = (None if self.analyser is None
                    else self.backfill_analyses(say=say).as_dict())
        with self._write_lock():
            before = self._backend.dense_index.tombstones if self._backend is not None else 0
            with self.store.transaction() as connection:
                connection.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
            with self._reading():
                generation = self.store.generation()
                backend = self._rebuilt(self.store.index_position())
            self._backend = backend
            self._save_as_full(backend, generation)
            engine = self._engine_after_commit() if not self.settings.engine.embedded else []
        dense = backend.dense_index
        report: dict[str, object] = {
            "generation": generation, "position": backend.position, "chunks": len(dense),
            "dense_index": dense.kind, "trained": dense.trained, "tombstones_dropped": before,
            "seconds": round(time.perf_counter() - started, 3)}
        if analyses is not None:
            report["analyses"] = analyses
        if not self.settings.engine.embedded:
            report["engine"] = engine[0] if engine else "in step (Milvus compacts itself)"
        return report

    # -- reading ----------------------------------------------------------------------------
    def unknown_terms(self, text: str) -> list[str]:
        """Stemmed content words of ``text`` that no chunk of this KB contains."""
        return LexicalIndex(self.store.connection).unknown_terms(text)

    def search(self, query: str, *, backend: str = "dense", k: int = 5,
               depth: int | None = None) -> list[Candidate]:
        """The top ``k`` chunks for ``query`` from ``backend`` (dense, bm25 or hybrid).

        Index reads and row reads share one database snapshot, so a write committed by
        another process meanwhile is either wholly in the answer or wholly absent. On a Milvus
        engine the engine answers first and the rows are read after, so a hit whose row was
        deleted meanwhile is dropped (:meth:`_engine_search`)."""
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty")
        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
        if not 1 <= k <= MAX_K:
            raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
        if not self.settings.engine.embedded:
            return self._engine_search(query, backend, k, depth)
        with self._reading():
            _, dense, lexical = self._refresh_indexes(persist=False)
            searchers = Searchers(lambda text, n: self._dense(dense, text, n), lexical.search)
            scored = RETRIEVAL_BACKENDS.get(backend)(searchers, query, k, depth)
            chunks = self.store.chunks_by_pk([item for item, _, _ in scored])
        return [Candidate(chunks[item], score, rank, backend, parts)
                for rank, (item, score, parts) in enumerate(scored, start=1)]

    def _dense(self, index: DenseIndex, query: str, depth: int) -> list[tuple[int, float]]:
        vector = self.embedder.encode([query])[0]
        return index.search(vector, depth, exact=self._exact_vectors)

    def stats(self) -> dict[str, object]:
        return {"directory": str(self.directory), "generation": self.store.generation(),
                **self.store.counts(), "embedding_model": self.settings.embedding_model,
                "chunking": self.settings.chunking.as_dict(),
                "dense_index": self.settings.dense_index, "engine": str(self.settings.engine)}

    # -- the search engine (kb/engines): Milvus instead of the embedded indexes -------------
    # The store stays the truth. The engine follows the chunk change log like the embedded
    # dense index, but only while the KB's write lock is held (by a writer after its commit,
    # or by a reader that finds the lock free), so two processes never apply deltas to one
    # collection at once; its position lives in the collection (MilvusBackend.position). A
    # failed catch-up keeps the commit and warns; searches then read the engine as it is and
    # drop hits whose row the store no longer holds, until a write, a search or `repair`
    # catches it up. Ring 1's ingest neighbourhood and `indexes()` stay on the embedded dense
    # index (it is kept, and snapshotted, as before).
    def _engine_backend(self):
        """The KB's Milvus backend, connected on first use."""
        if self._engine is None:
            from trishield.kb.indexes.engines.milvus import MilvusBackend

            config = self.settings.engine
            self._engine = MilvusBackend(config.uri, config.collection, self.dimension,
                                         index=config.index,
                                         owner=self.store.meta().get(ENGINE_OWNER))
        return self._engine

    def _drop_engine(self) -> None:
        """Forget a connection that failed: the next use connects again (a cluster that was
        unreachable, a Milvus Lite folder another process held)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def _follow_engine(self) -> str:
        """Catch the engine up with the store, or reload it (caller holds the write lock)."""
        engine = self._engine_backend()
        engine.refresh_position()
        return engine_sync.follow(engine, self.store)

    def _engine_after_commit(self) -> list[str]:
        """After a committed write (write lock held): the engine takes it in; a failure is a
        warning, never an error, since the write is committed and the engine only follows."""
        if self.settings.engine.embedded:
            return []
        try:
            self._follow_engine()
        except TriShieldError as error:
            self._drop_engine()
            log.error("committed generation %d, but the search engine did not follow: %s",
                      self.store.generation(), error)
            return [f"the write is committed (generation {self.store.generation()}), but the "
                    f"search engine did not take it in ({error}); searches miss it until the "
                    "engine catches up (at the next write or search that reaches it, or "
                    "`trishield repair`)"]
        return []

    def _try_follow_engine(self) -> None:
        """A reader's catch-up: only when the write lock is free right now (a writer holding
        it catches the engine up itself after its commit); failures leave the engine as is."""
        if self.read_only:
            return
        try:
            handle = (self.directory / LOCK).open("a")
        except OSError:
            return
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            try:
                self._follow_engine()
            except TriShieldError as error:
                self._drop_engine()
                log.warning("the search engine could not catch up: %s", error)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _engine_search(self, query: str, backend: str, k: int,
                       depth: int | None) -> list[Candidate]:
        """:meth:`search` on the engine: hits whose row the store no longer holds (an engine
        lagging behind a delete) are dropped, the rest read from the store's snapshot."""
        engine = self._engine_backend()
        if engine.position != self.store.index_position().current:
            self._try_follow_engine()

        def dense(text: str, n: int) -> list[tuple[int, float]]:
            return engine.dense(self.embedder.encode([text])[0], n)

        scored = RETRIEVAL_BACKENDS.get(backend)(Searchers(dense, engine.lexical), query, k,
                                                 depth)
        with self._reading():
            chunks = self.store.chunks_by_pk([item for item, _, _ in scored])
        kept = [(item, score, parts) for item, score, parts in scored if item in chunks]
        return [Candidate(chunks[item], score, rank, backend, parts)
                for rank, (item, score, parts) in enumerate(kept, start=1)]

    def _engine_state(self) -> dict[str, object]:
        """:func:`engine_sync.check` plus positions, or the error that prevented it."""
        config = self.settings.engine
        state: dict[str, object] = {"uri": config.uri, "collection": config.collection,
                                    "index": config.index}
        try:
            engine = self._engine_backend()
            position = engine.refresh_position()
            state |= engine_sync.check(engine, self.store, self.dimension)
        except TriShieldError as error:
            return state | {"consistent": False, "in_step": False, "error": str(error)}
        current = self.store.index_position().current
        return state | {"position": position, "store_position": current,
                        "in_step": position == current}

    def attach_engine(self, engine: EngineConfig | str) -> dict[str, object]:
        """Point this KB at another engine (``trishield engine attach``): a Milvus collection
        is loaded in full from the store, then the KB's meta names it; ``"embedded"`` moves
        searches back to the embedded indexes. Nothing changes in the meta if the load fails.
        """
        if isinstance(engine, str):
            engine = EngineConfig.parse(engine)
        started = time.perf_counter()
        with self._write_lock():
            owner = uuid.uuid4().hex
            report: dict[str, object] = {"engine": str(engine)}
            backend = None
            if not engine.embedded:
                from trishield.kb.indexes.engines.milvus import MilvusBackend

                backend = MilvusBackend(engine.uri, engine.collection, self.dimension,
                                        index=engine.index, owner=owner)
                try:
                    report |= engine_sync.sync(backend, self.store).as_dict()
                except BaseException:
                    backend.close()
                    raise
            with self.store.transaction() as connection:
                self.store.set_meta(engine.as_meta() | {ENGINE_OWNER: owner}, connection)
            previous, self._engine = self._engine, backend
            if previous is not None:
                previous.close()
            self.settings = replace(self.settings, engine=engine)
        return report | {"seconds": round(time.perf_counter() - started, 3)}

    # -- reading for higher layers (so that nothing outside kb/ runs SQL on the store) -------
    def documents_per_writer(self) -> dict[str, int]:
        """``writer -> stored documents``: a writer's track record when evidence is weighed.

        Ring 2 asks for it on every question, and counting cost 12 ms a question on wiki5k:
        it is kept until the chunk change log moves (every ingest, release and delete adds or
        removes chunks, so a count can only change with it)."""
        return self.writer_records()[0]

    def writers_since(self) -> dict[str, float]:
        """``writer -> when its first stored document entered the KB``: how long a writer had
        been writing when it wrote a passage caps its track record (the evidence's tenure).
        Kept with :meth:`documents_per_writer`, for the same reason."""
        return self.writer_records()[1]

    def writer_records(self) -> tuple[dict[str, int], dict[str, float]]:
        """:meth:`documents_per_writer` and :meth:`writers_since` from one look at the
        change log (Ring 2 reads both on every question), read again from the store only
        when the log has moved since they were last read; copies, so the cache stays as
        read."""
        position = self.store.index_position().current
        cached = self._writer_records
        if cached is None or cached[0] != position:
            cached = (position, self.store.documents_per_writer(), self.store.writers_since())
            self._writer_records = cached
        return dict(cached[1]), dict(cached[2])

    def document_ids(self) -> list[str]:
        """Ids of every stored document (not the quarantined or deleted ones), oldest first."""
        rows = self.store.connection.execute("SELECT doc_id FROM documents ORDER BY pk")
        return [doc_id for (doc_id,) in rows]

    def content_hash_of(self, doc_id: str) -> str | None:
        """The stored document's content hash (what a publisher signs), or None if absent."""
        row = self.store.connection.execute(
            "SELECT content_hash FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        return None if row is None else row[0]

    def documents_with_embeddings(self) -> list[tuple[str, str, np.ndarray]]:
        """Every stored document, oldest first, as ``(id, text, chunk embeddings)``: one row
        per chunk, in chunk order (to screen stored documents as if they were written now)."""
        rows = self.store.connection.execute(
            "SELECT d.doc_id, d.text, c.embedding FROM documents d JOIN chunks c "
            "ON c.doc_pk = d.pk ORDER BY d.pk, c.chunk_index").fetchall()
        grouped: dict[str, tuple[str, list[bytes]]] = {}
        for doc_id, text, blob in rows:
            grouped.setdefault(doc_id, (text, []))[1].append(blob)
        return [(doc_id, text, np.frombuffer(b"".join(blobs), dtype=np.float32)
                 .reshape(len(blobs), self.dimension))
                for doc_id, (text, blobs) in grouped.items()]

    def embedding_sample(self, limit: int = OUTLIER_REFERENCE_SIZE, seed: int = 0) -> np.ndarray:
        """Up to ``limit`` stored chunk embeddings (a seeded sample when there are more), for
        higher layers that screen stored documents as a whole; ingest screening measures a
        new document against other writers' documents instead (:mod:`kb.neighbourhood`)."""
        return self.store.sample_embeddings(self.dimension, limit, seed)

    def embeddings_for(self, candidates: Sequence[Candidate]) -> dict[int, np.ndarray]:
        """The stored embedding of each candidate's chunk, by chunk primary key: the one its
        search read with the row (same snapshot, no second query), else read now."""
        carried = [c.chunk for c in candidates if c.chunk.embedding is not None]
        found: dict[int, np.ndarray] = {}
        if carried:
            width = 4 * self.dimension
            sizes = {len(chunk.embedding) for chunk in carried}
            if sizes != {width}:
                raise KnowledgeBaseError(f"stored embeddings of {sorted(sizes)} bytes, not "
                                         f"{width} (dimension {self.dimension})")
            vectors = np.frombuffer(b"".join(chunk.embedding for chunk in carried),
                                    dtype=np.float32).reshape(len(carried), self.dimension)
            found = dict(zip((chunk.pk for chunk in carried), vectors, strict=True))
        if len(found) < len(candidates):
            found.update(self.store.embeddings_of(
                [c.chunk.pk for c in candidates if c.chunk.pk not in found], self.dimension))
        return found
