"""What the Ring 1 benchmarks share: real knowledge bases, built fast without changing a
verdict.

``benchmarks/studies/ring1_outlier.py`` and ``benchmarks/ring1_tamper.py`` ingest the same
texts into many copies of one base KB. One shortcut keeps that to minutes on two busy cores, and no
verdict reads it: each distinct text is embedded once per run (the real embedder, cached
across KB copies). (The BM25 index is SQLite's FTS5 now, written with the rows: nothing is
rebuilt per ingest any more, so there is no BM25 build left to skip.)
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import trishield.kb.knowledge_base as knowledge_base
from trishield.models import load_embedder


class CachedEmbedder:
    """The real embedder, each distinct text encoded once per run."""

    def __init__(self, name: str):
        self.inner = load_embedder(name)
        self.cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], **options) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.inner.encode(missing), strict=True))
        if not texts:
            return np.zeros((0, self.inner.dimension), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


def use_fast_kbs() -> CachedEmbedder:
    """From now on in this process, every ``KnowledgeBase`` embeds through one cached real
    embedder; returns the embedder."""
    embedder = CachedEmbedder(knowledge_base.DEFAULT_EMBEDDING_MODEL)
    knowledge_base.load_embedder = lambda name: embedder
    return embedder


def copy_kb(base: Path, work: Path, name: str) -> Path:
    """A copy of the KB at ``base`` as ``work/name`` (without its lock file)."""
    return Path(shutil.copytree(base, work / name, ignore=shutil.ignore_patterns("kb.lock")))
