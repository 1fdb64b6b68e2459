"""Shared helper of the ingest-screening tests: Ring 1 that keeps every verdict."""

from __future__ import annotations

from trishield.rings.ingest_guard import GuardVerdict, IngestGuard


class RecordingGuard:
    """Ring 1, keeping every verdict (an ingest report lists only the blocked ones)."""

    def __init__(self) -> None:
        self.guard = IngestGuard()
        self.verdicts: dict[str, GuardVerdict] = {}

    def screen(self, ids, texts, *, tiers, embeddings, neighbourhood):
        verdicts = self.guard.screen(ids, texts, tiers=tiers, embeddings=embeddings,
                                     neighbourhood=neighbourhood)
        self.verdicts.update((v.subject, v) for v in verdicts)
        return verdicts
