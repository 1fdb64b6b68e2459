"""Load a search engine from a knowledge base's store, and check that it still matches.

An engine is derived data, like the embedded indexes. Day to day it follows the chunk change
log (:func:`~trishield.kb.indexes.backend.catch_up`, one write's rows at a time); :func:`sync`
reloads it in full, making it hold exactly the store's chunks (every row upserted, rows the
store no longer has removed) and recording the change-log position it then reflects. That is
how an existing KB is pointed at a new cluster, how a collection whose position the log no
longer reaches is brought back, and how ``repair`` mends one after a failed write.
:func:`follow` picks the cheaper of the two; :func:`check` compares engine and store without
changing either, for ``KnowledgeBase.check_indexes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from trishield.errors import InputError
from trishield.kb.indexes.backend import IndexBackend, catch_up
from trishield.kb.store import Store

PAGE = 1000
"""Chunks read from SQLite and written to the engine at a time: memory stays flat in KB size."""
CHECK_SAMPLE = 64
"""Stored vectors compared with the engine's by :func:`check` (row ids can be reused after a
delete, so equal id sets alone do not prove equal contents)."""
VECTOR_TOLERANCE = 1e-5


class MirroredBackend(IndexBackend, Protocol):
    """An :class:`IndexBackend` that can also list its row ids and read back vectors, which
    :func:`sync` and :func:`check` need to compare it with the store."""

    def ids(self) -> np.ndarray: ...
    def vectors_of(self, ids: np.ndarray) -> dict[int, np.ndarray]: ...


@dataclass(frozen=True)
class SyncReport:
    """What one :func:`sync` did, the store generation it copied and the change-log
    ``position`` the engine reflects afterwards."""

    generation: int
    upserted: int
    removed: int
    rows: int
    position: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@contextmanager
def _snapshot(store: Store) -> Iterator[None]:
    """One read transaction, so every page comes from the same generation even while another
    process commits (WAL readers see the snapshot they started with)."""
    if store.connection.in_transaction:
        raise InputError("the store is inside a transaction; sync after it commits")
    store.connection.execute("BEGIN")
    try:
        yield
    finally:
        store.connection.execute("COMMIT")


def _pages(store: Store, dimension: int) -> Iterator[tuple[np.ndarray, np.ndarray, list[str]]]:
    """``(ids, vectors, texts)`` of every chunk in row id order, :data:`PAGE` at a time."""
    last = -(1 << 63)
    while True:
        rows = store.connection.execute(
            "SELECT pk, embedding, text FROM chunks WHERE pk > ? ORDER BY pk LIMIT ?",
            (last, PAGE)).fetchall()
        if not rows:
            return
        ids = np.array([pk for pk, _, _ in rows], dtype=np.int64)
        vectors = np.frombuffer(b"".join(blob for _, blob, _ in rows), dtype=np.float32)
        if vectors.size != len(rows) * dimension:
            raise InputError(f"the store's embeddings are not {dimension}-dimensional; "
                             "give the KB's embedding dimension")
        yield ids, vectors.reshape(len(rows), dimension), [text for _, _, text in rows]
        last = int(ids[-1])


def _store_ids(store: Store) -> np.ndarray:
    rows = store.connection.execute("SELECT pk FROM chunks ORDER BY pk").fetchall()
    return np.array([pk for (pk,) in rows], dtype=np.int64)


def sync(backend: MirroredBackend, store: Store, dimension: int | None = None) -> SyncReport:
    """Make ``backend`` hold exactly the store's chunks: upsert every chunk (a reused row id
    gets its new contents), then remove the engine's rows the store does not have, then
    record the change-log position read with the rows (``backend.position``).

    Call it holding the KB's write lock (as ``KnowledgeBase.repair`` does): a write committed
    by another process while it runs would otherwise have its engine rows removed, or a
    deleted chunk put back."""
    dimension = backend.dimension if dimension is None else dimension
    with _snapshot(store):
        generation = store.generation()
        position = store.index_position().current
        upserted = 0
        for ids, vectors, texts in _pages(store, dimension):
            backend.add(ids, vectors, texts)
            upserted += len(ids)
        wanted = _store_ids(store)
    extra = np.setdiff1d(backend.ids(), wanted, assume_unique=True)
    backend.remove(extra)
    backend.position = position
    return SyncReport(generation, upserted, len(extra), len(backend), position)


def follow(backend: MirroredBackend, store: Store) -> str:
    """Bring ``backend`` to the store's current position: from the change log when it reaches
    back to the backend's position (``"caught up"``), else by a full :func:`sync`
    (``"reloaded"``). Same locking rule as :func:`sync`."""
    with _snapshot(store):
        if catch_up(backend, store):
            return "caught up"
    sync(backend, store)
    return "reloaded"


def check(backend: MirroredBackend, store: Store, dimension: int, *,
          sample: int = CHECK_SAMPLE, seed: int = 0) -> dict[str, object]:
    """Whether the engine matches the store, changing neither: row counts, ids missing from
    the engine or extra in it (up to 10 of each named), and a seeded sample of stored vectors
    compared with the engine's. ``consistent`` is true when all of these agree."""
    with _snapshot(store):
        generation = store.generation()
        wanted = _store_ids(store)
        engine = backend.ids()
        missing = np.setdiff1d(wanted, engine, assume_unique=True)
        extra = np.setdiff1d(engine, wanted, assume_unique=True)
        shared = np.intersect1d(wanted, engine, assume_unique=True)
        rng = np.random.default_rng(seed)
        picked = np.sort(rng.choice(shared, size=min(sample, len(shared)), replace=False))
        stored = store.embeddings_of(picked.tolist(), dimension)
    held = backend.vectors_of(picked)
    differing = [int(key) for key in picked
                 if key not in held or not np.allclose(held[key], stored[key],
                                                       atol=VECTOR_TOLERANCE)]
    return {
        "generation": generation,
        "store_rows": len(wanted),
        "engine_rows": len(engine),
        "missing": len(missing),
        "extra": len(extra),
        "missing_ids": missing[:10].tolist(),
        "extra_ids": extra[:10].tolist(),
        "vectors_checked": len(picked),
        "vectors_differing": differing,
        "consistent": not len(missing) and not len(extra) and not differing,
    }
