"""The write path of a KB handle: documents in, screened, committed, indexed; and releases.

An ingest checks its input, plans the batch against what the KB holds
(:mod:`trishield.kb.store.ownership`), chunks and embeds the new documents (in slices when the
write has a time limit), has them screened (:mod:`trishield.kb.screening.at_ingest`) and
analysed (:mod:`trishield.kb.analysis`), then commits the batch in one SQLite transaction (the
atomic point: rows, quarantine, lexical index and change log together). The indexes follow
after the commit (``KnowledgeBase._after_commit``). A crash before the commit leaves the KB as
before; the pause points (:func:`~trishield.kb.locking.fault_point`) let the crash tests stop
a real process at each phase.

A release is the same commit for documents a person moved out of the quarantine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from trishield.errors import (
    BusyError,
    ConflictError,
    InputError,
    KnowledgeBaseError,
    TriShieldError,
)
from trishield.kb.chunking import chunk_document, embedding_text
from trishield.kb.curation import check_name, distinct_ids, held_records
from trishield.kb.documents import Chunk, Document, Tier
from trishield.kb.ingest_report import (
    CommitPacer,
    IngestInterrupted,
    IngestReport,
    ProgressCallback,
    ProgressTracker,
)
from trishield.kb.locking import fault_point
from trishield.kb.screening import Screener, ScreeningVerdict
from trishield.kb.store import disputes
from trishield.kb.store.ownership import (
    BatchPlan,
    displacement_reason,
    duplicate_audit_detail,
    owns,
    plan_batch,
    public_duplicates,
    set_aside_reason,
)

if TYPE_CHECKING:
    from trishield.kb.knowledge_base import KnowledgeBase

EMBED_SLICE = 256
"""Chunks embedded between two checks of a write's time limit."""


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


def check_tier(tier: str) -> str:
    """``tier`` as a :class:`Tier` value; an unknown one is refused."""
    try:
        return Tier(tier).value
    except ValueError:
        raise InputError(f"unknown tier {tier!r}; choose from "
                         f"{', '.join(t.value for t in Tier)}") from None

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


