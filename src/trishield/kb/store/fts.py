"""The table the lexical (BM25) index reads: an SQLite FTS5 table kept by SQLite itself.

The table, its triggers and its analyzer live here, with the store, because they are
written in the store's transactions; :class:`~trishield.kb.indexes.lexical.LexicalIndex` reads
the table.

Why FTS5 rather than a separate BM25 file: the index lives in ``kb.sqlite`` and triggers on
``chunks`` maintain it inside the very transaction that writes or deletes the chunks. An
ingest therefore costs the new rows only (no rebuild of the whole index, no separate files to
keep in step), a crash can never leave the lexical index behind the database, and a reader in
another process sees a commit as soon as SQLite does.

The table indexes the *analyzed* text (:func:`trishield.text.index_terms`: lower-cased content
words, English stop words removed, Snowball stems), not the raw text, so matching is exactly
what the KB always matched on ("bicycles" finds "bicycle") and :meth:`unknown_terms` speaks
the same terms. SQLite computes those terms through a Python function that every
:class:`~trishield.kb.store.Store` connection registers (:func:`register_analyzer`); a
connection without it cannot insert or delete chunks ("no such function"), and nothing is
written. The table is *contentless* (the text is in ``chunks`` already); a contentless row is
deleted by giving FTS5 the same terms again, which the delete trigger recomputes from the
chunk's text: the analyzer recorded in ``meta.lexical_analyzer`` must therefore be the one
in use, and :func:`reindex` rebuilds the table when it is not.

Documentation is asked about by its identifiers and options, which words alone cannot tell
apart: ``XML_ParserCreate`` is the words "xml" and "parsercreate", and ``-p`` no word at all.
So :func:`lexical_terms` adds, to the words, one exact term per identifier (``XML_ParserCreate``
-> ``xmlparsercreate``; ``POSITION_INDEPENDENT_CODE`` -> ``positionindependentcod``... the
whole name joined, never stemmed) and per command-line option (``-p`` and ``-P`` differ:
the option's own characters, hex-encoded, so that FTS5's case folding cannot merge them), plus
the words of a camel-case name ("Parser", "Create"). A query names an identifier or option
the same way, and only chunks holding exactly it share the term.

Ranking is FTS5's ``bm25()`` (k1 = 1.2, b = 0.75, idf ``log((N - n + 0.5) / (n + 0.5))``
floored just above zero), an OR over the query's terms.
"""

from __future__ import annotations

import re
import sqlite3

from trishield.text import STOPWORDS, index_terms, stem

ANALYZER = "words-lower/stopwords-en-plus/snowball-english/identifiers-options/v2"
"""Names how :func:`index_terms` turns text into index terms; a table built otherwise is
rebuilt (:func:`reindex`)."""
ANALYZER_FUNCTION = "trishield_index_terms"
TABLE = "chunks_fts"
VOCABULARY = "chunks_fts_vocab"
_TOKENIZER = "unicode61 remove_diacritics 0 tokenchars '''\u2019'"
"""Split only on spaces: the analyzer already cut the words (apostrophes stay inside them,
diacritics and case are the analyzer's business)."""

SCHEMA: tuple[str, ...] = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(terms, content='', "
    f"tokenize=\"{_TOKENIZER}\")",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCABULARY} USING fts5vocab({TABLE}, row)",
    f"""CREATE TRIGGER IF NOT EXISTS chunks_fts_insert AFTER INSERT ON chunks BEGIN
        INSERT INTO {TABLE}(rowid, terms) VALUES (new.pk, {ANALYZER_FUNCTION}(new.text));
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS chunks_fts_delete AFTER DELETE ON chunks BEGIN
        INSERT INTO {TABLE}({TABLE}, rowid, terms)
            VALUES ('delete', old.pk, {ANALYZER_FUNCTION}(old.text));
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN
        INSERT INTO {TABLE}({TABLE}, rowid, terms)
            VALUES ('delete', old.pk, {ANALYZER_FUNCTION}(old.text));
        INSERT INTO {TABLE}(rowid, terms) VALUES (new.pk, {ANALYZER_FUNCTION}(new.text));
    END""",
)


