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
DEFAULT_PANEL: tuple[str, ...] = ("qwen2.5-1.5b", "gemma3-270m", EXTRACTIVE)
"""Three vendors and architectures that run on 2 CPU cores: Alibaba's Qwen2.5 1.5B (chat; the
reader of every benign question, the gate convenes the rest on doubt), Google's Gemma 3 270M (a
base model, few-shot prompt) and TriShield's extractive reader, which cannot be
instruction-injected. The reader was chosen on the documentation QA set's dev half (40
questions spread over its genres, `full`, hybrid retrieval, sections chunking): Qwen2.5 1.5B
answered 31 right (0.775) against 21 (0.525) for Qwen2.5 0.5B, at about twice the seconds per
question (docs/answers.md, "The reader"). :data:`FAST_PANEL` is the faster profile."""

FAST_PANEL: tuple[str, ...] = ("qwen2.5-0.5b", "gemma3-270m", EXTRACTIVE)
"""The fast profile (``[panel] members`` in a config file, ``--panel`` on the command line):
Qwen2.5 0.5B reads, the 1.5B is its second reader; about half the seconds per answer and a
third fewer right answers on documentation."""

DEFAULT_SECOND_READER: str | None = "qwen2.5-1.5b"
"""Ring 3's second reader (asked only where the panel's answer is in no passage): the
strongest model that ships in a package and runs on 2 CPU cores. On the benchmark's 100 target
questions without poisons (mini KB) it cut full TriShield's refusals from 9 to 4 and raised
accuracy from 46 to 48 at 1.11 LLM calls per query (docs/design/ring3-consensus.md, "The second
reader")."""
NO_SECOND_READER = "none"
"""What the config file and ``--second-reader`` write for no second reader."""

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


def build_second_reader(spec: MemberSpec | None, *, use_cache: bool = True) -> Reader | None:
    """Ring 3's second reader from its specification (``None``: there is none)."""
    if spec is None:
        return None
    return build_reader(spec, cache=ResponseCache() if use_cache else None)


def second_reader_choice(option: str | None, *, panel_given: bool,
                         configured: str | None) -> str | None:
    """The second reader a command uses: ``--second-reader`` when given (``none``: no second
    reader); else none when ``--panel`` replaced the panel (the command line names every
    reader); else the configured one."""
    if option is not None:
        name = option.strip()
        if not name:
            raise InputError("--second-reader: give a model name, or none")
        return None if name == NO_SECOND_READER else name
    return None if panel_given else configured


def parse_panel_option(value: str) -> list[str]:
    """``--panel a,b,c`` -> ``["a", "b", "c"]`` with empty names rejected."""
    names = [part.strip() for part in value.split(",")]
    if not value.strip() or any(not name for name in names):
        raise InputError(f"--panel {value!r}: give comma-separated member names")
    return names
