"""A KB handle's link to a search engine (kb/indexes/engines): Milvus instead of the embedded
indexes.

The store stays the truth. The engine follows the chunk change log like the embedded dense
index, but only while the KB's write lock is held (by a writer after its commit, or by a reader
that finds the lock free), so two processes never apply deltas to one collection at once; its
position lives in the collection (``MilvusBackend.position``). A failed catch-up keeps the
commit and warns; searches then read the engine as it is and drop hits whose row the store no
longer holds, until a write, a search or ``repair`` catches it up. Ring 1's ingest
neighbourhood and ``KnowledgeBase.indexes()`` stay on the embedded dense index (it is kept, and
snapshotted, as before).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from trishield.errors import TriShieldError
from trishield.kb.indexes.engines import sync as engine_sync
from trishield.kb.indexes.engines.config import EngineConfig
from trishield.kb.indexes.retrieval import RETRIEVAL_BACKENDS, Candidate, Searchers
from trishield.kb.indexes.snapshots import reading
from trishield.kb.locking import WriteLock
from trishield.kb.store import Store

ENGINE_OWNER = "engine_owner"
"""Meta key: this KB's id in the engine collection's properties (so a collection another KB
wrote, or an earlier attach, is reloaded rather than trusted)."""
log = logging.getLogger("trishield.kb")


class EngineLink:
    """The engine a KB's settings name, connected on first use (``client``: the
    ``MilvusBackend``, or None before that or after a failure)."""

    def __init__(self, store: Store, dimension: int, lock: WriteLock,
                 config: Callable[[], EngineConfig], encode: Callable[[str], np.ndarray]):
        self.store = store
        self.dimension = dimension
        self.lock = lock
        self._config = config
        self._encode = encode
        self.client: Any = None

    @property
    def embedded(self) -> bool:
        """Whether the KB searches its embedded indexes (no engine to follow)."""
        return self._config().embedded

    def floor(self) -> int | None:
        """How far the engine has read the change log (None: embedded; -1: not known), so
        that the embedded index's snapshots never prune what it still needs."""
        if self.embedded:
            return None
        return self.client.position if self.client is not None else -1

    def backend(self):
        """The KB's Milvus backend, connected on first use."""
        if self.client is None:
            from trishield.kb.indexes.engines.milvus import MilvusBackend

            config = self._config()
            self.client = MilvusBackend(config.uri, config.collection, self.dimension,
                                        index=config.index,
                                        owner=self.store.meta().get(ENGINE_OWNER))
        return self.client

    def close(self) -> None:
        """Forget the connection (one that failed, or at the handle's close): the next use
        connects again (a cluster that was unreachable, a Milvus Lite folder another process
        held)."""
        client, self.client = self.client, None
        if client is not None:
            client.close()

    def _follow(self) -> str:
        """Catch the engine up with the store, or reload it (caller holds the write lock)."""
        engine = self.backend()
        engine.refresh_position()
        return engine_sync.follow(engine, self.store)

    def after_commit(self) -> list[str]:
        """After a committed write (write lock held): the engine takes it in; a failure is a
        warning, never an error, since the write is committed and the engine only follows."""
        if self.embedded:
            return []
        try:
            self._follow()
        except TriShieldError as error:
            self.close()
            log.error("committed generation %d, but the search engine did not follow: %s",
                      self.store.generation(), error)
            return [f"the write is committed (generation {self.store.generation()}), but the "
                    f"search engine did not take it in ({error}); searches miss it until the "
                    "engine catches up (at the next write or search that reaches it, or "
                    "`trishield repair`)"]
        return []

    def _try_follow(self) -> None:
        """A reader's catch-up: only when the write lock is free right now (a writer holding
        it catches the engine up itself after its commit); failures leave the engine as is."""
        with self.lock.try_hold() as held:
            if not held:
                return
            try:
                self._follow()
            except TriShieldError as error:
                self.close()
                log.warning("the search engine could not catch up: %s", error)

    def search(self, query: str, backend: str, k: int,
               depth: int | None) -> list[Candidate]:
        """``KnowledgeBase.search`` on the engine: hits whose row the store no longer holds (an
        engine lagging behind a delete) are dropped, the rest read from the store's snapshot."""
        engine = self.backend()
        if engine.position != self.store.index_position().current:
            self._try_follow()

        def dense(text: str, n: int) -> list[tuple[int, float]]:
            return engine.dense(self._encode(text), n)

        scored = RETRIEVAL_BACKENDS.get(backend)(Searchers(dense, engine.lexical), query, k,
                                                 depth)
        with reading(self.store):
            chunks = self.store.chunks_by_pk([item for item, _, _ in scored])
        kept = [(item, score, parts) for item, score, parts in scored if item in chunks]
        return [Candidate(chunks[item], score, rank, backend, parts)
                for rank, (item, score, parts) in enumerate(kept, start=1)]

    def state(self) -> dict[str, object]:
        """:func:`engine_sync.check` plus positions, or the error that prevented it."""
        config = self._config()
        state: dict[str, object] = {"uri": config.uri, "collection": config.collection,
                                    "index": config.index}
        try:
            engine = self.backend()
            position = engine.refresh_position()
            state |= engine_sync.check(engine, self.store, self.dimension)
        except TriShieldError as error:
            return state | {"consistent": False, "in_step": False, "error": str(error)}
        current = self.store.index_position().current
        return state | {"position": position, "store_position": current,
                        "in_step": position == current}

    def reload(self) -> None:
        """Load the engine in full from the store (``repair``; write lock held)."""
        engine_sync.sync(self.backend(), self.store)

    def attach(self, engine: EngineConfig) -> dict[str, object]:
        """Load ``engine`` in full from the store (a Milvus collection; nothing for
        ``embedded``), then name it in the KB's meta and use it; nothing changes in the meta
        if the load fails (caller holds the write lock and updates its settings after)."""
        owner = uuid.uuid4().hex
        report: dict[str, object] = {"engine": str(engine)}
        backend = None
        if not engine.embedded:
            from trishield.kb.indexes.engines.milvus import MilvusBackend

            backend = MilvusBackend(engine.uri, engine.collection, self.dimension,
                                    index=engine.index, owner=owner)
            try:
                report |= engine_sync.sync(backend, self.store).as_dict()
            except BaseException:
                backend.close()
                raise
        with self.store.transaction() as connection:
            self.store.set_meta(engine.as_meta() | {ENGINE_OWNER: owner}, connection)
        previous, self.client = self.client, backend
        if previous is not None:
            previous.close()
        return report
