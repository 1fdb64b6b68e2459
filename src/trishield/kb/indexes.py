"""The two search indexes of a knowledge base: FAISS (dense) and BM25 (lexical).

Both are *derived* data: SQLite holds every chunk's text and embedding, and an index can always
be rebuilt from it. Index files carry the KB generation they were built for in their name, and
are written under a temporary name then renamed, so a reader never sees a half-written index and
never uses one that is out of step with the database.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import bm25s
import faiss
import numpy as np

from trishield.errors import KnowledgeBaseError
from trishield.text import index_terms

DENSE_KINDS = ("flat", "hnsw")
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 128
ANALYZER = "words-lower/stopwords-en-plus/snowball-english/v1"
"""Names how :func:`index_terms` turns text into BM25 terms; an index built otherwise is stale."""


class DenseIndex:
    """Inner-product search over L2-normalised embeddings (cosine), keyed by chunk row id."""

    def __init__(self, kind: str, dimension: int, index: faiss.Index | None = None):
        if kind not in DENSE_KINDS:
            raise KnowledgeBaseError(f"unknown dense index kind {kind!r}; known: "
                                     f"{', '.join(DENSE_KINDS)}")
        self.kind = kind
        self.dimension = dimension
        self.index = index if index is not None else self._empty()

    def _empty(self) -> faiss.Index:
        if self.kind == "flat":
            base = faiss.IndexFlatIP(self.dimension)
        else:
            base = faiss.IndexHNSWFlat(self.dimension, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            base.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        return faiss.IndexIDMap2(base)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if len(ids):
            self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32),
                                    np.asarray(ids, dtype=np.int64))

    def search(self, vector: np.ndarray, depth: int) -> list[tuple[int, float]]:
        if len(self) == 0:
            return []
        if self.kind == "hnsw":
            faiss.downcast_index(self.index.index).hnsw.efSearch = max(HNSW_EF_SEARCH, depth)
        scores, ids = self.index.search(vector.reshape(1, -1).astype(np.float32),
                                        min(depth, len(self)))
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def search_many(self, vectors: np.ndarray, depth: int, *,
                    excluding: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``depth`` best ``(scores, ids)`` of each row of ``vectors``, best first, never
        one of the ids in ``excluding``; a row that finds fewer is padded with id -1 and a NaN
        score. The exclusion is a FAISS selector applied during the search (no over-fetching,
        however many ids it names); with HNSW a large exclusion can cost recall."""
        queries = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dimension)
        if len(self) == 0 or depth < 1 or len(queries) == 0:
            return (np.full((len(queries), max(depth, 0)), np.nan, dtype=np.float32),
                    np.full((len(queries), max(depth, 0)), -1, dtype=np.int64))
        selector = None
        if excluding is not None and len(excluding):
            batch = faiss.IDSelectorBatch(np.ascontiguousarray(excluding, dtype=np.int64))
            selector = faiss.IDSelectorNot(batch)
        if self.kind == "hnsw":
            params = faiss.SearchParametersHNSW(efSearch=max(HNSW_EF_SEARCH, depth))
        else:
            params = faiss.SearchParameters()
        if selector is not None:
            params.sel = selector
        scores, ids = self.index.search(queries, depth, params=params)
        scores = scores.astype(np.float32)
        scores[ids < 0] = np.nan
        return scores, ids.astype(np.int64)

    def save(self, path: Path) -> None:
        # serialised in memory and written by Python, so that a failed write (a full disk) is
        # an OSError with its errno, not FAISS's generic RuntimeError
        data = faiss.serialize_index(self.index)
        _atomic_write(path, lambda temporary: temporary.write_bytes(data.tobytes()))

    @classmethod
    def load(cls, path: Path, kind: str, dimension: int) -> DenseIndex:
        index = faiss.read_index(str(path))
        if index.d != dimension:
            raise KnowledgeBaseError(f"{path}: index dimension {index.d} != model's {dimension}")
        return cls(kind, dimension, index)


class LexicalIndex:
    """BM25 (bm25s, Lucene variant) over stemmed content words, keyed by chunk row id."""

    def __init__(self, ids: np.ndarray, retriever: bm25s.BM25 | None):
        self.ids = np.asarray(ids, dtype=np.int64)
        self.retriever = retriever

    @classmethod
    def build(cls, ids: np.ndarray, texts: list[str]) -> LexicalIndex:
        if not texts:
            return cls(np.zeros(0, dtype=np.int64), None)
        retriever = bm25s.BM25()
        retriever.index([index_terms(text) for text in texts], show_progress=False)
        return cls(ids, retriever)

    def __len__(self) -> int:
        return len(self.ids)

    def unknown_terms(self, text: str) -> list[str]:
        """The text's index terms that occur in no indexed chunk, in order, once each."""
        vocabulary = self.retriever.vocab_dict if self.retriever is not None else {}
        return list(dict.fromkeys(t for t in index_terms(text) if t not in vocabulary))

    def search(self, query: str, depth: int) -> list[tuple[int, float]]:
        tokens = index_terms(query)
        if self.retriever is None or not tokens:
            return []
        scores = self.retriever.get_scores(tokens)
        depth = min(depth, len(scores))
        top = np.argpartition(-scores, depth - 1)[:depth]
        top = top[np.lexsort((top, -scores[top]))]
        return [(int(self.ids[i]), float(scores[i])) for i in top if scores[i] > 0]

    def save(self, path: Path) -> None:
        def write(temporary: Path) -> None:
            temporary.mkdir()
            (temporary / "analyzer.txt").write_text(ANALYZER + "\n")
            np.save(temporary / "ids.npy", self.ids)
            if self.retriever is not None:
                self.retriever.save(str(temporary / "bm25"), show_progress=False)

        _atomic_write(path, write)

    @classmethod
    def load(cls, path: Path) -> LexicalIndex | None:
        """The saved index, or ``None`` when it was built with another analyzer."""
        analyzer = path / "analyzer.txt"
        if not analyzer.is_file() or analyzer.read_text().strip() != ANALYZER:
            return None
        ids = np.load(path / "ids.npy")
        retriever = None
        if (path / "bm25").is_dir():
            retriever = bm25s.BM25.load(str(path / "bm25"), show_progress=False, verbosity=0)
        return cls(ids, retriever)


def _atomic_write(path: Path, write) -> None:
    """Write ``path`` (file or folder) via a temporary sibling and an atomic rename.

    Index paths are named by KB generation, so one that already exists was completely written
    for the same database content and is kept as it is.
    """
    if path.exists():
        return
    temporary = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.")) / "payload"
    try:
        write(temporary)
        if temporary.is_file():
            with temporary.open("rb") as handle:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        shutil.rmtree(temporary.parent, ignore_errors=True)


def file_digests(paths: Sequence[Path], root: Path) -> dict[str, str]:
    """sha256 of every file in ``paths`` (files, or folders walked in sorted order), keyed by
    the path relative to ``root``: what a saved index is checked against before it is loaded,
    so that a truncated or emptied file is rebuilt instead of crashing the library reading it.
    A path that does not exist is simply absent from the result."""
    digests: dict[str, str] = {}
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if not file.is_file():
                continue
            digest = hashlib.sha256()
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            digests[file.relative_to(root).as_posix()] = digest.hexdigest()
    return digests
