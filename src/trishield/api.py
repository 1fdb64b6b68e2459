"""The public Python API: what ``import trishield`` gives a developer.

Three things in a few lines each, with the same defaults as the command line:

* :func:`open_kb` opens (or creates) a knowledge base whose ingests Ring 1 screens;
* :func:`defend` builds a named defense over it (``full`` by default) whose ``ask(question)``
  returns an :class:`~trishield.pipeline.Answer` with its typed :class:`~trishield.trace.Trace`;
* :func:`screen` runs Rings 1 and 2 over passages that *your* retriever found (LangChain,
  LlamaIndex, a vector database), with the provenance you know, and returns the passages to
  keep, ranked by trust, with the trace. No LLM is called.

Managing the documents of a knowledge base, as ``trishield ingest``, ``trishield documents``
and ``trishield quarantine`` do: :func:`ingest_path` (batched, resumable, updates changed
files as new versions), :func:`list_documents`, :func:`show_document`,
:func:`delete_documents`, :func:`release_quarantined` and :func:`discard_quarantined`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trishield.errors import InputError
from trishield.kb.ingest_report import IngestReport, ProgressCallback
from trishield.kb.read_limits import MAX_FILE_BYTES, ReadLimits

if TYPE_CHECKING:  # the pipeline, the rings and the models load when a function needs them
    from trishield.defenses.retrievers import Passage
    from trishield.kb import KnowledgeBase
    from trishield.kb.file_walk import SkippedFile
    from trishield.kb.loaders import FailedFile, FileProgress, LoadedBatch
    from trishield.kb.screening import Screener
    from trishield.llm.base import Reader
    from trishield.pipeline import Pipeline
    from trishield.settings import Settings
    from trishield.stages import Retriever
    from trishield.trace import Trace


def open_kb(path: str | Path, *, create: bool = False, guard: bool = True,
            settings: Settings | None = None, **options: Any) -> KnowledgeBase:
    """Open the knowledge base at ``path`` (``create=True`` makes a new one).

    ``guard`` (default on, as in ``trishield ingest``): every ``kb.ingest`` is screened by
    Ring 1 and what it blocks goes to the quarantine instead of the index (documents of
    trusted writers are scored, never quarantined). Every chunk written is analysed for Ring 1
    at query time (:mod:`trishield.rings.analysis`), guard or not. ``options`` go to
    :meth:`KnowledgeBase.open` (embedding model, chunking, dense index kind).
    """
    from trishield.kb import KnowledgeBase
    from trishield.rings.analysis import DEFAULT_ANALYSER
    from trishield.rings.ingest_guard import IngestGuard
    from trishield.settings import Settings

    settings = settings or Settings()
    screener = IngestGuard(settings.pipeline.guard) if guard else None
    options.setdefault("analyser", DEFAULT_ANALYSER)
    return KnowledgeBase.open(path, create=create, screener=screener, **options)


def defend(source: KnowledgeBase | Retriever, defense: str = "full", *,
           panel: Sequence[Reader] | None = None, settings: Settings | None = None,
           options: Mapping[str, Any] | None = None,
           second_reader: Reader | None = None) -> Pipeline:
    """The defense ``defense`` (see ``trishield.DEFENSES``) over a knowledge base or any
    :class:`~trishield.stages.Retriever`. ``panel`` defaults to the configured panel (three
    local models, loaded on first use) and its configured second reader; a ``panel`` you pass
    has no second reader unless you pass ``second_reader`` too. ``settings`` default to those
    of ``trishield config show``."""
    from trishield.defenses import build_defense
    from trishield.llm.panel import build_panel, build_second_reader
    from trishield.settings import Settings

    settings = settings or Settings()
    if panel is not None:  # the caller names every reader: no second reader unless given
        readers, second = list(panel), second_reader
    else:
        readers = build_panel(settings.panel)
        second = second_reader or build_second_reader(settings.second_reader)
    return build_defense(defense, source, readers, config=settings.pipeline, options=options,
                         second_reader=second)


@dataclass(frozen=True)
class ScreenedPassage:
    """One of your passages that Rings 1 and 2 kept, with the trust Ring 2 gave it."""

    passage: Passage
    trust: float

    @property
    def id(self) -> str:
        return self.passage.id


@dataclass(frozen=True)
class Screening:
    """What to hand your LLM: ``kept`` (most trusted first, at most ``k``), or nothing and
    ``refusal`` when Ring 2 found nothing to answer from; ``removed`` are the ids Ring 1
    blocked; the trace says why for every passage, under ``trace_ids[passage id]`` (the
    trace names a passage ``doc_id#n``, its place in its document)."""

    kept: list[ScreenedPassage]
    removed: list[str]
    refusal: str | None
    trace: Trace
    trace_ids: dict[str, str] = field(default_factory=dict)
    embedded: int = 0
    """Passages the screening embedded itself: those given without an ``embedding``."""


def screen(question: str, passages: Sequence[Passage | Mapping[str, Any]], *,
           k: int | None = None, settings: Settings | None = None,
           embedding_model: str | None = None) -> Screening:
    """Rings 1 and 2 over passages from your own retriever (question + passages with
    provenance in, filtered and ranked passages and a trace out).

    A passage is a :class:`Passage` or a mapping with its fields (``id``, ``text``, ``tier``
    and optionally ``doc_id``, ``title``, ``writer``, ``score``, ``ingested_at``,
    ``embedding``). ``k`` (default: the configured context size) is how many to keep.
    Ring 1's outlier score (20 or more passages) and Ring 2's near-duplicate clusters read
    the passages' embeddings: those your retriever gave (``embedding``, of
    ``embedding_model``, default: the default model) are used as they are, the others are
    embedded with ``embedding_model`` in one batch (``Screening.embedded`` counts them).
    """
    from trishield.defenses.retrievers import Passage, PassageRetriever
    from trishield.defenses.ring_stages import Ring1Filter, Ring2Reranker
    from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL
    from trishield.settings import Settings
    from trishield.stages import Run, candidate_row
    from trishield.trace import Trace

    if not isinstance(question, str) or not question.strip():
        raise InputError("the question is empty")
    given = [p if isinstance(p, Passage) else _passage(p, n) for n, p in enumerate(passages)]
    config = (settings or Settings()).pipeline
    k = config.scorer.context if k is None else k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    retriever = PassageRetriever(given, embedding_model or DEFAULT_EMBEDDING_MODEL)
    run = Run(Trace(question=question, defense="screen", backend=retriever.name, k=k,
                    panel=[]), retriever=retriever)
    mark = time.perf_counter()
    candidates = retriever.retrieve(question, len(given))
    run.trace.pool = len(given)
    run.trace.candidates = [candidate_row(c) for c in candidates]
    ring1, ring2 = Ring1Filter(config.guard), Ring2Reranker(config.scorer,
                                                            backend=retriever.name)
    survivors = ring1.screen(run, question, candidates)
    run.timed(ring1.name, mark)
    mark = time.perf_counter()
    reranked = ring2.rerank(run, question, survivors, k)
    run.timed(ring2.name, mark)
    run.trace.context = [p.row() for p in reranked.context]
    run.timings["total"] = time.perf_counter() - run.started
    run.trace.timings_s = {name: round(value, 4) for name, value in run.timings.items()}
    run.trace.mark_set("version", "candidates", "context", "llm_calls", "llm_calls_cached")
    by_chunk = {c.chunk_id: given[c.chunk.pk] for c in candidates}
    kept = [ScreenedPassage(by_chunk[p.id], p.trust) for p in reranked.context]
    removed = [by_chunk[chunk].id for chunk in run.trace.ring1.blocked] \
        if run.trace.ring1 else []
    trace_ids = {given[c.chunk.pk].id: c.chunk_id for c in candidates}
    return Screening(kept, removed, reranked.refusal, run.trace, trace_ids, retriever.encoded)


def _passage(fields: Mapping[str, Any], position: int) -> Passage:
    from trishield.defenses.retrievers import Passage

    if not isinstance(fields, Mapping):
        raise InputError(f"passage {position}: expected a Passage or a mapping, got "
                         f"{type(fields).__name__}")
    known = {"id", "text", "tier", "doc_id", "title", "writer", "score", "ingested_at",
             "embedding"}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise InputError(f"passage {position}: unknown field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}")
    if "id" not in fields or "text" not in fields:
        raise InputError(f"passage {position}: 'id' and 'text' are required")
    return Passage(**fields)


DEFAULT_COMMIT_SECONDS = 30.0
"""How long a committed batch of :func:`ingest_path` takes at most, about: an interrupt loses
at most the running batch (see :class:`~trishield.kb.ingest_report.CommitPacer`). A commit
writes only what changed in the indexes, so frequent ones cost little."""


@dataclass(frozen=True)
class PathIngest:
    """What :func:`ingest_path` did: the KB's report plus the files it did not read
    (``skipped_files``: unsupported types, links out of the folder, pipes and devices, each
    with the reason; ``failed_files``: unreadable or over a read limit, each with its
    error)."""

    report: IngestReport
    skipped_files: list[SkippedFile] = field(default_factory=list)
    failed_files: list[FailedFile] = field(default_factory=list)


def load_input(path: str | Path, *, id_prefix: str = "",
               max_file_bytes: int | None = MAX_FILE_BYTES,
               on_file: FileProgress | None = None,
               limits: ReadLimits | None = None) -> LoadedBatch:
    """Read and validate a file or folder (see :func:`trishield.load_path`) before anything
    is written; sources name files by absolute path, which is how an update recognises the
    file a stored document came from. ``limits`` bound each file (see
    :class:`~trishield.kb.read_limits.ReadLimits`; given, it replaces ``max_file_bytes``)."""
    from trishield.kb.loaders import load_path

    return load_path(Path(os.path.abspath(path)), id_prefix=id_prefix,
                     max_file_bytes=max_file_bytes, on_file=on_file, limits=limits)


def ingest_loaded(kb: KnowledgeBase, batch: LoadedBatch, *, source: str,
                  tier: str = "neutral", writer: str = "cli",
                  batch_size: int | None = None, update: bool = True,
                  guard: Screener | None = None,
                  on_progress: ProgressCallback | None = None,
                  commit_seconds: float | None = DEFAULT_COMMIT_SECONDS) -> PathIngest:
    """Write what :func:`load_input` read, in committed batches (see :func:`ingest_path`)."""
    report = kb.ingest(batch.documents, tier=tier, writer=writer, source=source, guard=guard,
                       batch_size=batch_size, update=update, on_progress=on_progress,
                       commit_seconds=commit_seconds)
    return PathIngest(report, batch.skipped_files, batch.failed_files)


def ingest_path(kb: KnowledgeBase, path: str | Path, *, tier: str = "neutral",
                writer: str = "cli", id_prefix: str = "",
                max_file_bytes: int | None = MAX_FILE_BYTES,
                batch_size: int | None = None, update: bool = True,
                guard: Screener | None = None, on_file: FileProgress | None = None,
                on_progress: ProgressCallback | None = None,
                limits: ReadLimits | None = None,
                commit_seconds: float | None = DEFAULT_COMMIT_SECONDS) -> PathIngest:
    """Ingest a file or folder (see :func:`trishield.load_path`) in committed batches of
    about ``commit_seconds`` each (and at most ``batch_size`` documents, when given).

    Ids are ``id_prefix`` plus the path relative to the folder (a single file: its name),
    without the suffix. A re-run skips what is stored identically, so after an interrupt
    (:class:`~trishield.kb.IngestInterrupted`, whose ``report`` says what was kept) running
    it again finishes the work. With ``update`` (default) a changed file is stored as the
    next version of its document, the old one retired; the same id from another file is
    refused. ``guard`` defaults to the KB's own screener (Ring 1 for :func:`open_kb`).
    Everything is read and validated before the first write.
    """
    batch = load_input(path, id_prefix=id_prefix, max_file_bytes=max_file_bytes,
                       on_file=on_file, limits=limits)
    return ingest_loaded(kb, batch, source=os.path.abspath(path), tier=tier, writer=writer,
                         batch_size=batch_size, update=update, guard=guard,
                         on_progress=on_progress, commit_seconds=commit_seconds)


def list_documents(kb: KnowledgeBase, *, writer: str | None = None, prefix: str | None = None,
                   limit: int | None = None) -> list[dict]:
    """Stored documents without their text, oldest first (see
    :meth:`KnowledgeBase.documents`)."""
    return kb.documents(writer=writer, prefix=prefix, limit=limit)


def show_document(kb: KnowledgeBase, doc_id: str) -> dict:
    """One stored document with its text, metadata, version and earlier versions."""
    return kb.document(doc_id)


def delete_documents(kb: KnowledgeBase, doc_ids: Sequence[str], *, by: str,
                     reason: str = "") -> list[dict]:
    """Soft-delete documents (audited, all or none); returns their tombstones."""
    return kb.delete_many(doc_ids, by=by, reason=reason)


def _held(kb: KnowledgeBase, doc_ids: Sequence[str], writer: str | None) -> list[str]:
    """The ids a quarantine decision covers: those given, or all of ``writer``'s held ones."""
    if isinstance(doc_ids, str):
        raise InputError("give a list of document ids, not one string")
    if bool(doc_ids) == (writer is not None):
        raise InputError("give document ids or a writer, not both and not neither")
    if writer is None:
        return list(doc_ids)
    ids = kb.held_ids(writer=writer)
    if not ids:
        raise InputError(f"no document of writer {writer!r} is held in quarantine")
    return ids


def release_quarantined(kb: KnowledgeBase, doc_ids: Sequence[str] = (), *,
                        writer: str | None = None, by: str) -> IngestReport:
    """Release held documents into the KB, the ones named or all of ``writer``'s, in one
    audited transaction (all or none)."""
    return kb.release_many(_held(kb, doc_ids, writer), by=by)


def discard_quarantined(kb: KnowledgeBase, doc_ids: Sequence[str] = (), *,
                        writer: str | None = None, by: str, reason: str = "") -> list[dict]:
    """Discard held documents (not stored, ids freed), the ones named or all of
    ``writer``'s, in one audited transaction (all or none)."""
    return kb.discard_many(_held(kb, doc_ids, writer), by=by, reason=reason)
