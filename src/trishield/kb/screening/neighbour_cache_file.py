"""Ring 1's neighbour lists saved beside the KB, so that a one-off process screens warm.

A KB handle keeps, between screened writes, each reference document's nearest stored chunks by
other writers (:class:`~trishield.kb.screening.neighbour_cache.NeighbourCache`). A handle that has
none (a one-off ``trishield ingest``, a restarted service) searches the whole reference sample
before its first screen: 0.7-1.4 s at 100,000 chunks on a flat index and 2.2 s on HNSW,
against tens of milliseconds for a warm handle (docs/scale.md). The lists do not depend on
the process that found them, only on the KB at one change-log position, so a handle saves its
cache when it closes and the next one starts from it: the cache's own catch-up
(:meth:`NeighbourCache.catch_up`) brings the lists forward from the change log, exactly as it
does between two writes of one handle.

The file is derived data, like the dense snapshot. It is written whole or not at all (a
temporary file, fsync, rename), and read all or nothing: a file of another KB (its creation
time or embedding model differ), of another format, or damaged in any way is ignored with a
warning, and the sample is searched afresh; a file whose position the change log no longer
reaches is emptied by the catch-up, as a cache that fell behind is. Nothing in it is trusted
in part.

The handle's reference draws (:class:`~trishield.kb.screening.reference_draw.ReferenceDraws`: which
documents the sample holds, with their vectors) are saved with the lists: drawn afresh, a
sample of 100 writers at 100,000 chunks reads every writer's row ids and 1,800 documents'
chunk vectors, about 0.2 s. A saved draw is used only while its writer's document version is
the one it was drawn at, exactly as between two screens of one handle. So are the writers'
chunk row ids the handle read (:class:`~trishield.kb.screening.writer_chunks.WriterChunks`), each
with the writer's document version then: a screen leaves the batch's writer's chunks out, and read
afresh those of a writer of 10,000 chunks cost a one-off screen 18 ms of about 50 at
100,000 chunks (8 bytes a chunk in the file); a saved writer whose version moved since is
brought forward exactly as between two screens of one handle. Lists found on a trained
IVF-PQ index carry the fingerprint of its codebooks and each document's probed lists; a handle
whose index was trained anew since starts over (:meth:`NeighbourCache.catch_up`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from trishield.kb.screening.neighbour_cache import CachedNeighbours, NeighbourCache
from trishield.kb.screening.reference_draw import WriterDraw
from trishield.kb.screening.writer_chunks import KnownChunks

FILE = "ring1-neighbours.npz"
FORMAT = 4
"""Bumped when the arrays below change meaning; a file of another format is ignored."""

log = logging.getLogger("trishield.kb")


class SavedNeighbours:
    """One KB handle's side of the file: read once, before the handle's first screen
    (:meth:`restore`), and written when the handle closes if it changed the lists since
    (:meth:`save`). ``identity`` is read when first needed (the KB's meta)."""

    def __init__(self, directory: Path, identity: Callable[[], dict[str, Any]],
                 dimension: int):
        self.path = directory / FILE
        self._identity = identity
        self.dimension = dimension
        self._known: dict[str, Any] | None = None
        self._saved: tuple[int | None, int] | None = None
        """``(position, revision)`` of the lists as read or last saved; None until read."""

    @property
    def identity(self) -> dict[str, Any]:
        if self._known is None:
            self._known = self._identity()
        return self._known

    def restore(self, cache: NeighbourCache) -> NeighbourCache:
        """The cache to screen with: ``cache`` itself, unless it is new (never brought to a
        position) and a usable file exists. Looks at the file once per handle."""
        if self._saved is None:
            if cache.position is None:
                cache = load(self.path, self.identity, self.dimension) or cache
            self._saved = (cache.position, cache.revision)
        return cache

    def save(self, cache: NeighbourCache) -> None:
        """Write ``cache`` if it was restored here and changed since; a failure is logged,
        never raised (the lists are derived data)."""
        if self._saved is None or not cache.entries or \
                (cache.position, cache.revision) == self._saved:
            return
        try:
            save(cache, self.path, self.identity, self.dimension)
        except OSError as error:
            log.warning("Ring 1's neighbour lists were not saved (%s); the next process "
                        "searches its reference sample afresh", error.strerror or error)
            return
        self._saved = (cache.position, cache.revision)

    def discard(self) -> None:
        """Remove the file (``trishield repair`` rebuilds what is derived from the database:
        after a ``kb.sqlite`` restored from a backup and written to since, the change log
        would not tell the lists that their history is another one)."""
        self.path.unlink(missing_ok=True)
        self._saved = None


class _Unusable(ValueError):
    """Why a saved file cannot be used (logged, never raised to the caller)."""


def save(cache: NeighbourCache, path: Path, identity: dict[str, Any], dimension: int) -> None:
    """Write ``cache`` (its position, ``k``, lists and draws of ``dimension``-d vectors) to
    ``path`` atomically, tagged with the KB's ``identity``. Raises ``OSError`` (a full disk)
    with nothing left behind."""
    if cache.position is None or cache.k is None:
        raise ValueError("only a cache that has been brought to a position can be saved")
    doc_pks = list(cache.entries)
    entries = [cache.entries[pk] for pk in doc_pks]
    header = {"format": FORMAT, "identity": identity, "position": cache.position,
              "k": cache.k, "draw_seed": cache.draws.seed, "codebook": cache.codebook}
    probed = [entry.probes for entry in entries]
    if cache.codebook is not None and any(lists is None for lists in probed):
        raise ValueError("a list scored through IVF-PQ codes has no probed lists")
    arrays = {
        "header": np.array(json.dumps(header, sort_keys=True)),
        "doc_pks": np.array(doc_pks, dtype=np.int64),
        "writers": np.array([entry.writer for entry in entries], dtype=str),
        "vectors": (np.stack([entry.vector for entry in entries]).astype(np.float32)
                    if entries else np.zeros((0, dimension), np.float32)),
        "depths": np.array([entry.depth for entry in entries], dtype=np.int64),
        "own_offsets": _offsets([entry.own for entry in entries]),
        "own": _joined([entry.own for entry in entries], np.int64),
        "list_offsets": _offsets([entry.ids for entry in entries]),
        "ids": _joined([entry.ids for entry in entries], np.int64),
        "scores": _joined([entry.scores for entry in entries], np.float32),
        "probes": (np.stack(probed).astype(np.int64) if cache.codebook is not None and entries
                   else np.zeros((len(entries), 0), np.int64)),
    } | _draw_arrays(cache, dimension) | _chunk_arrays(cache)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with temporary.open("wb") as handle:
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def load(path: Path, identity: dict[str, Any], dimension: int) -> NeighbourCache | None:
    """The cache saved at ``path`` for the KB of ``identity``, or None (no file, or one that
    cannot be used: logged with the reason)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as saved:
            return _read(saved, identity, dimension)
    except (_Unusable, OSError, ValueError, KeyError, IndexError, TypeError,
            zipfile.BadZipFile) as error:
        log.warning("the saved neighbour lists %s are not used (%s); Ring 1 searches its "
                    "reference sample afresh", path, error)
        return None


def _read(saved: Any, identity: dict[str, Any], dimension: int) -> NeighbourCache:
    header = json.loads(str(saved["header"]))
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _Unusable(f"format {header.get('format') if isinstance(header, dict) else '?'}"
                        f", not {FORMAT}")
    if header.get("identity") != identity:
        raise _Unusable("they were saved for another knowledge base")
    position, k = header.get("position"), header.get("k")
    if not (_is_count(position) and _is_count(k) and k > 0):
        raise _Unusable("the position or k is not a count")
    codebook = header.get("codebook")
    if codebook is not None and not isinstance(codebook, str):
        raise _Unusable("the codebook fingerprint is not a string")
    doc_pks, writers, depths = saved["doc_pks"], saved["writers"], saved["depths"]
    vectors = saved["vectors"]
    count = len(doc_pks)
    if doc_pks.dtype != np.int64 or depths.dtype != np.int64 or writers.dtype.kind != "U" \
            or vectors.dtype != np.float32 or len(writers) != count or len(depths) != count \
            or vectors.shape != (count, dimension) or len(set(doc_pks.tolist())) != count:
        raise _Unusable("the documents' arrays do not agree")
    probes = saved["probes"]
    if probes.dtype != np.int64 or probes.ndim != 2 or len(probes) != count or \
            (count and (codebook is None) != (probes.shape[1] == 0)) or \
            (count and codebook is not None and (np.diff(probes, axis=1) < 0).any()):
        raise _Unusable("the probed lists do not agree with the codebook")
    own = _split(saved["own_offsets"], saved["own"], count, np.int64)
    offsets, found = saved["list_offsets"], saved["scores"]
    ids = _split(offsets, saved["ids"], count, np.int64)
    scores = _split(offsets, found, count, np.float32)
    # best first within each list: no rise between two neighbours of one list
    rises = np.diff(found) > 0
    rises[offsets[1:-1][(offsets[1:-1] > 0) & (offsets[1:-1] < len(found))] - 1] = False
    if not np.isfinite(vectors).all() or not np.isfinite(found).all() or rises.any() \
            or (depths < 1).any() or (np.diff(offsets) > depths).any():
        raise _Unusable("a list is longer than its depth, or not best first")
    cache = NeighbourCache()
    if header.get("draw_seed") != cache.draws.seed:
        raise _Unusable("the reference sample was drawn with another seed")
    cache.draws.draws = _read_draws(saved, dimension)
    cache.chunks.known = _read_chunks(saved)
    cache.position, cache.k, cache.codebook = position, k, codebook
    for row, doc_pk in enumerate(doc_pks.tolist()):
        cache.entries[doc_pk] = CachedNeighbours(
            str(writers[row]), vectors[row], own[row], ids[row], scores[row],
            int(depths[row]), None if codebook is None else probes[row])
    cache.seed_rows(vectors)  # the entries' vectors are rows of this array already
    return cache


def _draw_arrays(cache: NeighbourCache, dimension: int) -> dict[str, np.ndarray]:
    """The handle's reference draws, writer by writer."""
    names = sorted(cache.draws.draws)
    draws = [cache.draws.draws[name] for name in names]
    return {
        "draw_writers": np.array(names, dtype=str),
        "draw_states": np.array([[d.version, d.documents, d.share, d.newest] for d in draws],
                                dtype=np.int64).reshape(len(draws), 4),
        "draw_offsets": _offsets([np.asarray(d.pks) for d in draws]),
        "draw_pks": _joined([np.asarray(d.pks, dtype=np.int64) for d in draws], np.int64),
        "draw_vectors": (np.concatenate([d.vectors for d in draws]).astype(np.float32)
                         if draws else np.zeros((0, dimension), np.float32)),
    }


def _read_draws(saved: Any, dimension: int) -> dict[str, WriterDraw]:
    names, states = saved["draw_writers"], saved["draw_states"]
    count = len(names)
    pks = _split(saved["draw_offsets"], saved["draw_pks"], count, np.int64)
    vectors = saved["draw_vectors"]
    if names.dtype.kind != "U" or len(set(names.tolist())) != count \
            or states.dtype != np.int64 or states.shape != (count, 4) or (states < 0).any() \
            or vectors.dtype != np.float32 \
            or vectors.shape != (len(saved["draw_pks"]), dimension) \
            or not np.isfinite(vectors).all():
        raise _Unusable("the reference draws' arrays do not agree")
    offsets = saved["draw_offsets"].tolist()
    return {str(name): WriterDraw(int(version), int(documents), int(share), own.tolist(),
                                  vectors[offsets[row]:offsets[row + 1]], int(newest))
            for row, (name, (version, documents, share, newest), own)
            in enumerate(zip(names, states.tolist(), pks, strict=True))}


def _chunk_arrays(cache: NeighbourCache) -> dict[str, np.ndarray]:
    """The writers' chunk row ids the handle knows, writer by writer, with their states."""
    names = sorted(cache.chunks.known)
    known = [cache.chunks.known[name] for name in names]
    return {
        "chunk_writers": np.array(names, dtype=str),
        "chunk_states": np.array([[*k.state, k.newest] for k in known],
                                 dtype=np.int64).reshape(len(known), 3),
        "chunk_offsets": _offsets([k.pks for k in known]),
        "chunk_pks": _joined([k.pks for k in known], np.int64),
    }


def _read_chunks(saved: Any) -> dict[str, KnownChunks]:
    names, states = saved["chunk_writers"], saved["chunk_states"]
    count = len(names)
    pks = _split(saved["chunk_offsets"], saved["chunk_pks"], count, np.int64)
    if names.dtype.kind != "U" or len(set(names.tolist())) != count \
            or states.dtype != np.int64 or states.shape != (count, 3) or (states < 0).any() \
            or any((np.diff(own) <= 0).any() or (own[:1] < 1).any() for own in pks):
        raise _Unusable("the writers' chunk ids do not agree")
    return {str(name): KnownChunks((documents, version), newest, own)
            for name, (documents, version, newest), own
            in zip(names, states.tolist(), pks, strict=True)}


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _offsets(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum([len(part) for part in parts])]).astype(np.int64)


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def _split(offsets: np.ndarray, values: np.ndarray, count: int,
           dtype: type) -> list[np.ndarray]:
    """``values`` cut at ``offsets`` into ``count`` arrays, after checking that they fit."""
    if offsets.dtype != np.int64 or values.dtype != dtype or len(offsets) != count + 1 \
            or offsets[0] != 0 or offsets[-1] != len(values) or (np.diff(offsets) < 0).any():
        raise _Unusable("the lists' offsets do not fit their values")
    return [values[start:end] for start, end in itertools.pairwise(offsets.tolist())]
