"""The disputes queue: conflicts between writers that the evidence met, kept for a person.

When Rings 2-3 weigh two claims from different writers (a question's answer decided for one
side, or refused as a conflict), or Ring 1 finds at ingest that a new document copies another
writer's stored text with a fact changed, the conflict is *recorded* here: the question (or,
at ingest, what was copied), each side's claim and sources (writers, tier, documents and
chunks, time stood, weight) and the decision with its reason. An operator then settles it
(:mod:`trishield.kb.store.dispute_resolution`): quarantines a side, trusts the true source, or
dismisses it. A refusal becomes work a person can finish.

Why here, below the rings: the KB stores what the rings hand it as plain data (this module
never imports them), in its own table, so the record survives the process and is read by the
CLI, the service and the viewer alike.

**Deduplication.** One row per *conflict*, not per question asked: the key is the origin, the
question (case and spacing folded) and the set of documents on each side, so asking the same
question again, or a claim worded differently by a reader, updates the same row (its
``occurrences`` and ``last_seen``) instead of flooding the queue. A new writer joining a side
is a new conflict. A row that a person closed stays closed when the conflict recurs (it is
counted, not reopened): a dismissed dispute is settled, and a resolved one recurs only as
the decision it was resolved into (the trusted side now stands).

**Cost.** Recording is one upsert in its own short transaction that waits at most
:data:`RECORD_BUSY_TIMEOUT_S` for the SQLite lock; it never moves the KB's generation, so no
index or cache reloads. It never fails an answer: a read-only KB, a lock held too long or a
full disk are reported in the returned :class:`Recorded` (the trace shows it) and logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Literal

from trishield.errors import InputError, NotFoundError, TriShieldError

log = logging.getLogger("trishield.disputes")

Origin = Literal["question", "ingest"]
ORIGINS: tuple[str, ...] = ("question", "ingest")
STATES: tuple[str, ...] = ("open", "resolved", "dismissed")
RECORD_BUSY_TIMEOUT_S = 0.5
"""Longest a recording waits for another writer's SQLite lock (an ingest commits in one
transaction, usually milliseconds): the answer must not wait on the queue."""
MAX_QUESTION_CHARS = 2000
MAX_CLAIM_CHARS = 500

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS disputes (
        id INTEGER PRIMARY KEY,
        dedupe_key TEXT NOT NULL UNIQUE,
        origin TEXT NOT NULL CHECK (origin IN ('question', 'ingest')),
        question TEXT NOT NULL,
        outcome TEXT NOT NULL,
        decision TEXT NOT NULL,
        reason TEXT NOT NULL,
        sides TEXT NOT NULL,
        writers TEXT NOT NULL,
        documents TEXT NOT NULL,
        first_seen REAL NOT NULL,
        last_seen REAL NOT NULL,
        occurrences INTEGER NOT NULL DEFAULT 1,
        state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'resolved', 'dismissed')),
        closed_at REAL,
        closed_by TEXT,
        resolution TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX IF NOT EXISTS disputes_by_state ON disputes(state, last_seen)",
)


def install(connection: sqlite3.Connection) -> None:
    """The migration step (``0012_disputes``)."""
    for statement in SCHEMA:
        connection.execute(statement)


@dataclass(frozen=True)
class DisputePassage:
    """One passage a source stated its claim in: its chunk (``doc#n``; at ingest, the new
    document's id) and document, who wrote it, at which tier, and when it entered the KB."""

    id: str
    doc_id: str
    writer: str
    tier: str
    ingested_at: float | None = None


@dataclass(frozen=True)
class DisputeSource:
    """One independent source of a side, as the evidence weighed it (``weight`` and
    ``record`` are None at ingest, where nothing was weighed)."""

    writers: tuple[str, ...]
    tier: str
    passages: tuple[DisputePassage, ...]
    weight: float | None = None
    record: float | None = None
    established: bool = False
    stood_s: float | None = None


@dataclass(frozen=True)
class DisputeSide:
    """One claim and the sources that make it."""

    claim: str
    sources: tuple[DisputeSource, ...]
    top_tier: str | None = None
    weight: float | None = None

    @property
    def documents(self) -> list[str]:
        return sorted({p.doc_id for s in self.sources for p in s.passages})


@dataclass(frozen=True)
class Dispute:
    """A conflict between writers, as recorded: ``outcome`` is the weighing's (``stands``,
    ``conflict``, ``silenced``) or, at ingest, Ring 1's (``blocked``, ``flagged``);
    ``decision`` the claim given ('' when refused or held back)."""

    origin: Origin
    question: str
    outcome: str
    reason: str
    sides: tuple[DisputeSide, ...]
    decision: str = ""

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise InputError(f"a dispute's origin is one of {', '.join(ORIGINS)}, not "
                             f"{self.origin!r}")
        if len(self.sides) < 2:
            raise InputError("a dispute needs two sides")
        if len(self.writers) < 2:
            raise InputError("a dispute is between writers: these sides have one "
                             f"({', '.join(self.writers) or 'none'})")

    @property
    def writers(self) -> list[str]:
        return sorted({w for side in self.sides for s in side.sources for w in s.writers})

    @property
    def documents(self) -> list[str]:
        return sorted({d for side in self.sides for d in side.documents})

    def key(self) -> str:
        """What makes two recordings one dispute: origin, question (case and spacing folded)
        and the documents of each side, neither the claims' wording nor the weights."""
        question = re.sub(r"\s+", " ", self.question.casefold()).strip().rstrip("?").strip()
        sides = sorted(side.documents for side in self.sides)
        return hashlib.sha256(json.dumps([self.origin, question, sides]).encode()).hexdigest()

    def sides_json(self) -> str:
        return json.dumps([_side_dict(side) for side in self.sides], sort_keys=True)


def _side_dict(side: DisputeSide) -> dict[str, object]:
    found = asdict(side)
    found["claim"] = side.claim[:MAX_CLAIM_CHARS]
    return found


@dataclass(frozen=True)
class Recorded:
    """What became of one recording: the dispute's id and how often it was met, or why it
    was not recorded (the answer goes on either way)."""

    recorded: bool
    id: int | None = None
    occurrences: int | None = None
    state: str | None = None
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"recorded": self.recorded, "id": self.id, "occurrences": self.occurrences,
                "state": self.state, "note": self.note}


