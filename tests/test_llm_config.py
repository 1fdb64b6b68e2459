"""backend_from_config: strict validation that names the key at fault."""

from __future__ import annotations

import pytest

from trishield.errors import ModelError
from trishield.llm import LLMConfigError, backend_from_config
from trishield.llm.local import LocalGGUFBackend
from trishield.llm.remote import AnthropicBackend, OpenAICompatibleBackend
from trishield.models.gguf import GGUF_MODELS


@pytest.mark.parametrize(("config", "key"), [
    ({}, "kind"),
    ({"kind": "gpt"}, "kind"),
    ({"kind": "openai"}, "model"),
    ({"kind": "openai", "model": ""}, "model"),
    ({"kind": "openai", "model": "m", "temprature": 0}, "temprature"),
    ({"kind": "ollama", "model": "m", "api_key_env": "X"}, "api_key_env"),
    ({"kind": "gguf", "model": "qwen2.5-0.5b", "base_url": "http://x"}, "base_url"),
    ({"kind": "openai", "model": "m", "base_url": "ftp://host"}, "base_url"),
    ({"kind": "openai", "model": "m", "timeout": "fast"}, "timeout"),
    ({"kind": "openai", "model": "m", "max_retries": -1}, "max_retries"),
    ({"kind": "openai", "model": "m", "max_retries": True}, "max_retries"),
    ({"kind": "gguf", "model": "qwen2.5-0.5b", "n_ctx": 16}, "n_ctx"),
    ({"kind": "gguf", "model": "qwen2.5-0.5b", "n_threads": 1.5}, "n_threads"),
])
def test_invalid_configs_name_the_key(config: dict, key: str) -> None:
    with pytest.raises(LLMConfigError) as caught:
        backend_from_config(config)
    assert caught.value.key == key
    assert repr(key) in str(caught.value)


def test_missing_api_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRISHIELD_TEST_KEY", raising=False)
    with pytest.raises(LLMConfigError) as caught:
        backend_from_config({"kind": "openai", "model": "gpt-4o-mini",
                             "api_key_env": "TRISHIELD_TEST_KEY"})
    assert caught.value.key == "api_key_env" and "TRISHIELD_TEST_KEY" in str(caught.value)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        backend_from_config({"kind": "anthropic", "model": "claude-3-5-haiku-latest"})


def test_remote_kinds_build_the_right_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRISHIELD_TEST_KEY", "secret")
    openai = backend_from_config({"kind": "openai", "model": "gpt-4o-mini",
                                  "api_key_env": "TRISHIELD_TEST_KEY", "max_retries": 1})
    assert isinstance(openai, OpenAICompatibleBackend)
    assert openai.identity == "openai-compatible|https://api.openai.com/v1|gpt-4o-mini"
    assert openai.vendor == "OpenAI" and openai.max_retries == 1
    ollama = backend_from_config({"kind": "ollama", "model": "llama3.2", "name": "llama"})
    assert ollama.identity == "openai-compatible|http://127.0.0.1:11434/v1|llama3.2"
    assert ollama.name == "llama" and ollama.vendor == "Ollama"
    anthropic = backend_from_config({"kind": "anthropic", "model": "claude-3-5-haiku-latest",
                                     "api_key_env": "TRISHIELD_TEST_KEY"})
    assert isinstance(anthropic, AnthropicBackend) and anthropic.vendor == "Anthropic"


def test_gguf_kind_builds_a_lazy_local_backend() -> None:
    backend = backend_from_config({"kind": "gguf", "model": "qwen2.5-0.5b", "n_ctx": 1024})
    assert isinstance(backend, LocalGGUFBackend)  # nothing loaded yet
    assert backend.identity == GGUF_MODELS["qwen2.5-0.5b"].sha256
    assert backend.vendor == "Alibaba" and backend.n_ctx == 1024


def test_gguf_kind_with_a_missing_file_is_a_model_error(tmp_path) -> None:
    with pytest.raises(ModelError, match="neither a known GGUF model"):
        backend_from_config({"kind": "gguf", "model": str(tmp_path / "nope.gguf")})
