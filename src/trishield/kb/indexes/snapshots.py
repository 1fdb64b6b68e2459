"""The dense index of one KB handle: in memory, following the change log, saved as snapshots.

The lexical index is SQLite's (FTS5, kept by triggers in the writing transaction). The dense
index lives in memory and follows the chunk change log; a snapshot of it,
``dense-s<position>.<serial>.faiss`` with ``checksums-s<position>.<serial>.json``, is saved
when enough changed since the last one (:meth:`DenseIndexes.snapshot_due`), so a write costs
its own rows. ``serial`` tells apart two snapshots of one position (a compaction rewrites the
index without a write): a new one never replaces a file in place, so a crash while it is
written leaves the previous one whole.

A snapshot behind the database is brought up to date from the change log; one that does not
match its checksums (a truncated or emptied file) is never used: the index is rebuilt from the
database instead. Readers never write: a reader that rebuilds keeps the result in memory, and
the next write (or ``trishield repair``) saves it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from trishield.errors import StorageFullError, TriShieldError
from trishield.kb.indexes.backend import EmbeddedBackend, catch_up
from trishield.kb.indexes.dense import IVF_MIN_TRAIN, TOMBSTONE_SHARE, DenseIndex, file_digests
from trishield.kb.indexes.lexical import LexicalIndex
from trishield.kb.locking import fault_point
from trishield.kb.store import Store
from trishield.kb.store.change_log import Position

SNAPSHOT_ALWAYS_BELOW = 2000
"""A KB with fewer chunks saves its dense snapshot after every write (a few megabytes)."""
SNAPSHOT_MIN_CHANGES = 1000
SNAPSHOT_SHARE = 0.1
"""A larger KB saves a snapshot once the change-log entries since the last one reach this
share of its rows (and at least :data:`SNAPSHOT_MIN_CHANGES`): a write costs its own rows,
and a reader starting cold replays at most that share from SQLite."""
log = logging.getLogger("trishield.kb")
Snapshot = tuple[int, int]
"""A saved dense snapshot: ``(change-log position, serial)``."""


@contextmanager
def reading(store: Store) -> Iterator[None]:
    """One read transaction (one snapshot of the database) for what runs inside, unless one
    is open already."""
    connection = store.connection
    if connection.in_transaction:
        yield
        return
    connection.execute("BEGIN")
    try:
        yield
    finally:
        if connection.in_transaction:
            connection.execute("COMMIT")


class DenseIndexes:
    """The embedded indexes of one KB handle, in step with its store.

    ``engine_floor`` says how far a search engine that follows the same change log has read
    (None: the KB has none; -1: not known), so that a snapshot never prunes the log under it.
    """

    def __init__(self, directory: Path, store: Store, kind: str, dimension: int, *,
                 engine_floor: Callable[[], int | None]):
        self.directory = directory
        self.store = store
        self.kind = kind
        self.dimension = dimension
        self._engine_floor = engine_floor
        self.backend: EmbeddedBackend | None = None
        self._saved_position: int | None = None
        self._snapshot_missing = False

    # -- snapshot files ---------------------------------------------------------------------
    def _index_paths(self, snapshot: Snapshot) -> tuple[Path]:
        return (self.directory / f"dense-s{snapshot[0]}.{snapshot[1]}.faiss",)

    def _checksum_path(self, snapshot: Snapshot) -> Path:
        return self.directory / f"checksums-s{snapshot[0]}.{snapshot[1]}.json"

    def _verified(self, snapshot: Snapshot) -> bool:
        """Whether the snapshot matches the checksums written with it (a missing,
        truncated, emptied or altered file does not)."""
        try:
            recorded = json.loads(self._checksum_path(snapshot).read_text())
            return recorded == file_digests(self._index_paths(snapshot), self.directory)
        except (OSError, ValueError):
            return False

    def snapshots(self) -> list[Snapshot]:
        """The saved snapshots (both files present), newest first."""
        found = []
        for path in self.directory.glob("dense-s*.faiss"):
            parts = path.name[len("dense-s"):-len(".faiss")].split(".")
            if len(parts) == 2 and all(part.isdigit() for part in parts):
                snapshot = (int(parts[0]), int(parts[1]))
                if self._checksum_path(snapshot).is_file():
                    found.append(snapshot)
        return sorted(found, reverse=True)

    def _load(self, where: Position) -> EmbeddedBackend | None:
        """The newest intact snapshot the change log can bring up to ``where``, caught up
        and checked against the row count; ``None`` when there is none (call it inside a read
        transaction)."""
        for snapshot in self.snapshots():
            position = snapshot[0]
            if not where.pruned <= position <= where.current or not self._verified(snapshot):
                continue
            try:
                dense = DenseIndex.load(self._index_paths(snapshot)[0], self.kind,
                                        self.dimension)
            except Exception as error:  # derived data: any damage means a rebuild
                log.warning("dense snapshot %d cannot be read (%s); rebuilding", position,
                            error)
                continue
            backend = self._backend_for(dense, position)
            if catch_up(backend, self.store, where.current) and \
                    len(dense) == self.chunk_count():
                self._saved_position = position
                return backend
            log.warning("dense snapshot %d disagrees with the database; rebuilding", position)
        return None

    def chunk_count(self) -> int:
        return int(self.store.connection.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def _backend_for(self, dense: DenseIndex, position: int) -> EmbeddedBackend:
        return EmbeddedBackend(dense, LexicalIndex(self.store.connection), position,
                               exact=self.exact_vectors)

    def exact_vectors(self, ids: np.ndarray) -> np.ndarray:
        """Stored embeddings of ``ids`` in the order given (IVF-PQ re-scores with them)."""
        found = self.store.embeddings_of([int(i) for i in ids], self.dimension)
        return np.stack([found[int(i)] for i in ids]) if len(ids) else \
            np.zeros((0, self.dimension), dtype=np.float32)

    def rebuilt(self, where: Position) -> EmbeddedBackend:
        """A dense index built from every stored chunk (inside the read transaction that
        read ``where``)."""
        ids, vectors = self.store.all_embeddings(self.dimension)
        dense = DenseIndex.build(self.kind, self.dimension, ids, vectors)
        return self._backend_for(dense, where.current)

    # -- following the database -------------------------------------------------------------
    def refresh(self, *, persist: bool) -> tuple[int, DenseIndex, LexicalIndex]:
        """Indexes in step with the database: the change-log position and both indexes.

        The dense index in memory takes in the rows written since its position (by this or
        any other process); one that cannot (first use, a pruned log, a damaged snapshot) is
        loaded from the newest snapshot or rebuilt from the database. With ``persist`` (the
        caller holds the write lock) a snapshot is saved when one is due; a save that fails
        (a full disk) leaves the index in memory and raises ``OSError``."""
        with reading(self.store):
            where = self.store.index_position()
            backend = self.backend
            if backend is None or not catch_up(backend, self.store, where.current):
                backend = self._load(where)
                self._snapshot_missing = backend is None
                self.backend = backend = backend or self.rebuilt(where)
        if persist:
            self.persist(backend)
        return backend.position, backend.dense_index, backend.lexical_index

    def snapshot_due(self, position: int, rows: int) -> bool:
        """Whether a snapshot should be saved at ``position`` for an index of ``rows`` rows:
        always for a small KB (cheap), else once the changes since the last one reach a share
        of it, so each write costs its own rows and the snapshots' cost is amortised."""
        if self._snapshot_missing:
            return True  # none intact: this handle rebuilt from the database
        saved = self._saved_position
        if saved is None:
            snapshots = self.snapshots()
            saved = self._saved_position = snapshots[0][0] if snapshots else None
        if saved is None:
            return True
        changes = position - saved
        if changes <= 0:
            return False
        return rows < SNAPSHOT_ALWAYS_BELOW or \
            changes >= max(SNAPSHOT_MIN_CHANGES, SNAPSHOT_SHARE * rows)

    def persist(self, backend: EmbeddedBackend) -> None:
        """Save a snapshot when due; first rebuild a graph heavy with tombstones or an IVF-PQ
        index that has grown enough to be trained (caller holds the write lock)."""
        dense = backend.dense_index
        rebuild = dense.tombstone_share > TOMBSTONE_SHARE or (
            dense.kind == "ivfpq" and not dense.trained and len(dense) >= IVF_MIN_TRAIN)
        if rebuild:
            with reading(self.store):
                backend = self.backend = self.rebuilt(self.store.index_position())
        if rebuild or self.snapshot_due(backend.position, len(backend)):
            self.save(backend.position, backend.dense_index)

    def save(self, position: int, dense: DenseIndex, *,
             prune_through: int | None = None) -> None:
        """Write the dense snapshot of ``position`` and its checksums, then forget the change
        log up to the previous snapshot (readers behind this one still catch up from the log)
        and remove older files (caller holds the write lock)."""
        serials = [serial for at, serial in self.snapshots() if at == position]
        snapshot = (position, max(serials) + 1 if serials else 0)
        self._remove_index_files(snapshot)  # a leftover of a crashed save, never verified
        (dense_path,) = self._index_paths(snapshot)
        previous = self._saved_position
        try:
            dense.save(dense_path)
            fault_point("snapshot-written")
            digests = file_digests(self._index_paths(snapshot), self.directory)
            temporary = self.directory / f".checksums-s{position}.{snapshot[1]}.json"
            with temporary.open("w") as handle:
                json.dump(digests, handle, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self._checksum_path(snapshot))
        except OSError:
            self._remove_index_files(snapshot)  # half a save is worth nothing: free it
            raise
        self._saved_position = position
        self._snapshot_missing = False
        through = prune_through if prune_through is not None else previous
        floor = self._engine_floor()
        if through is not None and floor is not None:
            # never prune what a lagging engine still needs to catch up (-1: not known)
            through = min(through, floor)
        if through is not None and 0 < through <= position:
            try:
                self.store.prune_index_log(through)
            except TriShieldError as error:  # the snapshot is saved; pruning can wait
                log.warning("the change log was not pruned: %s", error)
        self._remove_stale_indexes(snapshot)

    def after_commit(self) -> None:
        """After a committed write: the dense index takes in the write's rows, and a snapshot
        is saved when one is due. A handle that has not loaded the dense index (a one-off CLI
        ingest) does not load it just to follow the write, unless a snapshot is due. Raises
        ``OSError`` when a save fails (the caller reports it)."""
        if self.backend is None:
            where = self.store.index_position()
            due = self.snapshot_due(where.current, self.chunk_count())
            fault_point("between-indexes")
            if due:
                self.refresh(persist=True)
        else:
            self.refresh(persist=False)
            fault_point("between-indexes")
            self.persist(self.backend)

    def _remove_index_files(self, snapshot: Snapshot) -> None:
        for path in (*self._index_paths(snapshot), self._checksum_path(snapshot)):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def _remove_stale_indexes(self, snapshot: Snapshot) -> None:
        """Remove every index file but ``snapshot``'s: older snapshots, the per-generation
        dense and BM25 files of earlier versions, and temporaries."""
        keep = {path.name for path in (*self._index_paths(snapshot),
                                       self._checksum_path(snapshot))}
        for path in self.directory.iterdir():
            stale = (path.name.startswith(("dense-", "bm25-", "checksums-"))
                     and path.name not in keep)
            if stale or path.name.startswith((".dense-", ".bm25-", ".checksums-")):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    # -- checking and rebuilding ------------------------------------------------------------
    def check(self) -> tuple[bool, bool]:
        """``(present, intact)`` of the saved snapshot, changing nothing: one exists; its
        checksums match, it loads, and with the change log it holds exactly the stored
        chunks."""
        with reading(self.store):
            where = self.store.index_position()
            present = bool(self.snapshots())
            remembered = self._saved_position
            intact = self._load(where) is not None
            self._saved_position = remembered
        return present, intact

    def rebuild_and_save(self) -> tuple[int, EmbeddedBackend]:
        """Rebuild the dense index from the database and save its snapshot, pruning the log
        before it (caller holds the write lock); the generation and the new backend."""
        with reading(self.store):
            generation = self.store.generation()
            backend = self.rebuilt(self.store.index_position())
        self.backend = backend
        try:
            self.save(backend.position, backend.dense_index, prune_through=backend.position)
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise StorageFullError(f"the indexes of generation {generation} were rebuilt "
                                   "but could not be saved: the disk is full") from None
        return generation, backend