class Writes:
    """The write path of one KB handle (``KnowledgeBase.ingest``, ``release`` and
    ``release_many`` delegate here; their docstrings there say what each does)."""

    def __init__(self, kb: KnowledgeBase):
        self.kb = kb
        self.store = kb.store

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
        """Add documents (see :meth:`KnowledgeBase.ingest` for the whole contract)."""
        started = time.perf_counter()
        tier = check_tier(tier)
        for document in documents:
            if document.tier is not None:
                check_tier(document.tier)
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
        guard = guard if guard is not None else self.kb.screener
        with self.kb._lock.hold():
            claims = self.store.claims([d.id for d in documents],
                                       [d.content_hash for d in documents])
            _check_new_ids(documents, {claim.doc_id for claim in claims})
            try:
                plan = plan_batch(documents, claims, tier=tier, writer=writer,
                                  writer_key=writer_key, update=update)
            except TriShieldError as error:
                self.kb.audit_refused("ingest", writer, writer_key,
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
            chunks = [chunk_document(document, self.kb.settings.chunking) for document in plan.new]
            pacer = CommitPacer(commit_seconds, batch_size)
            counts = [len(per) for per in chunks]
            tracker = ProgressTracker(
                on_progress, len(plan.new), sum(counts), None if pacer.by_time else
                -(-len(plan.new) // (batch_size or max(len(plan.new), 1))))
            write = _BatchWrite(tier=tier, writer=writer, source=source, writer_key=writer_key,
                                guard=guard, progress=progress, started=started)
            self.kb.embedder  # noqa: B018 (loading the model is not embedding time)
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
        embeddings = self._embeddings_of(documents, chunks, write, tracker)
        report.embed_seconds += time.perf_counter() - embed_started
        analyses = self._analyse(texts)
        verdicts, neighbourhood = self.kb._screening.screen(
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
        fault_point("before-commit")
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
            fault_point("inside-commit")
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
        fault_point("after-commit")
        report.warnings.extend(self.kb._after_commit())
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
        if self.kb.analyser is None:
            return None
        analyses = list(self.kb.analyser.analyse(texts))
        if len(analyses) != len(texts) or not all(isinstance(a, str) for a in analyses):
            raise KnowledgeBaseError(f"the chunk analyser returned {len(analyses)} analyses "
                                     f"for {len(texts)} chunks (one string each needed); "
                                     "nothing was written")
        return analyses

    def _analyses_of(self, analyses: list[str] | None, rows: np.ndarray) -> dict:
        """``write_batch``'s analysis arguments for the chunks at ``rows``."""
        if analyses is None or self.kb.analyser is None:
            return {}
        return {"analyses": [analyses[row] for row in rows],
                "analysis_version": self.kb.analyser.version}

    def _embeddings_of(self, documents: list[Document], chunks: list[list[Chunk]],
                       write: _BatchWrite, tracker: ProgressTracker) -> np.ndarray:
        """One vector per chunk, in order: a chunk whose section and text the KB already
        holds (a stored document with the same content, whoever wrote it) or that the batch
        repeats takes that vector, and only the rest are embedded. The same text embeds to
        the same vector, and embedding is most of an ingest's time (MiniLM, about 8-16
        chunks a second on 2 cores): a mirror, a re-sent export or another writer's copy of
        a document cost as much as new text before."""
        flat = [chunk for per_document in chunks for chunk in per_document]
        known = self.store.embeddings_by_text([d.content_hash for d in documents],
                                              self.kb.dimension)
        keys = [(chunk.section, chunk.text) for chunk in flat]
        fresh: dict[tuple[str, str], int] = {}  # key -> its row in ``to_embed``
        to_embed: list[str] = []
        for chunk, key in zip(flat, keys, strict=True):
            if key not in known and key not in fresh:
                fresh[key] = len(to_embed)
                to_embed.append(embedding_text(chunk))
        embedded = self._embed(to_embed, progress=write.progress,
                               started=write.started,
                               on_slice=tracker.embedded if tracker.watched else None
                               ) if fresh else np.zeros((0, self.kb.dimension), np.float32)
        if tracker.watched and len(flat) > len(fresh):
            tracker.embedded(len(flat) - len(fresh), 0.0)
        vectors = np.zeros((len(flat), self.kb.dimension), dtype=np.float32)
        for row, key in enumerate(keys):
            vectors[row] = embedded[fresh[key]] if key in fresh else known[key]
        return vectors

    def _embed(self, texts: list[str], *, progress: bool, started: float,
               on_slice: Callable[[int, float], None] | None = None) -> np.ndarray:
        """Embed ``texts``, in slices when the write has a time limit, so that a batch too
        large for it stops with :class:`BusyError` (nothing written) instead of holding the
        writer for as long as it takes. ``on_slice`` is told how many chunks each encoder
        batch embedded and how long it took (a progress bar's rate and ETA)."""
        if self.kb.write_time_limit is None:
            return self.kb.embedder.encode(texts, progress=progress, on_batch=on_slice)
        parts = []
        for start in range(0, len(texts), EMBED_SLICE):
            if time.perf_counter() - started > self.kb.write_time_limit:
                raise BusyError(f"the write took longer than {self.kb.write_time_limit:g} s after "
                                f"embedding {start} of {len(texts)} chunks; nothing was "
                                "written: send smaller batches", retry_after=30)
            parts.append(self.kb.embedder.encode(texts[start:start + EMBED_SLICE],
                                                 progress=progress, on_batch=on_slice))
        return np.concatenate(parts) if parts else np.zeros((0, self.kb.dimension), np.float32)

    def release(self, doc_id: str, *, by: str, progress: bool = False) -> IngestReport:
        """Move one quarantined document into the KB (an admin decision, audited)."""
        return self.release_many([doc_id], by=by, progress=progress)

    def release_many(self, doc_ids: Sequence[str], *, by: str,
                     progress: bool = False) -> IngestReport:
        """Move held documents into the KB in one transaction, all or none."""
        check_name(by, "releaser")
        ids = distinct_ids(doc_ids)
        with self.kb._lock.hold():
            records = held_records(self.store, ids, "released")
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
            chunks = [chunk_document(d, self.kb.settings.chunking) for d in documents]
            texts = [c.text for per in chunks for c in per]
            embeddings = self.kb.embedder.encode([embedding_text(c) for per in chunks for c in per],
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
            report.warnings = self.kb._after_commit()
            report.generation = self.store.generation()
        return report
