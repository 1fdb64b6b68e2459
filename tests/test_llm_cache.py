"""ResponseCache and CachedBackend, with a counting test double in place of a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from trishield.llm import CachedBackend, GenerationParams, LLMResponse, ResponseCache
from trishield.llm.base import ChatMessage
from trishield.llm.cache import RESPONSE_CACHE_ENV, cache_key, default_cache_dir

MESSAGES = [{"role": "user", "content": "Where is the Eiffel Tower?"}]


class CountingBackend:
    """A stand-in model that answers by rule and counts how often it is really called."""

    name = "counting"
    vendor = "Test"

    def __init__(self, identity: str = "sha256-of-some-file"):
        self.identity = identity
        self.calls = 0

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        self.calls += 1
        return LLMResponse(text=f"answer to {messages[-1]['content']} ({params.max_tokens})",
                           model=self.name, prompt_tokens=7, completion_tokens=3,
                           seconds=1.25, cached=False)


def test_second_call_is_a_hit_with_identical_text(tmp_path: Path) -> None:
    backend = CountingBackend()
    cached = CachedBackend(backend, ResponseCache(tmp_path))
    first = cached.chat(MESSAGES, GenerationParams())
    second = cached.chat(MESSAGES, GenerationParams())
    assert backend.calls == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text
    assert (second.prompt_tokens, second.completion_tokens, second.seconds) == (7, 3, 1.25)
    assert (cached.name, cached.vendor, cached.identity) == ("counting", "Test",
                                                             backend.identity)


def test_key_covers_identity_messages_and_every_parameter(tmp_path: Path) -> None:
    base = cache_key("a", MESSAGES, GenerationParams())
    assert base == cache_key("a", [dict(MESSAGES[0])], GenerationParams())
    assert base != cache_key("b", MESSAGES, GenerationParams())
    assert base != cache_key("a", [{"role": "system", "content": MESSAGES[0]["content"]}],
                             GenerationParams())
    for changed in (GenerationParams(temperature=0.5), GenerationParams(max_tokens=65),
                    GenerationParams(seed=1), GenerationParams(stop=("\n",))):
        assert base != cache_key("a", MESSAGES, changed)
    backend = CountingBackend()
    cached = CachedBackend(backend, ResponseCache(tmp_path))
    cached.chat(MESSAGES, GenerationParams())
    cached.chat(MESSAGES, GenerationParams(max_tokens=8))
    assert backend.calls == 2
    other_model = CachedBackend(CountingBackend("another-file"), ResponseCache(tmp_path))
    assert other_model.chat(MESSAGES, GenerationParams()).cached is False


def test_entries_are_sharded_json_files_with_no_temporaries_left(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    CachedBackend(CountingBackend(), cache).chat(MESSAGES, GenerationParams())
    key = cache_key("sha256-of-some-file", MESSAGES, GenerationParams())
    assert cache.path(key) == tmp_path / key[:2] / f"{key}.json"
    assert cache.path(key).is_file() and len(cache) == 1
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{key}.json"]


@pytest.mark.parametrize("damage", ["", "{not json", '{"key": "x"}', "[1, 2]",
                                    '{"key": "KEY", "response": {"text": "t"}}'])
def test_corrupted_entry_is_a_miss_and_is_rewritten(tmp_path: Path, damage: str) -> None:
    backend = CountingBackend()
    cache = ResponseCache(tmp_path)
    cached = CachedBackend(backend, cache)
    first = cached.chat(MESSAGES, GenerationParams())
    path = cache.path(cache_key(backend.identity, MESSAGES, GenerationParams()))
    path.write_text(damage.replace("KEY", path.stem))
    again = cached.chat(MESSAGES, GenerationParams())
    assert backend.calls == 2 and again.cached is False and again.text == first.text
    assert cached.chat(MESSAGES, GenerationParams()).cached is True  # rewritten
    assert backend.calls == 2


def test_default_directory_follows_the_environment(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESPONSE_CACHE_ENV, str(tmp_path / "responses-here"))
    assert default_cache_dir() == tmp_path / "responses-here"
    assert ResponseCache().directory == tmp_path / "responses-here"
    monkeypatch.delenv(RESPONSE_CACHE_ENV)
    monkeypatch.setenv("TRISHIELD_CACHE_DIR", str(tmp_path / "cache"))
    assert default_cache_dir() == tmp_path / "cache" / "responses"
