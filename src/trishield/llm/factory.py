"""Build a backend from a configuration mapping (a panel member in a config file).

Keys are checked strictly, and every error names the key at fault, because a typo in a
panel configuration would otherwise silently fall back to a default. API keys are never
written in the configuration: ``api_key_env`` names the environment variable that holds it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trishield.llm.base import ChatBackend, LLMError

OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
KINDS = ("openai", "anthropic", "ollama", "gguf")

_COMMON = {"kind", "model", "name", "vendor"}
_REMOTE = _COMMON | {"base_url", "api_key_env", "timeout", "max_retries", "backoff"}
_ALLOWED = {
    "openai": _REMOTE,
    "anthropic": _REMOTE,
    "ollama": _REMOTE - {"api_key_env"},
    "gguf": _COMMON | {"n_ctx", "n_threads"},
}


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


def backend_from_config(config: Mapping[str, Any]) -> ChatBackend:
    """``{"kind": "openai"|"anthropic"|"ollama"|"gguf", "model": ..., ...}`` -> a backend.

    ``ollama`` is the OpenAI-compatible endpoint of a local Ollama
    (``http://127.0.0.1:11434/v1`` unless ``base_url`` says otherwise); ``gguf`` is a local
    model, by registry name or file path; ``anthropic`` reads its key from ``api_key_env``
    (``ANTHROPIC_API_KEY`` by default).
    """
    if not isinstance(config, Mapping):
        raise LLMConfigError("kind", f"a backend config must be a mapping, got {config!r}")
    kind = config.get("kind")
    if kind not in KINDS:
        raise LLMConfigError("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    unknown = sorted(set(config) - _ALLOWED[kind])
    if unknown:
        raise LLMConfigError(unknown[0], f"is not a setting of kind {kind!r}; allowed: "
                                         f"{', '.join(sorted(_ALLOWED[kind]))}")
    model = _string(config, "model")
    if model is None:
        raise LLMConfigError("model", f"is required for kind {kind!r}")
    name, vendor = _string(config, "name"), _string(config, "vendor")

    if kind == "gguf":
        from trishield.llm.local import LocalGGUFBackend

        return LocalGGUFBackend(model, name=name, vendor=vendor,
                                n_ctx=_number(config, "n_ctx", 2048, integer=True, minimum=128),
                                n_threads=_number(config, "n_threads", 2, integer=True,
                                                  minimum=1))

    from trishield.llm.remote import AnthropicBackend, OpenAICompatibleBackend

    base_url = _string(config, "base_url", {"openai": OPENAI_BASE_URL, "ollama": OLLAMA_BASE_URL,
                                            "anthropic": ANTHROPIC_BASE_URL}[kind])
    assert base_url is not None
    if not base_url.startswith(("http://", "https://")):
        raise LLMConfigError("base_url", f"must start with http:// or https://, got {base_url!r}")
    http = {"timeout": _number(config, "timeout", 30.0, minimum=0.001),
            "max_retries": _number(config, "max_retries", 3, integer=True),
            "backoff": _number(config, "backoff", 0.5)}
    if kind == "anthropic":
        api_key = _api_key(config, "ANTHROPIC_API_KEY")
        assert api_key is not None
        return AnthropicBackend(model, api_key, base_url=base_url, name=name, vendor=vendor,
                                **http)
    api_key = _api_key(config, None) if kind == "openai" else None
    if kind == "ollama" and vendor is None:
        vendor = "Ollama"
    return OpenAICompatibleBackend(base_url, model, api_key, name=name, vendor=vendor, **http)
