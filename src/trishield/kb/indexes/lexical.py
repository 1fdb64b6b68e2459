"""The lexical (BM25) index: queries over the store's FTS5 table (:mod:`trishield.kb.store.fts`).

The table is written by SQLite's triggers in the store's own transactions, so this side only
reads: it is always current, and a reader in another process sees a commit as soon as SQLite
does. Ranking is FTS5's ``bm25()``, an OR over the query's terms (see the table's module for
the terms and the analyzer).
"""

from __future__ import annotations

import sqlite3

from trishield.kb.store.fts import TABLE, VOCABULARY, lexical_terms, match_expression
from trishield.text import index_terms


class LexicalIndex:
    """BM25 over the FTS5 table of one connection, keyed by chunk row id.

    Always current: it reads the table, so it reflects every committed write (in a read
    transaction, the transaction's snapshot). Used by one thread at a time, like its store.
    """

    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection

    def __len__(self) -> int:
        return int(self.connection.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0])

    def search(self, query: str, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` best ``(chunk pk, bm25)``, best first, ties by row id."""
        terms = list(dict.fromkeys(lexical_terms(query)))
        if not terms or depth < 1:
            return []
        rows = self.connection.execute(
            f"SELECT rowid, -bm25({TABLE}) FROM {TABLE} WHERE {TABLE} MATCH ? "
            f"ORDER BY bm25({TABLE}), rowid LIMIT ?", (match_expression(terms), depth))
        return [(int(pk), float(score)) for pk, score in rows]

    def unknown_terms(self, text: str) -> list[str]:
        """The text's index terms that occur in no indexed chunk, in order, once each."""
        terms = list(dict.fromkeys(index_terms(text)))
        if not terms:
            return []
        marks = ",".join("?" * len(terms))
        known = {term for (term,) in self.connection.execute(
            f"SELECT term FROM {VOCABULARY} WHERE term IN ({marks}) AND doc > 0", terms)}
        return [term for term in terms if term not in known]
