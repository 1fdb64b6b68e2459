"""What an ingest reports: its progress while it runs and its summary when it ends.

A long ingest commits in batches (:meth:`KnowledgeBase.ingest` with ``commit_seconds`` or
``batch_size``), so an interrupt keeps the finished batches: :class:`IngestInterrupted`
carries the summary of what was committed before it, and the caller can say exactly what a
re-run still has to do. :class:`CommitPacer` sizes batches by time: the first one small, so
that the first commit and a measured rate (the progress bar's ETA) come within seconds, the
next ones as large as the measured rate finishes within the time asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class IngestProgress:
    """Where a running ingest stands: what a progress bar draws.

    ``documents_total`` and ``chunks_total`` count only what this run has to write (the
    documents already stored identically were skipped before the first batch)."""

    documents_total: int
    documents_done: int
    chunks_total: int
    chunks_embedded: int
    batches_total: int | None
    """``None`` while batches are sized by time (their number is known at the end)."""
    batches_done: int
    embed_seconds: float
    elapsed_seconds: float = 0.0
    """Since the first document was embedded (the model's loading excluded)."""

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.embed_seconds if self.embed_seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far (embedding, screening and commits together);
        ``None`` until the first encoder batch is embedded."""
        if self.chunks_embedded == 0 or self.elapsed_seconds <= 0:
            return None
        rate = self.chunks_embedded / self.elapsed_seconds
        return max(0.0, (self.chunks_total - self.chunks_embedded) / rate)


ProgressCallback = Callable[[IngestProgress], None]
"""Called after every embedded slice and every committed batch."""


class ProgressTracker:
    """Counts a running ingest's progress and tells ``callback`` (if any) after each step."""

    def __init__(self, callback: ProgressCallback | None, documents: int, chunks: int,
                 batches: int | None):
        self.callback = callback
        self.state = IngestProgress(documents, 0, chunks, 0, batches, 0, 0.0)
        self._started: float | None = None
        self._tell()

    @property
    def watched(self) -> bool:
        return self.callback is not None

    def start(self) -> None:
        """The clock of :attr:`IngestProgress.elapsed_seconds` starts (model loaded)."""
        self._started = time.perf_counter()

    def _elapsed(self) -> float:
        return 0.0 if self._started is None else time.perf_counter() - self._started

    def embedded(self, chunks: int, seconds: float) -> None:
        self.state = replace(self.state, chunks_embedded=self.state.chunks_embedded + chunks,
                             embed_seconds=self.state.embed_seconds + seconds,
                             elapsed_seconds=self._elapsed())
        self._tell()

    def committed(self, documents: int, *, last: bool = False) -> None:
        done = self.state.batches_done + 1
        self.state = replace(self.state, documents_done=self.state.documents_done + documents,
                             batches_done=done, elapsed_seconds=self._elapsed(),
                             batches_total=done if last else self.state.batches_total)
        self._tell()

    def _tell(self) -> None:
        if self.callback is not None:
            self.callback(self.state)


@dataclass
class IngestReport:
    """What one ingest did: every input document is added, updated (a new version of the
    writer's own document), quarantined, or a named duplicate (``state``: ``stored`` for one
    already present, ``quarantined`` for one already held)."""

    batch_id: int | None
    added: list[str]
    duplicates: list[dict[str, str]]
    chunks_added: int
    generation: int
    seconds: float
    embed_seconds: float
    quarantined: list[dict] = field(default_factory=list)
    screened: int = 0
    displaced: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    updated: list[dict[str, object]] = field(default_factory=list)
    """``{"id", "version"}`` of each document stored as a new version (also in ``added``)."""
    withdrawn: list[str] = field(default_factory=list)
    """Ids whose held (quarantined) text a new version replaced."""
    batch_ids: list[int] = field(default_factory=list)
    documents_total: int = 0
    """Documents this run had to write (added + quarantined when it completes)."""

    @property
    def already_present(self) -> int:
        return sum(1 for d in self.duplicates if d["state"] == "stored")

    @property
    def already_quarantined(self) -> int:
        return sum(1 for d in self.duplicates if d["state"] == "quarantined")

    @property
    def remaining(self) -> int:
        """Documents an interrupted run did not get to (a re-run writes them)."""
        return self.documents_total - len(self.added) - len(self.quarantined)

    def as_dict(self) -> dict[str, object]:
        return {
            "batch_id": self.batch_id,
            "batch_ids": self.batch_ids,
            "documents_added": len(self.added),
            "documents_updated": len(self.updated),
            "documents_duplicate": len(self.duplicates),
            "documents_already_present": self.already_present,
            "documents_already_quarantined": self.already_quarantined,
            "documents_remaining": self.remaining,
            "chunks_added": self.chunks_added,
            "generation": self.generation,
            "seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "added": self.added,
            "updated": self.updated,
            "withdrawn": self.withdrawn,
            "duplicates": self.duplicates,
            "documents_quarantined": len(self.quarantined),
            "quarantined": self.quarantined,
            "screened_by_ring1": self.screened,
            "displaced": self.displaced,
            "warnings": self.warnings,
        }


class CommitPacer:
    """Where the next committed batch of an ingest ends.

    With ``seconds``, a batch takes as many documents as the rate measured on the batches
    before it (chunks per second of embedding, screening and committing together) finishes
    in ``SAFETY`` x ``seconds``, the first one at most :data:`FIRST_CHUNKS` chunks; so an
    interrupt loses at most the running batch, about ``seconds`` of work. ``max_documents``
    caps every batch; with neither, the input is one batch (an all-or-nothing write).
    A document is never split: one larger than a batch is a batch of its own.
    """

    FIRST_CHUNKS = 32
    """One encoder batch: enough to measure a rate, committed within seconds on a CPU."""
    SAFETY = 0.7
    """Batches aim below the time asked: the rate moves when other processes load the CPU."""

    def __init__(self, seconds: float | None = None, max_documents: int | None = None):
        if seconds is not None and (isinstance(seconds, bool)
                                    or not isinstance(seconds, int | float) or seconds <= 0):
            raise ValueError(f"commit seconds must be a positive number, got {seconds!r}")
        self.seconds = seconds
        self.max_documents = max_documents
        self._chunks = 0
        self._spent = 0.0

    @property
    def by_time(self) -> bool:
        return self.seconds is not None

    def record(self, chunks: int, seconds: float) -> None:
        """A batch of ``chunks`` chunks was embedded, screened and committed in ``seconds``."""
        self._chunks += chunks
        self._spent += max(seconds, 0.0)

    def budget(self) -> float:
        """Chunks the next batch may hold (infinite without ``seconds``)."""
        if self.seconds is None:
            return float("inf")
        if self._chunks == 0 or self._spent <= 0:
            return float(self.FIRST_CHUNKS)
        return self._chunks / self._spent * self.seconds * self.SAFETY

    def next_end(self, chunk_counts: Sequence[int], start: int) -> int:
        """The end (exclusive) of the batch that starts at document ``start``."""
        limit = len(chunk_counts)
        if self.max_documents is not None:
            limit = min(limit, start + self.max_documents)
        budget, end, taken = self.budget(), start, 0
        while end < limit and (end == start or taken + chunk_counts[end] <= budget):
            taken += chunk_counts[end]
            end += 1
        return end


class IngestInterrupted(KeyboardInterrupt):
    """An interrupt (Ctrl-C) during a batched ingest: ``report`` is what the committed
    batches wrote; the batch that was running was rolled back. A ``KeyboardInterrupt``, so
    code that does not care still stops as it would."""

    def __init__(self, report: IngestReport):
        super().__init__(f"interrupted after {len(report.batch_ids)} committed batch(es)")
        self.report = report