_READ_ONLY_LOGGED: set = set()

_UPSERT = """INSERT INTO disputes (dedupe_key, origin, question, outcome, decision, reason,
    sides, writers, documents, first_seen, last_seen)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(dedupe_key) DO UPDATE SET
        occurrences = occurrences + 1,
        last_seen = excluded.last_seen,
        outcome = CASE WHEN state = 'open' THEN excluded.outcome ELSE outcome END,
        decision = CASE WHEN state = 'open' THEN excluded.decision ELSE decision END,
        reason = CASE WHEN state = 'open' THEN excluded.reason ELSE reason END,
        sides = CASE WHEN state = 'open' THEN excluded.sides ELSE sides END
    RETURNING id, occurrences, state"""


def upsert(connection: sqlite3.Connection, dispute: Dispute, now: float) -> Recorded:
    """Record ``dispute`` inside ``connection``'s open transaction (an ingest's, or
    :func:`record`'s own)."""
    row = connection.execute(_UPSERT, (
        dispute.key(), dispute.origin, dispute.question[:MAX_QUESTION_CHARS], dispute.outcome,
        dispute.decision[:MAX_CLAIM_CHARS], dispute.reason, dispute.sides_json(),
        json.dumps(dispute.writers), json.dumps(dispute.documents), now, now)).fetchone()
    return Recorded(True, row[0], row[1], row[2])


