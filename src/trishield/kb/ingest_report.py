"""What an ingest reports: its progress while it runs and its summary when it ends.

A long ingest commits in batches (:meth:`KnowledgeBase.ingest` with ``batch_size``), so an
interrupt keeps the finished batches: :class:`IngestInterrupted` carries the summary of what
was committed before it, and the caller can say exactly what a re-run still has to do.
"""

from __future__ import annotations

from collections.abc import Callable
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
    batches_total: int
    batches_done: int
    embed_seconds: float

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.embed_seconds if self.embed_seconds > 0 else 0.0


ProgressCallback = Callable[[IngestProgress], None]
"""Called after every embedded slice and every committed batch."""


class ProgressTracker:
    """Counts a running ingest's progress and tells ``callback`` (if any) after each step."""

    def __init__(self, callback: ProgressCallback | None, documents: int, chunks: int,
                 batches: int):
        self.callback = callback
        self.state = IngestProgress(documents, 0, chunks, 0, batches, 0, 0.0)
        self._tell()

    @property
    def watched(self) -> bool:
        return self.callback is not None

    def embedded(self, chunks: int, seconds: float) -> None:
        self.state = replace(self.state, chunks_embedded=self.state.chunks_embedded + chunks,
                             embed_seconds=self.state.embed_seconds + seconds)
        self._tell()

    def committed(self, documents: int) -> None:
        self.state = replace(self.state, documents_done=self.state.documents_done + documents,
                             batches_done=self.state.batches_done + 1)
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


class IngestInterrupted(KeyboardInterrupt):
    """An interrupt (Ctrl-C) during a batched ingest: ``report`` is what the committed
    batches wrote; the batch that was running was rolled back. A ``KeyboardInterrupt``, so
    code that does not care still stops as it would."""

    def __init__(self, report: IngestReport):
        super().__init__(f"interrupted after {len(report.batch_ids)} committed batch(es)")
        self.report = report
