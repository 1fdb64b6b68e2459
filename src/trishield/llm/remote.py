"""Remote chat backends: any OpenAI-compatible server (OpenAI, vLLM, llama-server, Ollama)
and Anthropic's Messages API.

Remote calls fail in ordinary ways (a dropped connection, a rate limit, an overloaded server),
so transient failures (connect errors, timeouts, 429 and 5xx) are retried with exponential
backoff, honouring ``Retry-After``; other 4xx mean the request itself is wrong and are
reported at once. Every error names the URL, the HTTP status and the server's own message,
never the API key.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from trishield.llm.base import (
    ChatMessage,
    GenerationParams,
    LLMError,
    LLMResponse,
    validate_messages,
)

ANTHROPIC_VERSION = "2023-06-01"
MAX_RETRY_AFTER = 60.0  # seconds; a server asking for longer is treated as down
_sleep = time.sleep  # the one place a retry waits (tests replace it to record the delays)


def _server_message(response: httpx.Response) -> str:
    """The error text the server sent, from the usual JSON shapes or the raw body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if body.get("message"):
            return str(body["message"])
    return str(body)[:300]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _HTTPChatBackend:
    """POST JSON with retries; subclasses build the request and parse the reply."""

    name: str
    vendor: str
    identity: str

    def __init__(self, base_url: str, *, timeout: float = 30.0, max_retries: int = 3,
                 backoff: float = 0.5, headers: dict[str, str] | None = None):
        if max_retries < 0 or backoff < 0 or timeout <= 0:
            raise LLMError("timeout must be > 0, max_retries and backoff >= 0")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = backoff
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers or {},
                                    follow_redirects=False)

    def close(self) -> None:
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        asked = _retry_after(response) if response is not None else None
        if asked is not None:
            return min(asked, MAX_RETRY_AFTER)
        return self.backoff * (2 ** attempt)

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``url`` and return the JSON object it answers, retrying transients."""
        failure = ""
        for attempt in range(self.max_retries + 1):
            response = None
            try:
                response = self._client.post(url, json=body)
            except httpx.TimeoutException:
                failure = f"timed out after {self._client.timeout.read}s"
            except httpx.TransportError as error:  # connect errors, dropped connections
                failure = f"could not connect ({type(error).__name__}: {error})"
            else:
                if response.status_code < 300:
                    return self._json(url, response)
                failure = f"HTTP {response.status_code}: {_server_message(response)}"
                if response.status_code != 429 and response.status_code < 500:
                    raise LLMError(f"{self.name}: POST {url} failed with {failure}")
            if attempt < self.max_retries:
                _sleep(self._delay(attempt, response))
        raise LLMError(f"{self.name}: POST {url} failed after {self.max_retries + 1} "
                       f"attempt(s); last error: {failure}")

    def _json(self, url: str, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise LLMError(f"{self.name}: POST {url} returned HTTP {response.status_code} "
                           f"with a body that is not JSON: {response.text[:200]!r}") from None
        if not isinstance(body, dict):
            raise LLMError(f"{self.name}: POST {url} returned JSON that is not an object")
        return body


class OpenAICompatibleBackend(_HTTPChatBackend):
    """``POST {base_url}/chat/completions`` as OpenAI defines it (Bearer auth if a key)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = 30.0, max_retries: int = 3, backoff: float = 0.5, *,
                 name: str | None = None, vendor: str | None = None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                         headers=headers)
        self.model = model
        self.name = name or model
        host = urlsplit(self.base_url).hostname or self.base_url
        self.vendor = vendor or ("OpenAI" if host == "api.openai.com" else host)
        self.identity = f"openai-compatible|{self.base_url}|{model}"

    def __repr__(self) -> str:
        return f"OpenAICompatibleBackend({self.base_url!r}, {self.model!r})"

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        body: dict[str, Any] = {
            "model": self.model, "messages": validate_messages(messages),
            "temperature": params.temperature, "max_tokens": params.max_tokens,
            "seed": params.seed, "stream": False,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        url = f"{self.base_url}/chat/completions"
        started = time.perf_counter()
        reply = self._post(url, body)
        seconds = time.perf_counter() - started
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"{self.name}: POST {url} returned no choices[0].message.content: "
                           f"{str(reply)[:200]}") from None
        if not isinstance(text, str):
            raise LLMError(f"{self.name}: POST {url} returned a non-text message content")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        return LLMResponse(text=text, model=str(reply.get("model") or self.model),
                           prompt_tokens=int(usage.get("prompt_tokens") or 0),
                           completion_tokens=int(usage.get("completion_tokens") or 0),
                           seconds=seconds, cached=False)


class AnthropicBackend(_HTTPChatBackend):
    """Anthropic's ``POST /v1/messages``; system messages go to the top-level ``system``."""

    def __init__(self, model: str, api_key: str, *, base_url: str = "https://api.anthropic.com",
                 timeout: float = 30.0, max_retries: int = 3, backoff: float = 0.5,
                 name: str | None = None, vendor: str | None = None):
        if not api_key:
            raise LLMError("AnthropicBackend needs an API key")
        headers = {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}
        super().__init__(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                         headers=headers)
        self.model = model
        self.name = name or model
        self.vendor = vendor or "Anthropic"
        self.identity = f"anthropic|{self.base_url}|{model}"

    def __repr__(self) -> str:
        return f"AnthropicBackend({self.base_url!r}, {self.model!r})"

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        checked = validate_messages(messages)
        system = "\n\n".join(m["content"] for m in checked if m["role"] == "system")
        turns = [m for m in checked if m["role"] != "system"]
        if not turns:
            raise LLMError(f"{self.name}: Anthropic needs at least one user message")
        body: dict[str, Any] = {"model": self.model, "messages": turns,
                                "max_tokens": params.max_tokens,
                                "temperature": params.temperature}
        if system:
            body["system"] = system
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        url = f"{self.base_url}/v1/messages"
        started = time.perf_counter()
        reply = self._post(url, body)
        seconds = time.perf_counter() - started
        blocks = reply.get("content")
        if not isinstance(blocks, list) or not blocks:
            raise LLMError(f"{self.name}: POST {url} returned no content blocks: "
                           f"{str(reply)[:200]}")
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise LLMError(f"{self.name}: POST {url} returned no text content block")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        return LLMResponse(text="".join(texts), model=str(reply.get("model") or self.model),
                           prompt_tokens=int(usage.get("input_tokens") or 0),
                           completion_tokens=int(usage.get("output_tokens") or 0),
                           seconds=seconds, cached=False)
