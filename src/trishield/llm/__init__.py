"""LLM backends for the Ring 3 panel and the readers that turn passages into an answer.

Backends (all :class:`ChatBackend`): :class:`LocalGGUFBackend` (llama.cpp in-process),
:class:`OpenAICompatibleBackend`, :class:`AnthropicBackend`, and :class:`CachedBackend`, which
serves repeated calls from an on-disk :class:`ResponseCache`. Readers: :class:`LLMReader`
(a backend behind a short RAG prompt) and :class:`ExtractiveReader` (no LLM, deterministic).
Heavy imports (xllamacpp, httpx) happen only when a backend of that kind is built.
"""

from trishield.llm.base import (
    NO_ANSWER,
    ChatBackend,
    ChatMessage,
    GenerationParams,
    LLMError,
    LLMResponse,
    Passage,
    Reader,
    ReaderAnswer,
)
from trishield.llm.cache import CachedBackend, ResponseCache
from trishield.llm.extractive import ExtractiveReader
from trishield.llm.factory import LLMConfigError, backend_from_config
from trishield.llm.reader import LLMReader

__all__ = [
    "NO_ANSWER",
    "AnthropicBackend",
    "CachedBackend",
    "ChatBackend",
    "ChatMessage",
    "ExtractiveReader",
    "GenerationParams",
    "LLMConfigError",
    "LLMError",
    "LLMReader",
    "LLMResponse",
    "LocalGGUFBackend",
    "OpenAICompatibleBackend",
    "Passage",
    "Reader",
    "ReaderAnswer",
    "ResponseCache",
    "backend_from_config",
]


def __getattr__(name: str):
    """Load the backend modules (and their libraries) only when one is asked for."""
    if name == "LocalGGUFBackend":
        from trishield.llm.local import LocalGGUFBackend

        return LocalGGUFBackend
    if name in ("OpenAICompatibleBackend", "AnthropicBackend"):
        from trishield.llm import remote

        return getattr(remote, name)
    raise AttributeError(f"module 'trishield.llm' has no attribute {name!r}")
