"""Remote backends against real local HTTP servers that speak each protocol.

``FakeOpenAIServer`` and ``FakeAnthropicServer`` are test doubles of paid APIs: real HTTP
servers on 127.0.0.1 (port 0) that answer from a script and record every request, so the
backends are exercised over a real socket, with real timeouts and real status codes.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from trishield.llm import remote
from trishield.llm.base import GenerationParams, LLMError
from trishield.llm.remote import AnthropicBackend, OpenAICompatibleBackend

MESSAGES = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Where is the Eiffel Tower?"}]
PARAMS = GenerationParams(max_tokens=16, stop=("\n",))


@dataclass
class Reply:
    """One scripted answer: status, body (dict -> JSON, str/bytes sent as is), headers, delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _FakeServer:
    """A real HTTP server in a thread; replies follow ``script`` (the last one repeats)."""

    def __init__(self, script: list[Reply]):
        self.script = list(script)
        self.requests: list[Recorded] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                fake.requests.append(Recorded("POST", self.path,
                                              {k.lower(): v for k, v in self.headers.items()},
                                              body))
                reply = fake.script[min(len(fake.requests), len(fake.script)) - 1]
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body
                if isinstance(payload, (dict, list)):
                    payload = json.dumps(payload)
                data = payload.encode() if isinstance(payload, str) else (payload or b"")
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class FakeOpenAIServer(_FakeServer):
    """Speaks OpenAI's chat-completions protocol (test double of a paid API)."""

    @staticmethod
    def completion(text: str, prompt_tokens: int = 12, completion_tokens: int = 3) -> dict:
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": "fake-gpt",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    @staticmethod
    def error(message: str, kind: str = "invalid_request_error") -> dict:
        return {"error": {"message": message, "type": kind}}


