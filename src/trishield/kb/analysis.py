"""What the knowledge base asks of a chunk analyser, and how it hands the analysis back.

Rings 1 and 2's per-passage work that does not depend on the question (Ring 1's signals and
tokens, Ring 2's reading of sentences, candidate answers and numeric claims) is computed once,
when a chunk is written, and stored beside it (table ``chunk_analysis``, migration
``0008_chunk_analysis``): a retrieved chunk comes back with its analysis instead of being
analysed again for every question. As with :mod:`trishield.kb.screening`, the KB defines the
contract and the ring implements it (``trishield.rings.analysis.PassageAnalyser``): kb/ never
imports rings/, and the analysis is opaque text to the KB.

The version is the analyser's word on what produced a stored analysis. The KB stores it with
each row and returns it; the reader compares it with its own and never trusts another
version. ``trishield compact`` (:meth:`KnowledgeBase.backfill_analyses`) rewrites the rows
that are missing or of another version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS chunk_analysis (
        chunk_pk INTEGER PRIMARY KEY,
        version TEXT NOT NULL,
        data TEXT NOT NULL
    )""",
    # the analysis lives and dies with its chunk, whichever path deletes or rewrites it
    # (delete, update, displacement, a future maintenance step), in the same transaction
    """CREATE TRIGGER IF NOT EXISTS chunk_analysis_deleted AFTER DELETE ON chunks BEGIN
        DELETE FROM chunk_analysis WHERE chunk_pk = old.pk;
    END""",
    """CREATE TRIGGER IF NOT EXISTS chunk_analysis_rewritten AFTER UPDATE OF text ON chunks
        BEGIN
        DELETE FROM chunk_analysis WHERE chunk_pk = old.pk;
    END""",
)


def install(connection) -> None:
    """The migration step: the table and its triggers (existing chunks have no analysis
    until the backfill)."""
    for statement in SCHEMA:
        connection.execute(statement)


@dataclass(frozen=True)
class StoredAnalysis:
    """A chunk's stored analysis: the analyser version that wrote it and its data."""

    version: str
    data: str


@runtime_checkable
class ChunkAnalyser(Protocol):
    """Computes what a reader of the chunks needs whatever the question, once per chunk."""

    @property
    def version(self) -> str:
        """Names the analysis code: a stored analysis of another version is stale."""
        ...

    def analyse(self, texts: Sequence[str]) -> list[str]:
        """One analysis per chunk text, in order, as text to store."""
        ...
