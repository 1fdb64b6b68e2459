"""An on-disk cache of LLM responses, so that a repeated question costs nothing.

At temperature 0 with a fixed seed the same model file, messages and parameters give the same
answer, and on a CPU one answer costs seconds, so evaluations that ask the same questions
again (re-runs, ablations that change only Ring 1 or Ring 2) are served from here.

Layout: ``<directory>/<key[:2]>/<key>.json`` where ``key`` is the sha256 of the canonical JSON
of (backend identity, messages, parameters). Each entry is written to a temporary file and
renamed, so concurrent writers and interrupted runs never leave a half-written entry under
its final name; an entry that does not parse anyway is treated as a miss and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from trishield.config import cache_dir
from trishield.llm.base import ChatBackend, ChatMessage, GenerationParams, LLMResponse
from trishield.llm.context_budget import TokenCounter

RESPONSE_CACHE_ENV = "TRISHIELD_RESPONSE_CACHE"
_FORMAT = 1


def default_cache_dir() -> Path:
    """``$TRISHIELD_RESPONSE_CACHE``, else ``<trishield cache>/responses``."""
    configured = os.environ.get(RESPONSE_CACHE_ENV)
    return Path(configured).expanduser() if configured else cache_dir() / "responses"


def cache_key(identity: str, messages: list[ChatMessage], params: GenerationParams) -> str:
    """sha256 of the canonical JSON of everything that determines the answer."""
    payload = {"format": _FORMAT, "identity": identity,
               "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
               "params": params.as_dict()}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """One JSON file per response, sharded by the first two hex digits of the key."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMResponse | None:
        """The stored response, or None when absent or unreadable (a corrupt entry is a miss)."""
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
            if entry.get("key") != key:
                return None
            stored: dict[str, Any] = entry["response"]
            return LLMResponse(text=str(stored["text"]), model=str(stored["model"]),
                               prompt_tokens=int(stored["prompt_tokens"]),
                               completion_tokens=int(stored["completion_tokens"]),
                               seconds=float(stored["seconds"]), cached=True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, response: LLMResponse, *, identity: str = "") -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        entry = {"key": key, "identity": identity, "stored_at": time.time(),
                 "response": response.as_dict() | {"cached": False}}
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(entry, out, ensure_ascii=False, sort_keys=True)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.json"))


class CachedBackend:
    """A backend whose answers are looked up in a :class:`ResponseCache` first.

    ``seconds`` of a hit is the original call's time (what the answer cost to produce);
    ``cached=True`` says it was not paid again.
    """

    def __init__(self, backend: ChatBackend, cache: ResponseCache | None = None):
        self.backend = backend
        self.cache = cache if cache is not None else ResponseCache()
        self.name = backend.name
        self.vendor = backend.vendor
        self.identity = backend.identity
        # readers choose a prompt style from this; hiding it would change the prompt
        self.chat_template = getattr(backend, "chat_template", True)
        # the token counting of a backend that has it (the reader packs its context with it)
        if isinstance(backend, TokenCounter):
            self.context_window = backend.context_window
            self.count_prompt_tokens = backend.count_prompt_tokens
            self.count_text_tokens = backend.count_text_tokens

    def __repr__(self) -> str:
        return f"CachedBackend({self.backend!r}, {self.cache.directory})"

    def has_response(self, messages: list[ChatMessage], params: GenerationParams) -> bool:
        """Whether these messages are answered from the cache: a stored answer proves they
        fitted the model's window, so the reader need not load the model to count them."""
        return self.cache.get(cache_key(self.identity, messages, params)) is not None

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        key = cache_key(self.identity, messages, params)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        response = self.backend.chat(messages, params)
        self.cache.put(key, response, identity=self.identity)
        return response