class FakeAnthropicServer(_FakeServer):
    """Speaks Anthropic's Messages protocol (test double of a paid API)."""

    @staticmethod
    def message(*texts: str) -> dict:
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake-claude",
                "content": [{"type": "text", "text": t} for t in texts],
                "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 4}}

    @staticmethod
    def error(message: str, kind: str = "invalid_request_error") -> dict:
        return {"type": "error", "error": {"type": kind, "message": message}}


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Record the backoff delays instead of waiting them out."""
    recorded: list[float] = []
    monkeypatch.setattr(remote, "_sleep", recorded.append)
    yield recorded


def openai(server: _FakeServer, **kwargs: Any) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(server.url + "/v1", "fake-gpt", kwargs.pop("api_key", "sk-test"),
                                   **kwargs)


def test_openai_success_sends_model_messages_and_bearer_auth() -> None:
    with FakeOpenAIServer([Reply(body=FakeOpenAIServer.completion("Paris"))]) as server:
        backend = openai(server)
        response = backend.chat(MESSAGES, PARAMS)
    assert response.text == "Paris"
    assert (response.prompt_tokens, response.completion_tokens) == (12, 3)
    assert response.cached is False and response.model == "fake-gpt"
    assert backend.identity == f"openai-compatible|{server.url}/v1|fake-gpt"
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "fake-gpt"
    assert request.body["messages"] == MESSAGES
    assert request.body["max_tokens"] == 16 and request.body["temperature"] == 0.0
    assert request.body["seed"] == 0 and request.body["stop"] == ["\n"]


def test_openai_without_key_sends_no_auth_header() -> None:
    with FakeOpenAIServer([Reply(body=FakeOpenAIServer.completion("Paris"))]) as server:
        openai(server, api_key=None).chat(MESSAGES, PARAMS)
    assert "authorization" not in server.requests[0].headers


def test_anthropic_success_moves_system_to_top_level_field() -> None:
    reply = Reply(body=FakeAnthropicServer.message("Par", "is"))
    with FakeAnthropicServer([reply]) as server:
        backend = AnthropicBackend("fake-claude", "key-123", base_url=server.url)
        response = backend.chat(MESSAGES, PARAMS)
    assert response.text == "Paris"
    assert (response.prompt_tokens, response.completion_tokens) == (20, 4)
    assert backend.vendor == "Anthropic"
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "key-123"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.body["system"] == "Answer briefly."
    assert request.body["messages"] == [MESSAGES[1]]
    assert request.body["model"] == "fake-claude" and request.body["max_tokens"] == 16
    assert request.body["stop_sequences"] == ["\n"]


def test_429_then_200_retries_after_the_servers_retry_after(sleeps: list[float]) -> None:
    script = [Reply(429, FakeOpenAIServer.error("slow down", "rate_limit"),
                    headers={"Retry-After": "1.5"}),
              Reply(body=FakeOpenAIServer.completion("Paris"))]
    with FakeOpenAIServer(script) as server:
        response = openai(server, backoff=7.0).chat(MESSAGES, PARAMS)
    assert response.text == "Paris"
    assert len(server.requests) == 2
    assert sleeps == [1.5]  # the server's Retry-After, not the 7 s backoff


def test_5xx_is_retried_with_exponential_backoff_then_fails(sleeps: list[float]) -> None:
    script = [Reply(503, FakeOpenAIServer.error("overloaded", "server_error"))]
    with FakeOpenAIServer(script) as server:
        backend = openai(server, max_retries=3, backoff=0.5)
        with pytest.raises(LLMError) as caught:
            backend.chat(MESSAGES, PARAMS)
    assert len(server.requests) == 4  # the first attempt and 3 retries
    assert sleeps == [0.5, 1.0, 2.0]
    message = str(caught.value)
    assert f"{server.url}/v1/chat/completions" in message
    assert "503" in message and "overloaded" in message and "4 attempt" in message


def test_anthropic_529_retried_then_succeeds(sleeps: list[float]) -> None:
    script = [Reply(529, FakeAnthropicServer.error("Overloaded", "overloaded_error")),
              Reply(body=FakeAnthropicServer.message("Paris"))]
    with FakeAnthropicServer(script) as server:
        backend = AnthropicBackend("fake-claude", "k", base_url=server.url, backoff=0.25)
        assert backend.chat(MESSAGES, PARAMS).text == "Paris"
    assert sleeps == [0.25]


@pytest.mark.parametrize("fake", [FakeOpenAIServer, FakeAnthropicServer])
def test_400_fails_at_once_with_the_servers_message(fake: type[_FakeServer],
                                                    sleeps: list[float]) -> None:
    with fake([Reply(400, fake.error("max_tokens: must be positive"))]) as server:
        backend = (openai(server) if fake is FakeOpenAIServer
                   else AnthropicBackend("fake-claude", "k", base_url=server.url))
        with pytest.raises(LLMError) as caught:
            backend.chat(MESSAGES, PARAMS)
    assert len(server.requests) == 1 and sleeps == []
    assert "HTTP 400" in str(caught.value)
    assert "max_tokens: must be positive" in str(caught.value)
    assert server.url in str(caught.value)


def test_401_is_not_retried_and_does_not_leak_the_key(sleeps: list[float]) -> None:
    reply = Reply(401, FakeOpenAIServer.error("Incorrect API key"))
    with FakeOpenAIServer([reply]) as server, pytest.raises(LLMError) as caught:
        openai(server, api_key="sk-secret-value").chat(MESSAGES, PARAMS)
    assert "Incorrect API key" in str(caught.value)
    assert "sk-secret-value" not in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("body", ["{not json", json.dumps({"choices": []}),
                                  json.dumps({"choices": [{"message": {}}]}), "[1, 2]"])
def test_openai_malformed_response_is_an_llm_error(body: str) -> None:
    with FakeOpenAIServer([Reply(body=body)]) as server, pytest.raises(LLMError) as caught:
        openai(server).chat(MESSAGES, PARAMS)
    assert server.url in str(caught.value)


@pytest.mark.parametrize("body", ["<html>oops</html>", json.dumps({"content": []}),
                                  json.dumps({"content": [{"type": "tool_use"}]})])
def test_anthropic_malformed_response_is_an_llm_error(body: str) -> None:
    with FakeAnthropicServer([Reply(body=body)]) as server, pytest.raises(LLMError):
        AnthropicBackend("fake-claude", "k", base_url=server.url).chat(MESSAGES, PARAMS)


def test_timeout_is_retried_then_reported(sleeps: list[float]) -> None:
    slow = Reply(body=FakeOpenAIServer.completion("late"), delay=1.0)
    with FakeOpenAIServer([slow]) as server:
        backend = openai(server, timeout=0.2, max_retries=1)
        started = time.perf_counter()
        with pytest.raises(LLMError) as caught:
            backend.chat(MESSAGES, PARAMS)
        elapsed = time.perf_counter() - started
    assert "timed out" in str(caught.value)
    assert len(server.requests) == 2 and len(sleeps) == 1
    assert elapsed < 1.0  # the client did not wait for the slow server


def test_connection_refused_is_retried_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenAICompatibleBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=2)
    with pytest.raises(LLMError) as caught:
        backend.chat(MESSAGES, PARAMS)
    assert "could not connect" in str(caught.value) and str(port) in str(caught.value)
    assert len(sleeps) == 2


def test_bad_messages_are_refused_before_any_request() -> None:
    with FakeOpenAIServer([Reply(body=FakeOpenAIServer.completion("x"))]) as server:
        backend = openai(server)
        with pytest.raises(LLMError):
            backend.chat([{"role": "wizard", "content": "hi"}], PARAMS)
        with pytest.raises(LLMError):
            backend.chat([], PARAMS)
    assert server.requests == []
