"""Assembling the Ring 3 panel from member specifications.

A member is named by a string (a registry GGUF model such as ``qwen2.5-0.5b``, a path to any
``.gguf`` file, or ``extractive``) or by a mapping for a remote or Ollama backend (see
:func:`trishield.llm.factory.backend_from_config`). Every LLM member goes through the on-disk
response cache, so evaluation re-runs are fast and give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trishield.errors import InputError
from trishield.llm.base import Reader
from trishield.llm.cache import CachedBackend, ResponseCache
from trishield.llm.extractive import ExtractiveReader
from trishield.llm.factory import backend_from_config
from trishield.llm.reader import LLMReader

EXTRACTIVE = "extractive"
DEFAULT_PANEL: tuple[str, ...] = ("qwen2.5-0.5b", "gemma3-270m", "smollm2-135m")
"""Three vendors and architectures that run on 2 CPU cores: Alibaba's Qwen2.5 (chat), Google's
Gemma 3 (a base model, few-shot prompt) and Hugging Face's SmolLM2 (chat). Measured on a
5-question RAG check: each 4/5 alone, with errors that differ between vendors; about 8-10 s per
question for the three. The extractive reader (``extractive``) can join as a fourth voter that
cannot be instruction-injected, but it answers with whole sentences and scored 2/5."""

MemberSpec = str | Mapping[str, Any]


def build_reader(spec: MemberSpec, *, cache: ResponseCache | None) -> Reader:
    """One panel member from its specification."""
    if isinstance(spec, Mapping):
        backend = backend_from_config(spec)
    elif spec == EXTRACTIVE:
        return ExtractiveReader()
    else:
        from trishield.llm.local import LocalGGUFBackend
        from trishield.models.gguf import GGUF_MODELS

        if spec not in GGUF_MODELS and not (spec.endswith(".gguf") and Path(spec).is_file()):
            known = ", ".join([*GGUF_MODELS, EXTRACTIVE])
            raise InputError(f"unknown panel member {spec!r}: use one of {known}, a path to "
                             "a .gguf file, or a backend table in the config file")
        backend = LocalGGUFBackend(spec)
    if cache is not None:
        backend = CachedBackend(backend, cache)
    return LLMReader(backend)


def build_panel(specs: Sequence[MemberSpec] = DEFAULT_PANEL, *,
                use_cache: bool = True) -> list[Reader]:
    if not specs:
        raise InputError("the panel is empty: name at least one member")
    cache = ResponseCache() if use_cache else None
    return [build_reader(spec, cache=cache) for spec in specs]


def parse_panel_option(value: str) -> list[str]:
    """``--panel a,b,c`` -> ``["a", "b", "c"]`` with empty names rejected."""
    names = [part.strip() for part in value.split(",")]
    if not value.strip() or any(not name for name in names):
        raise InputError(f"--panel {value!r}: give comma-separated member names")
    return names
