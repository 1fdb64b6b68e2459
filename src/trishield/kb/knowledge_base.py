"""A knowledge base directory, and :class:`KnowledgeBase`, the one face of its parts.

Over 500 lines on purpose: this is the KB's public API, and every method keeps here the full
docstring that callers read (``help(KnowledgeBase.ingest)``); the code itself is the opening
and one-line delegations, about 150 lines.

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
point: rows, lexical index and change log together; ``kb/writing.py``); the dense index then
follows the change log and is saved as a snapshot when one is due (``kb/indexes/snapshots.py``).
A crash before the commit leaves the KB as before; after it, readers catch up from the log. A
directory that cannot be written is opened read-only: searches work, writes raise
:class:`~trishield.errors.ReadOnlyError` before anything is tried.

:class:`KnowledgeBase` is a facade: it opens the directory and composes the parts, each its own
module, and its public methods delegate to them:

* the store, ``kb/store/`` (:class:`~trishield.kb.store.Store`: SQLite, migrations,
  ownership, the change log, the disputes tables) and the write lock, ``kb/locking.py``;
* the indexes, ``kb/indexes/`` (:class:`~trishield.kb.indexes.snapshots.DenseIndexes`: the
  dense index in memory and its snapshots; :class:`~trishield.kb.indexes.engine_link.EngineLink`:
  a Milvus engine instead);
* Ring 1's screening at ingest, ``kb/screening/``
  (:class:`~trishield.kb.screening.at_ingest.IngestScreening`: the neighbourhood and what the
  handle keeps between writes);
* the write path, ``kb/writing.py`` (ingest, release), the curation commands,
  ``kb/curation.py`` (documents, delete, discard, disputes), and the read path,
  ``kb/reading.py`` (search and the reads higher layers make).
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from trishield.errors import InputError
from trishield.kb.analysis import ChunkAnalyser
from trishield.kb.chunking import ChunkingConfig
from trishield.kb.curation import Curation
from trishield.kb.documents import Document, Tier
from trishield.kb.indexes.dense import DenseIndex
from trishield.kb.indexes.engine_link import EngineLink
from trishield.kb.indexes.engines.config import EngineConfig
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.indexes.retrieval import Candidate
from trishield.kb.indexes.snapshots import DenseIndexes
from trishield.kb.ingest_report import IngestReport, ProgressCallback
from trishield.kb.locking import WriteLock
from trishield.kb.opening import DATABASE, KBSettings, open_store, settings_of
from trishield.kb.reading import OUTLIER_REFERENCE_SIZE, Reads
from trishield.kb.screening import Screener
from trishield.kb.screening.analysis_backfill import BackfillReport, backfill
from trishield.kb.screening.at_ingest import IngestScreening
from trishield.kb.store import Store
from trishield.kb.store.disputes import Dispute, Recorded, Resolution
from trishield.kb.store.fts import TABLE as FTS_TABLE
from trishield.kb.writing import Writes
from trishield.models.embedders import get_embedding_model, load_embedder

__all__ = ["DATABASE", "KBSettings", "KnowledgeBase"]
log = logging.getLogger("trishield.kb")


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
        self.write_time_limit = write_time_limit
        self.dimension = get_embedding_model(settings.embedding_model).dimension
        # the parts (module docstring), each over the same store
        self._lock = WriteLock(directory, lambda: store.read_only, lock_timeout)
        self._engines = EngineLink(store, self.dimension, self._lock,
                                   lambda: self.settings.engine,
                                   lambda text: self.embedder.encode([text])[0])
        self._dense_indexes = DenseIndexes(directory, store, settings.dense_index,
                                           self.dimension, engine_floor=self._engines.floor)
        self._screening = IngestScreening(
            directory, store, self.dimension, settings.embedding_model,
            lambda: self._refresh_indexes(persist=False)[1])
        self._writes = Writes(self)
        self._curation = Curation(self)
        self._reads = Reads(self)

    @property
    def lock_timeout(self) -> float | None:
        """How long a writer waits for the KB's lock (None: as long as it takes)."""
        return self._lock.timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float | None) -> None:
        self._lock.timeout = seconds


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
        store = open_store(directory, create=create, read_only=read_only,
                           embedding_model=embedding_model, dense_index=dense_index,
                           clock=clock)
        settings = settings_of(store, directory, embedding_model=embedding_model,
                               chunking=chunking, dense_index=dense_index, engine=engine)
        return cls(directory, store, settings, screener=screener, analyser=analyser,
                   lock_timeout=lock_timeout, write_time_limit=write_time_limit)

    def close(self) -> None:
        if not self.read_only:
            self._screening.save()
        self._engines.close()
        self.store.close()


    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self):
        return load_embedder(self.settings.embedding_model)

    # -- writing (kb/writing.py) ------------------------------------------------------------
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
        return self._writes.ingest(documents, tier=tier, writer=writer, source=source,
                                   progress=progress, guard=guard, writer_key=writer_key,
                                   batch_size=batch_size, update=update,
                                   on_progress=on_progress, commit_seconds=commit_seconds)

    def release(self, doc_id: str, *, by: str, progress: bool = False) -> IngestReport:
        """Move a quarantined document into the KB (an admin decision, audited)."""
        return self._writes.release(doc_id, by=by, progress=progress)

    def release_many(self, doc_ids: Sequence[str], *, by: str,
                     progress: bool = False) -> IngestReport:
        """Move quarantined documents into the KB in one transaction (an admin decision,
        audited for each): all of them, or none when one is not held.

        A held new version of a document its writer still stores (an update Ring 1 blocked)
        replaces the stored one on release, which is retired as an update is."""
        return self._writes.release_many(doc_ids, by=by, progress=progress)

    # -- documents and the quarantine (kb/curation.py) --------------------------------------
    def documents(self, *, writer: str | None = None, prefix: str | None = None,
                  limit: int | None = None) -> list[dict]:
        """Stored documents without their text (id, title, writer, tier, version, source,
        ingested_at, content_hash, chunks), oldest first; optionally one ``writer``'s, or
        those whose id starts with ``prefix``, at most ``limit``."""
        return self._curation.documents(writer=writer, prefix=prefix, limit=limit)

    def document(self, doc_id: str) -> dict:
        """One stored document in full: text, title, metadata (front matter), provenance,
        its version, chunk count and the earlier versions updates retired.
        :class:`NotFoundError` says whether it was deleted or is held in quarantine."""
        return self._curation.document(doc_id)

    def delete(self, doc_id: str, *, by: str, reason: str = "",
               owner: tuple[str, str] | None = None) -> dict:
        """Soft-delete a stored document (audited, kept in ``deleted_documents``).

        With ``owner`` (``(writer, writer_key)`` of a caller who is not an admin), only that
        writer's own document: the API key that wrote it, or for a local write ('' key) the
        writer name; anything else is a :class:`ForbiddenError`, audited. Same atomicity as
        an ingest: the rows move and the generation advances in one transaction, then the
        indexes for the new generation are written.
        """
        return self._curation.delete(doc_id, by=by, reason=reason, owner=owner)

    def delete_many(self, doc_ids: Sequence[str], *, by: str, reason: str = "") -> list[dict]:
        """Soft-delete several stored documents in one transaction (audited for each, kept
        in ``deleted_documents``): all of them, or none when one is not stored."""
        return self._curation.delete_many(doc_ids, by=by, reason=reason)

    def discard(self, doc_id: str, *, by: str, reason: str = "",
                owner: tuple[str, str] | None = None) -> dict:
        """End the quarantine hold on ``doc_id`` without storing it, freeing the id: an
        admin *discards* it; with ``owner`` (``(writer, writer_key)``), its own writer
        *withdraws* it. Audited; the row stays in the quarantine's history.

        Another writer's held document is reported as not found (:class:`NotFoundError`),
        not as forbidden: the quarantine is not shown to other writers."""
        return self._curation.discard(doc_id, by=by, reason=reason, owner=owner)

    def discard_many(self, doc_ids: Sequence[str], *, by: str, reason: str = "") -> list[dict]:
        """End the quarantine hold on several documents at once (an admin decision, audited
        for each, in one transaction): all of them, or none when one is not held."""
        return self._curation.discard_many(doc_ids, by=by, reason=reason)

    def held_ids(self, *, writer: str | None = None) -> list[str]:
        """Ids held in quarantine now, oldest first; with ``writer``, only that writer's."""
        return self._curation.held_ids(writer=writer)

    def audit_refused(self, action: str, writer: str, writer_key: str, doc_id: str | None,
                      error: Exception) -> None:
        """Audit a refused write (the refusal itself is the caller's to raise; the service
        audits a refusal it decides itself, a signature withdrawal by a non-admin, here)."""
        self._curation.audit_refused(action, writer, writer_key, doc_id, error)

    # -- disputes (kb/store/disputes.py, kb/store/dispute_resolution.py) -------------------
    def record_dispute(self, dispute: Dispute) -> Recorded:
        """Record a conflict between writers the evidence met (deduplicated); never raises
        for the KB's state: a read-only or busy KB is said in the result, and logged."""
        return self._curation.record_dispute(dispute)

    def disputes(self, *, state: str | None = "open", limit: int = 100) -> list[dict]:
        """Recorded disputes, most recently met first (``state`` ``all`` or None: every
        one)."""
        return self._curation.disputes(state=state, limit=limit)

    def dispute(self, dispute_id: int) -> dict:
        """One recorded dispute in full, each passage with its text and its state now
        (stored, held in quarantine, gone); :class:`NotFoundError` when there is none."""
        return self._curation.dispute(dispute_id)

    def resolve_dispute(self, dispute_id: int, *, action: str, side: int | None = None,
                        by: str, note: str = "") -> Resolution:
        """Settle a dispute: ``quarantine`` or ``trust`` side ``side`` (1-based), or
        ``dismiss`` it; one transaction with its audit entries, under the KB's write lock
        (:mod:`trishield.kb.store.dispute_resolution`)."""
        return self._curation.resolve_dispute(dispute_id, action=action, side=side, by=by,
                                              note=note)

    # -- the indexes (kb/indexes/): following every committed write ------------------------
    def _refresh_indexes(self, *, persist: bool) -> tuple[int, DenseIndex, LexicalIndex]:
        """The change-log position and both indexes, in step with the database
        (:meth:`DenseIndexes.refresh`)."""
        return self._dense_indexes.refresh(persist=persist)

    def _after_commit(self) -> list[str]:
        """After a committed write: the dense index takes in the write's rows, and a snapshot
        is saved when one is due (the lexical index was written with the rows).

        The write is committed whatever happens here, and indexes are derived data, so a
        failed save is reported (a warning) and logged, never raised: readers catch up from
        the change log or rebuild in memory, and a later write or ``trishield repair`` saves
        them. A Milvus engine follows first, so the change log it still needs is not pruned
        under it."""
        engine = self._engines.after_commit()
        try:
            self._dense_indexes.after_commit()
        except OSError as error:
            full = error.errno in (errno.ENOSPC, errno.EDQUOT)
            why = "the disk is full" if full else (error.strerror or str(error))
            log.error("committed generation %d, but its indexes were not saved: %s",
                      self.store.generation(), why)
            return [f"the write is committed (generation {self.store.generation()}), but its "
                    f"search indexes could not be saved ({why}); they are rebuilt in memory "
                    "until the next write or `trishield repair` saves them", *engine]
        return engine

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
        present, intact = self._dense_indexes.check()
        found: dict[str, object] = {"generation": generation, "present": present,
                                    "intact": intact}
        if not self.settings.engine.embedded:
            engine = self._engines.state()
            found["engine"] = engine
            found["intact"] = intact and bool(engine["consistent"]) and bool(engine["in_step"])
        return found

    def repair(self) -> int:
        """Rebuild the dense index from the database and save its snapshot (after a crash,
        or when a file was damaged), discard Ring 1's saved neighbour lists, and reload a
        Milvus engine in full; returns the generation."""
        with self._lock.hold():
            self._screening.discard()
            self._dense_indexes.backend = None
            generation, _ = self._dense_indexes.rebuild_and_save()
            if not self.settings.engine.embedded:
                self._engines.reload()
            return generation

    def backfill_analyses(self, *, say: Callable[[str], None] | None = None) -> BackfillReport:
        """Analyse, with this handle's analyser, every chunk whose stored analysis is missing
        or of another version (:mod:`trishield.kb.screening.analysis_backfill`); ``say`` hears
        the progress."""
        if self.analyser is None:
            raise InputError("this knowledge base was opened without a chunk analyser; "
                             "there is nothing to backfill with")
        with self._lock.hold():
            return backfill(self.store, self.analyser, say=say)

    def compact(self, *, say: Callable[[str], None] | None = None) -> dict[str, object]:
        """Rebuild the dense index from the database (dropping HNSW tombstones, training or
        retraining IVF-PQ for the KB's current size), merge the FTS5 table's segments, save
        the snapshot and prune the change log (``trishield compact``); with an analyser,
        backfill the chunk analyses first (``say`` hears its progress)."""
        started = time.perf_counter()
        analyses = (None if self.analyser is None
                    else self.backfill_analyses(say=say).as_dict())
        with self._lock.hold():
            loaded = self._dense_indexes.backend
            before = loaded.dense_index.tombstones if loaded is not None else 0
            with self.store.transaction() as connection:
                connection.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
            generation, backend = self._dense_indexes.rebuild_and_save()
            engine = self._engines.after_commit() if not self.settings.engine.embedded else []
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

    def stats(self) -> dict[str, object]:
        return {"directory": str(self.directory), "generation": self.store.generation(),
                **self.store.counts(), "embedding_model": self.settings.embedding_model,
                "chunking": self.settings.chunking.as_dict(),
                "dense_index": self.settings.dense_index, "engine": str(self.settings.engine)}

    # -- the search engine (kb/indexes/engine_link.py): Milvus instead of the embedded ones --
    def attach_engine(self, engine: EngineConfig | str) -> dict[str, object]:
        """Point this KB at another engine (``trishield engine attach``): a Milvus collection
        is loaded in full from the store, then the KB's meta names it; ``"embedded"`` moves
        searches back to the embedded indexes. Nothing changes in the meta if the load fails.
        """
        if isinstance(engine, str):
            engine = EngineConfig.parse(engine)
        started = time.perf_counter()
        with self._lock.hold():
            report = self._engines.attach(engine)
            self.settings = replace(self.settings, engine=engine)
        return report | {"seconds": round(time.perf_counter() - started, 3)}


    # -- reading (kb/reading.py), so that nothing outside kb/ runs SQL on the store --------
    def search(self, query: str, *, backend: str = "dense", k: int = 5,
               depth: int | None = None) -> list[Candidate]:
        """The top ``k`` chunks for ``query`` from ``backend`` (dense, bm25 or hybrid).

        Index reads and row reads share one database snapshot, so a write committed by
        another process meanwhile is either wholly in the answer or wholly absent. On a Milvus
        engine the engine answers first and the rows are read after, so a hit whose row was
        deleted meanwhile is dropped (:meth:`_engine_search`)."""
        return self._reads.search(query, backend=backend, k=k, depth=depth)

    def unknown_terms(self, text: str) -> list[str]:
        """Stemmed content words of ``text`` that no chunk of this KB contains."""
        return self._reads.unknown_terms(text)

    def documents_per_writer(self) -> dict[str, int]:
        """``writer -> stored documents``: a writer's track record when evidence is weighed.

        Ring 2 asks for it on every question, and counting cost 12 ms a question on wiki5k:
        it is kept until the chunk change log moves (every ingest, release and delete adds or
        removes chunks, so a count can only change with it)."""
        return self._reads.documents_per_writer()

    def writers_since(self) -> dict[str, float]:
        """``writer -> when its first stored document entered the KB``: how long a writer had
        been writing when it wrote a passage caps its track record (the evidence's tenure).
        Kept with :meth:`documents_per_writer`, for the same reason."""
        return self._reads.writers_since()

    def writer_records(self) -> tuple[dict[str, int], dict[str, float]]:
        """:meth:`documents_per_writer` and :meth:`writers_since` from one look at the
        change log (Ring 2 reads both on every question), read again from the store only
        when the log has moved since they were last read; copies, so the cache stays as
        read."""
        return self._reads.writer_records()

    def document_ids(self) -> list[str]:
        """Ids of every stored document (not the quarantined or deleted ones), oldest first."""
        return self._reads.document_ids()

    def content_hash_of(self, doc_id: str) -> str | None:
        """The stored document's content hash (what a publisher signs), or None if absent."""
        return self._reads.content_hash_of(doc_id)

    def documents_with_embeddings(self) -> list[tuple[str, str, np.ndarray]]:
        """Every stored document, oldest first, as ``(id, text, chunk embeddings)``: one row
        per chunk, in chunk order (to screen stored documents as if they were written now)."""
        return self._reads.documents_with_embeddings()

    def embedding_sample(self, limit: int = OUTLIER_REFERENCE_SIZE, seed: int = 0) -> np.ndarray:
        """Up to ``limit`` stored chunk embeddings (a seeded sample when there are more), for
        higher layers that screen stored documents as a whole; ingest screening measures a
        new document against other writers' documents instead (:mod:`kb.neighbourhood`)."""
        return self._reads.embedding_sample(limit, seed)

    def embeddings_for(self, candidates: Sequence[Candidate]) -> dict[int, np.ndarray]:
        """The stored embedding of each candidate's chunk, by chunk primary key: the one its
        search read with the row (same snapshot, no second query), else read now."""
        return self._reads.embeddings_for(candidates)
