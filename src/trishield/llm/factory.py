"""Build a backend from a configuration mapping (a panel member in a config file).

Keys are checked strictly, and every error names the key at fault, because a typo in a
panel configuration would otherwise silently fall back to a default. API keys are never
written in the configuration: ``api_key_env`` names the environment variable that holds it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from trishield.llm.base import ChatBackend, LLMError
from trishield.registry import Registry

OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"

_COMMON = frozenset({"kind", "model", "name", "vendor"})
_REMOTE = _COMMON | {"base_url", "api_key_env", "timeout", "max_retries", "backoff"}

BackendBuilder = Callable[[Mapping[str, Any]], ChatBackend]
LLM_KINDS: Registry[BackendBuilder] = Registry("LLM backend kind", group="trishield.llm_kinds")
"""``kind`` of a panel member's config table -> a builder; ``keys`` in its metadata are the
settings that kind accepts. Third-party kinds register through the entry-point group
``trishield.llm_kinds``."""


class LLMConfigError(LLMError):
    """A backend configuration is invalid; ``key`` is the offending key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"LLM backend config: {key!r}: {message}")


def _string(config: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = config.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise LLMConfigError(key, f"must be a non-empty string, got {value!r}")
    return value.strip()


def _number(config: Mapping[str, Any], key: str, default: float, *, integer: bool = False,
            minimum: float = 0) -> Any:
    value = config.get(key, default)
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
        what = "an integer" if integer else "a number"
        raise LLMConfigError(key, f"must be {what} >= {minimum}, got {value!r}")
    return value


def _api_key(config: Mapping[str, Any], default_env: str | None) -> str | None:
    variable = _string(config, "api_key_env", default_env)
    if variable is None:
        return None
    value = os.environ.get(variable, "")
    if not value:
        raise LLMConfigError("api_key_env", f"environment variable {variable} is not set")
    return value


def check_backend_config(config: Mapping[str, Any]) -> None:
    """Validate a backend table as :func:`backend_from_config` would, without building it (no
    model loaded, no API key read): ``trishield config check`` names the key at fault."""
    if not isinstance(config, Mapping):
        raise LLMConfigError("kind", f"a backend config must be a mapping, got {config!r}")
    kind = config.get("kind")
    if not isinstance(kind, str) or kind not in LLM_KINDS:
        raise LLMConfigError("kind", f"must be one of {', '.join(LLM_KINDS.names())}, "
                                     f"got {kind!r}")
    unknown = sorted(set(config) - LLM_KINDS.entry(kind).meta["keys"])
    if unknown:
        raise LLMConfigError(unknown[0], f"is not a setting of kind {kind!r}; allowed: "
                                         f"{', '.join(sorted(LLM_KINDS.entry(kind).meta['keys']))}")
    if _string(config, "model") is None:
        raise LLMConfigError("model", f"is required for kind {kind!r}")


def backend_from_config(config: Mapping[str, Any]) -> ChatBackend:
    """``{"kind": "openai"|"anthropic"|"ollama"|"gguf"|..., "model": ..., ...}`` -> a backend.

    The kind is looked up in :data:`LLM_KINDS`; keys it does not accept are refused, naming
    the key, because a typo would otherwise silently fall back to a default.
    """
    check_backend_config(config)
    return LLM_KINDS.entry(config["kind"]).value(config)


def _base_url(config: Mapping[str, Any], default: str) -> str:
    base_url = _string(config, "base_url", default)
    assert base_url is not None
    if not base_url.startswith(("http://", "https://")):
        raise LLMConfigError("base_url", f"must start with http:// or https://, got {base_url!r}")
    return base_url


def _http(config: Mapping[str, Any]) -> dict[str, Any]:
    return {"timeout": _number(config, "timeout", 30.0, minimum=0.001),
            "max_retries": _number(config, "max_retries", 3, integer=True),
            "backoff": _number(config, "backoff", 0.5)}


@LLM_KINDS.register("openai", keys=_REMOTE, summary="an OpenAI-compatible chat endpoint")
def build_openai(config: Mapping[str, Any]) -> ChatBackend:
    from trishield.llm.remote import OpenAICompatibleBackend

    base_url = _base_url(config, OPENAI_BASE_URL)
    http = _http(config)
    return OpenAICompatibleBackend(base_url, _string(config, "model"), _api_key(config, None),
                                   name=_string(config, "name"),
                                   vendor=_string(config, "vendor"), **http)


@LLM_KINDS.register("anthropic", keys=_REMOTE,
                    summary="Anthropic's Messages API (key in ANTHROPIC_API_KEY by default)")
def build_anthropic(config: Mapping[str, Any]) -> ChatBackend:
    from trishield.llm.remote import AnthropicBackend

    base_url = _base_url(config, ANTHROPIC_BASE_URL)
    http = _http(config)
    api_key = _api_key(config, "ANTHROPIC_API_KEY")
    assert api_key is not None
    return AnthropicBackend(_string(config, "model"), api_key, base_url=base_url,
                            name=_string(config, "name"), vendor=_string(config, "vendor"),
                            **http)


@LLM_KINDS.register("ollama", keys=_REMOTE - {"api_key_env"},
                    summary="a local Ollama's OpenAI-compatible endpoint")
def build_ollama(config: Mapping[str, Any]) -> ChatBackend:
    from trishield.llm.remote import OpenAICompatibleBackend

    base_url = _base_url(config, OLLAMA_BASE_URL)
    http = _http(config)
    return OpenAICompatibleBackend(base_url, _string(config, "model"), None,
                                   name=_string(config, "name"),
                                   vendor=_string(config, "vendor") or "Ollama", **http)


@LLM_KINDS.register("gguf", keys=_COMMON | {"n_ctx", "n_threads"},
                    summary="a local GGUF model (registry name or file path), llama.cpp")
def build_gguf(config: Mapping[str, Any]) -> ChatBackend:
    from trishield.llm.local import LocalGGUFBackend

    return LocalGGUFBackend(_string(config, "model"), name=_string(config, "name"),
                            vendor=_string(config, "vendor"),
                            n_ctx=_number(config, "n_ctx", 2048, integer=True, minimum=128),
                            n_threads=_number(config, "n_threads", 2, integer=True, minimum=1))


KINDS: tuple[str, ...] = LLM_KINDS.names()
"""The registered kinds (the built-in four, in registration order)."""
