"""Registries: one place per extension category, and every name list reads from it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from trishield.cli import cli
from trishield.defenses import DEFENSES
from trishield.errors import InputError
from trishield.kb.indexes.retrieval import BACKENDS, RETRIEVAL_BACKENDS
from trishield.llm.base import LLMResponse
from trishield.llm.factory import KINDS, LLM_KINDS, LLMConfigError, backend_from_config
from trishield.registry import Registry


def test_registry_refuses_duplicates_and_names_the_choices() -> None:
    registry: Registry[int] = Registry("widget", group="trishield.test_widgets")
    registry.add("a", 1, colour="red")
    registry.add("b", 2, colour="blue")
    with pytest.raises(ValueError, match="registered twice"):
        registry.add("a", 3)
    with pytest.raises(InputError, match="unknown widget 'c'; choose from a, b"):
        registry.get("c")
    assert registry.names() == ("a", "b") and registry.names(colour="blue") == ("b",)
    assert "a" in registry and registry.entry("a").meta == {"colour": "red"}


def test_builtin_modules_load_lazily_on_first_lookup() -> None:
    registry: Registry[int] = Registry("lazy", group="trishield.test_lazy",
                                       builtin_modules=("trishield.no_such_module",))
    with pytest.raises(ModuleNotFoundError):
        registry.names()


def test_the_defense_registry_holds_trishield_and_the_baselines() -> None:
    assert DEFENSES.names(suite="trishield") == ("none", "ring1", "ring2", "ring3", "ring12",
                                                  "full")
    assert DEFENSES.names(suite="baseline") == (
        "perplexity-filter", "paraphrase", "expansion-k50", "ragdefender-top5",
        "ragdefender-pool20", "robustrag-keyword")
    assert DEFENSES.entry("full").meta["rings"] == frozenset({1, 2, 3})


def test_cli_choices_come_from_the_registries() -> None:
    text = CliRunner().invoke(cli, ["ask", "--help"]).output
    assert "[" + "|".join(DEFENSES.names(suite="trishield")) + "]" in text
    assert "[" + "|".join(BACKENDS) + "]" in text
    assert BACKENDS == RETRIEVAL_BACKENDS.names() == ("dense", "bm25", "hybrid")


def test_a_registered_llm_kind_is_accepted_by_the_panel_config() -> None:
    class EchoBackend:  # a test double for an external API: it only echoes
        vendor = "nobody"

        def __init__(self, model: str):
            self.name = self.identity = model

        def chat(self, messages, params) -> LLMResponse:
            return LLMResponse(messages[-1]["content"], self.name, 1, 1, 0.0)

    assert KINDS == ("openai", "anthropic", "ollama", "gguf")
    with pytest.raises(LLMConfigError, match="must be one of openai, anthropic, ollama, gguf"):
        backend_from_config({"kind": "echo", "model": "m"})
    LLM_KINDS.add("echo", lambda config: EchoBackend(config["model"]),
                  keys=frozenset({"kind", "model"}))
    try:
        backend = backend_from_config({"kind": "echo", "model": "m"})
        assert backend.name == "m"
        with pytest.raises(LLMConfigError, match="'base_url': is not a setting of kind 'echo'"):
            backend_from_config({"kind": "echo", "model": "m", "base_url": "http://x"})
    finally:
        LLM_KINDS._entries.pop("echo")