SECTION_TRIGGERS: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS chunks_fts_insert",
    "DROP TRIGGER IF EXISTS chunks_fts_delete",
    "DROP TRIGGER IF EXISTS chunks_fts_update",
    f"""CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
        INSERT INTO {TABLE}(rowid, terms)
            VALUES (new.pk, {ANALYZER_FUNCTION}(new.section || ' ' || new.text));
    END""",
    f"""CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
        INSERT INTO {TABLE}({TABLE}, rowid, terms)
            VALUES ('delete', old.pk, {ANALYZER_FUNCTION}(old.section || ' ' || old.text));
    END""",
    f"""CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text, section ON chunks BEGIN
        INSERT INTO {TABLE}({TABLE}, rowid, terms)
            VALUES ('delete', old.pk, {ANALYZER_FUNCTION}(old.section || ' ' || old.text));
        INSERT INTO {TABLE}(rowid, terms)
            VALUES (new.pk, {ANALYZER_FUNCTION}(new.section || ' ' || new.text));
    END""",
)
"""Migration 0011: a chunk's section (its document's title and heading, ``sections``
chunking) is indexed with its text. Every older chunk's section is "", whose terms are none,
so the table needs no rebuild."""


def install_sections(connection: sqlite3.Connection) -> None:
    """Index chunks' sections with their text (inside the caller's transaction)."""
    register_analyzer(connection)
    for statement in SECTION_TRIGGERS:
        connection.execute(statement)


def _indexed_text(connection: sqlite3.Connection) -> str:
    """The SQL of what is indexed per chunk: its section and text where the KB stores
    sections (migration 0011), its text before."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(chunks)")}
    return "section || ' ' || text" if "section" in columns else "text"


_IDENTIFIER = re.compile(
    r"(?<![\w-])(?:[A-Za-z][A-Za-z0-9]+(?:(?:_|::|\.)[A-Za-z0-9]+)+"  # snake, dotted, C++
    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)(?![\w-])")  # camelCase
_OPTION = re.compile(r"(?:(?<=^)|(?<=[\s\[(,|\"'`]))(--?[A-Za-z0-9][A-Za-z0-9_-]*)")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_NOT_ALNUM = re.compile(r"[\W_]+")
_CAMEL = re.compile(r"[a-z0-9][A-Z]")


def identifier_terms(text: str) -> list[str]:
    """One exact term per identifier and option in ``text`` (see the module docstring), and
    the stemmed words of each camel-case name."""
    terms: list[str] = []
    for match in _IDENTIFIER.finditer(text):
        name = match.group()
        terms.append("id" + _NOT_ALNUM.sub("", name).lower())
        if _CAMEL.search(name):  # snake_case's words are index terms already
            terms.extend(stem(part.lower()) for part in _CAMEL_PART.findall(name)
                         if len(part) > 1 and not part.isdigit()
                         and part.lower() not in STOPWORDS)
    for match in _OPTION.finditer(text):
        terms.append("opt" + match.group(1).encode("utf-8").hex())
    return terms


def lexical_terms(text: str) -> list[str]:
    """What the lexical index matches on: :func:`index_terms` and :func:`identifier_terms`."""
    return index_terms(text) + identifier_terms(text)


def analyzed(text: str | None) -> str:
    """The text as the FTS5 table stores it: its lexical terms, space-separated."""
    return " ".join(lexical_terms(text or ""))


def register_analyzer(connection: sqlite3.Connection) -> None:
    """Let SQL (the triggers above) call the analyzer on this connection."""
    connection.create_function(ANALYZER_FUNCTION, 1, analyzed, deterministic=True)


def install(connection: sqlite3.Connection) -> None:
    """Create the table, its vocabulary view and triggers, and index every stored chunk
    (inside the caller's transaction: a migration step)."""
    register_analyzer(connection)
    for statement in SCHEMA:
        connection.execute(statement)
    reindex(connection)


def reindex(connection: sqlite3.Connection) -> None:
    """Rebuild the table from ``chunks`` with the current analyzer and record it (inside the
    caller's transaction)."""
    register_analyzer(connection)
    connection.execute(f"INSERT INTO {TABLE}({TABLE}) VALUES ('delete-all')")
    connection.execute(f"INSERT INTO {TABLE}(rowid, terms) "
                       f"SELECT pk, {ANALYZER_FUNCTION}({_indexed_text(connection)}) "
                       "FROM chunks ORDER BY pk")
    connection.execute("INSERT INTO meta(key, value) VALUES ('lexical_analyzer', ?) "
                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (ANALYZER,))


def match_expression(terms: list[str]) -> str:
    """An FTS5 query that ORs ``terms`` (each quoted: a term is never read as syntax)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