@contextmanager
def _cheap(connection: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """One transaction of ``connection`` with its busy timeout lowered to ``seconds`` and
    ``synchronous=NORMAL``: in WAL mode its commit is not flushed to disk at once (the KB's
    next full commit flushes it), which took a recording from 4 ms to a fraction of one
    (``benchmarks/dispute_recording.py``). A power cut may lose the last few recordings,
    never the KB's consistency, and a dispute is met again when its question is asked
    again; the KB's own writes keep ``synchronous=FULL``."""
    wait = connection.execute("PRAGMA busy_timeout").fetchone()[0]
    synchronous = connection.execute("PRAGMA synchronous").fetchone()[0]
    connection.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    connection.execute("PRAGMA synchronous = NORMAL")
    try:
        yield
    finally:
        connection.execute(f"PRAGMA synchronous = {int(synchronous)}")
        connection.execute(f"PRAGMA busy_timeout = {int(wait)}")


def record(store, dispute: Dispute) -> Recorded:
    """Record ``dispute`` in ``store`` (a :class:`~trishield.kb.store.Store`) in a short
    transaction of its own; never raises for the KB's state (read-only, busy, full), it says
    so instead, so that a question is answered whatever becomes of its record."""
    if store.read_only:
        if store.path not in _READ_ONLY_LOGGED:  # once per KB: every question would say it
            _READ_ONLY_LOGGED.add(store.path)
            log.warning("%s is read-only: conflicts between writers are not recorded as "
                        "disputes (each answer's trace says so)", store.path)
        return Recorded(False, note="not recorded: the knowledge base is served read-only")
    try:
        with _cheap(store.connection, RECORD_BUSY_TIMEOUT_S), \
                store.transaction() as connection:
            return upsert(connection, dispute, store.clock())
    except (TriShieldError, sqlite3.Error) as error:
        log.warning("a dispute between %s was not recorded: %s", ", ".join(dispute.writers),
                    error)
        return Recorded(False, note=f"not recorded: {error}")


_COLUMNS = ("id", "origin", "question", "outcome", "decision", "reason", "sides", "writers",
            "documents", "first_seen", "last_seen", "occurrences", "state", "closed_at",
            "closed_by", "resolution")


def _row(row: Sequence) -> dict[str, object]:
    found = dict(zip(_COLUMNS, row, strict=True))
    for name in ("sides", "writers", "documents", "resolution"):
        found[name] = json.loads(found[name])
    return found


def check_state(state: str | None) -> str | None:
    if state is not None and state not in (*STATES, "all"):
        raise InputError(f"unknown dispute state {state!r}; choose from "
                         f"{', '.join((*STATES, 'all'))}")
    return None if state == "all" else state


def listing(connection: sqlite3.Connection, *, state: str | None = "open",
            limit: int = 100) -> list[dict[str, object]]:
    """Disputes, most recently met first; ``state`` one of :data:`STATES` (None or ``all``:
    every one), at most ``limit``."""
    state = check_state(state)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InputError(f"limit must be between 1 and 10000, got {limit!r}")
    rows = connection.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM disputes WHERE (? IS NULL OR state = ?) "
        "ORDER BY last_seen DESC, id DESC LIMIT ?", (state, state, limit))
    return [_row(row) for row in rows]


