"""Each writer's stored chunk row ids, kept between screened writes.

Ring 1 at ingest leaves the batch's writer's chunks out of every neighbourhood, and each
reference writer's out of its own documents' (``kb/screening/neighbourhood.py``), so a screen reads
the chunk row ids of those writers. Read afresh, a writer of 10,000 chunks cost about 10 ms a
screen at 100,000 chunks: the largest share of a returning writer's warm screen, though its
write added one document.

:class:`WriterChunks` keeps each writer's ids with the writer's ``(documents, version)``
(:mod:`trishield.kb.store.writer_counts`, kept by triggers) and the row id of its newest document
then. Chunks are written and deleted only with their document, so an unchanged version means
unchanged chunks; a writer that only added documents since (the version grew by the count's
growth) has its new documents above that newest row id (SQLite gives a new row an id above
every row of the table), which are read alone and checked against the count; anything else
(a delete) reads the writer again. The result is what a fresh read gives
(``tests/test_kb_writer_chunks.py``). A handle of the KB owns one (with its neighbour cache)
and uses it under the KB's write lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from trishield.kb.store import Store

NO_DOCUMENTS = (0, 0)


@dataclass
class KnownChunks:
    """One writer's chunk row ids (sorted) at ``state`` (documents, version), when its newest
    document's row id was ``newest``."""

    state: tuple[int, int]
    newest: int
    pks: np.ndarray


class WriterChunks:
    """Chunk row ids per writer, read only where the writer's documents changed."""

    def __init__(self) -> None:
        self.known: dict[str, KnownChunks] = {}
        self.read_in_full = 0
        """Writers read from scratch so far (the others were unchanged or read in part)."""

    def of(self, store: Store, writers: Iterable[str],
           states: dict[str, tuple[int, int]]) -> dict[str, np.ndarray]:
        """``writer -> row ids of its stored chunks`` for each of ``writers``, ``states``
        being :meth:`Store.writer_versions` now (a writer missing from it stores nothing)."""
        names = sorted(set(writers))
        found: dict[str, np.ndarray] = {}
        full: list[str] = []
        for name in names:
            state = states.get(name, NO_DOCUMENTS)
            known = self.known.get(name)
            if known is not None and known.state == state:
                found[name] = known.pks
                continue
            new = None if known is None else store.documents_added(
                name, known.state, known.newest, state)
            if known is None or new is None:
                full.append(name)
                continue
            found[name] = self._add(store, name, known, state, new)
        if full:
            chunks = store.chunk_pks_by_writer(full)
            newest = store.newest_document_of_writers(full)
            for name in full:
                self.known[name] = KnownChunks(states.get(name, NO_DOCUMENTS), newest[name],
                                               chunks[name])
                found[name] = chunks[name]
            self.read_in_full += len(full)
        return found

    def _add(self, store: Store, name: str, known: KnownChunks, state: tuple[int, int],
             doc_pks: list[int]) -> np.ndarray:
        """Take in the chunks of ``doc_pks``, the documents ``name`` added since ``known``."""
        if doc_pks:
            new = store.chunk_pks_of_documents(doc_pks)
            pks = np.union1d(known.pks, np.concatenate([new[pk] for pk in doc_pks]))
            self.known[name] = KnownChunks(state, doc_pks[-1], pks.astype(np.int64))
        else:
            self.known[name] = KnownChunks(state, known.newest, known.pks)
        return self.known[name].pks
