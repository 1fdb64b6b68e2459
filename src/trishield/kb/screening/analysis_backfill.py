"""The backfill of chunk analyses (:mod:`trishield.kb.analysis`) for chunks stored without
one: KBs built before migration ``0008_chunk_analysis``, chunks written by a KB opened
without an analyser, and rows of an analyser version that is no longer current.

It runs under the KB's write lock (``trishield compact``), a page of chunks at a time: each
page is analysed, then written in its own transaction, so an interrupted backfill leaves
every row either current or as it was, and a rerun continues where it stopped. A row is
written only while its chunk still holds the text that was analysed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from trishield.kb.analysis import ChunkAnalyser
from trishield.kb.store import Store

PAGE = 1000
"""Chunks analysed and committed together (a few seconds of work on a CPU)."""


@dataclass(frozen=True)
class BackfillReport:
    version: str
    analysed: int
    """Chunks whose analysis was missing or stale and is now current."""
    current: int
    """Chunks with a current analysis after the backfill (all of them, unless a page failed)."""
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {"version": self.version, "analysed": self.analysed, "current": self.current,
                "seconds": round(self.seconds, 3)}


def backfill(store: Store, analyser: ChunkAnalyser, *,
             say: Callable[[str], None] | None = None, page: int = PAGE) -> BackfillReport:
    """Analyse every chunk of ``store`` whose stored analysis is missing or not of
    ``analyser.version``; ``say`` is told the progress after each page. The caller holds the
    KB's write lock."""
    if page < 1:
        raise ValueError(f"page must be at least 1 chunk, got {page}")
    started = time.perf_counter()
    version = analyser.version
    counts = store.analysis_counts(version)
    todo = counts["missing"] + counts["stale"]
    if todo and say is not None:
        say(f"analysing {todo} chunks for Ring 1 ({counts['missing']} missing, "
            f"{counts['stale']} of another analyser version)")
    done, after = 0, 0
    while True:
        rows = store.unanalysed_chunks(version, after=after, limit=page)
        if not rows:
            break
        analyses = analyser.analyse([text for _, text in rows])
        if len(analyses) != len(rows):
            raise ValueError(f"the analyser returned {len(analyses)} analyses for "
                             f"{len(rows)} chunks")
        with store.transaction() as connection:
            done += store.write_analyses(
                connection, [(pk, text, data) for (pk, text), data
                             in zip(rows, analyses, strict=True)], version)
        after = rows[-1][0]
        if say is not None:
            say(f"  {done} of {todo} chunks analysed ({time.perf_counter() - started:.1f} s)")
    return BackfillReport(version, done, store.analysis_counts(version)["current"],
                          time.perf_counter() - started)