def get(connection: sqlite3.Connection, dispute_id: int) -> dict[str, object]:
    """One dispute in full; :class:`NotFoundError` when there is none."""
    check_id(dispute_id)
    row = connection.execute(f"SELECT {', '.join(_COLUMNS)} FROM disputes WHERE id = ?",
                             (dispute_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no dispute {dispute_id}")
    return _row(row)


def check_id(dispute_id: object) -> int:
    if isinstance(dispute_id, bool) or not isinstance(dispute_id, int) or dispute_id < 1:
        raise InputError(f"a dispute id is a positive number, got {dispute_id!r}")
    return dispute_id


def counts(connection: sqlite3.Connection) -> dict[str, int]:
    """Disputes by state (every state present, 0 when none)."""
    found = dict.fromkeys(STATES, 0)
    found.update(connection.execute("SELECT state, COUNT(*) FROM disputes GROUP BY state"))
    return found


def close(connection: sqlite3.Connection, dispute_id: int, *, state: str, by: str,
          resolution: dict[str, object], now: float,
          audit: Callable[..., None]) -> None:
    """Close an open dispute inside ``connection``'s transaction, audited (``audit`` is the
    store's: one entry, action ``dispute``, with who, when and what)."""
    if state not in ("resolved", "dismissed"):
        raise InputError(f"a dispute is closed as resolved or dismissed, not {state!r}")
    changed = connection.execute(
        "UPDATE disputes SET state = ?, closed_at = ?, closed_by = ?, resolution = ? "
        "WHERE id = ? AND state = 'open'",
        (state, now, by, json.dumps(resolution, sort_keys=True), dispute_id)).rowcount
    if not changed:
        raise _not_open(connection, dispute_id)
    audit(connection, action="dispute", writer=by, doc_id=None, content_hash=None,
          detail={"dispute": dispute_id, "state": state} | resolution)


def _not_open(connection: sqlite3.Connection, dispute_id: int) -> TriShieldError:
    from trishield.errors import ConflictError

    row = connection.execute("SELECT state, closed_by FROM disputes WHERE id = ?",
                             (dispute_id,)).fetchone()
    if row is None:
        return NotFoundError(f"no dispute {dispute_id}")
    return ConflictError(f"dispute {dispute_id} is already {row[0]} (by {row[1]})")


@dataclass
class Resolution:
    """What a resolution did, as its audit entry and its answer say."""

    dispute: int
    action: str
    side: int | None
    by: str
    note: str = ""
    documents: list[str] = field(default_factory=list)
    """The documents the action changed (quarantined, or raised to trusted)."""
    skipped: list[dict[str, str]] = field(default_factory=list)
    """The side's documents it left as they were, each with why (no longer stored...)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def record_contradiction(connection: sqlite3.Connection, contradiction, *, doc_id: str,
                         writer: str, tier: str, blocked: bool, now: float) -> Recorded | None:
    """At ingest, inside the ingest's transaction: record that the new document ``doc_id``
    (by ``writer``, at ``tier``) copies another writer's stored document with facts changed
    (``contradiction``, a :class:`~trishield.kb.screening.Contradiction`); ``blocked``:
    Ring 1 held it in quarantine. None when there is nothing to record (the same writer)."""
    original = contradiction.original
    if original.writer == writer:
        return None
    row = connection.execute("SELECT ingested_at FROM documents WHERE doc_id = ?",
                             (original.doc_id,)).fetchone()
    stored_at = None if row is None else float(row[0])
    stood = None if stored_at is None else max(0.0, now - stored_at)
    before = "; ".join(old or "(nothing)" for old, _ in contradiction.changes)
    after = "; ".join(new or "(nothing)" for _, new in contradiction.changes)
    changed = "; ".join(f"{old!r} -> {new!r}" for old, new in contradiction.changes)
    kept = ("Ring 1 held it in quarantine" if blocked else
            "Ring 1 flagged it and stored it: both stand in the knowledge base")
    dispute = Dispute(
        origin="ingest", question="", outcome="blocked" if blocked else "flagged",
        reason=(f"{doc_id} by {writer} copies {original.doc_id} by {original.writer} "
                f"({contradiction.copied:.0%} unchanged) with facts changed: {changed}; "
                f"{kept}"),
        decision=before if blocked else "",
        sides=(DisputeSide(before, (DisputeSource(
                   (original.writer,), original.tier,
                   (DisputePassage(original.chunk_id, original.doc_id, original.writer,
                                   original.tier, stored_at),),
                   established=stood is not None and stood >= 86_400.0, stood_s=stood),),
                           top_tier=original.tier),
               DisputeSide(after, (DisputeSource(
                   (writer,), tier, (DisputePassage(doc_id, doc_id, writer, tier, now),),
                   stood_s=0.0),), top_tier=tier)))
    return upsert(connection, dispute, now)


def with_texts(connection: sqlite3.Connection, dispute: dict[str, object]) -> dict[str, object]:
    """``dispute`` with each passage's ``state`` now (``stored``, ``held`` in quarantine, or
    ``gone``: deleted or released since) and its ``text`` (the chunk's, or the document's when
    the passage is a whole document or is held; None when gone): what a person reads to
    settle it, and which documents an action would still change."""
    for side in dispute["sides"]:
        for source in side["sources"]:
            for passage in source["passages"]:
                passage["state"], passage["text"] = _passage_now(connection, passage)
    return dispute


def _passage_now(connection: sqlite3.Connection, passage: dict) -> tuple[str, str | None]:
    doc_id, chunk_id = passage["doc_id"], passage["id"]
    index = chunk_id[len(doc_id) + 1:] if chunk_id.startswith(doc_id + "#") else ""
    if index.isdigit():
        row = connection.execute(
            "SELECT c.text FROM chunks c JOIN documents d ON d.pk = c.doc_pk "
            "WHERE d.doc_id = ? AND c.chunk_index = ?", (doc_id, int(index))).fetchone()
    else:
        row = connection.execute("SELECT text FROM documents WHERE doc_id = ?",
                                 (doc_id,)).fetchone()
    if row is not None:
        return "stored", row[0]
    held = connection.execute("SELECT text FROM quarantine WHERE doc_id = ? AND state = 'held'",
                              (doc_id,)).fetchone()
    if held is not None:
        return "held", held[0]
    return "gone", None
