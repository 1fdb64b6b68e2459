"""GGUF models run in-process with llama.cpp (through ``xllamacpp``).

``xllamacpp.Server`` wraps llama.cpp's server: requests are handed to it as Python dicts and
answered in-process (``handle_chat_completions``), with no network round trip. The library
always opens an HTTP listener as a side effect; it is bound to 127.0.0.1 on a port the OS
picks and locked with a random API key that is never shown, so nothing else can use it.

Determinism: greedy sampling at temperature 0, a fixed seed, one slot, and no KV-cache reuse
between requests (llama.cpp warns that prompt caching can change logits), so the same file,
prompt and parameters give the same text, which is what makes responses cacheable.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trishield.llm.base import (
    ChatMessage,
    GenerationParams,
    LLMError,
    LLMResponse,
    validate_messages,
)
from trishield.models.gguf import (
    GGUF_MODELS,
    ResolvedGGUF,
    read_gguf_metadata,
    resolve_gguf,
    verify_resolved,
)

# Stops for base models in completion mode: they continue the document otherwise.
BASE_MODEL_STOPS = ("\n\n", "\n[", "\nQuestion:", "\nUser:", "\nContext:")


@dataclass
class _Loaded:
    server: Any
    lock: threading.Lock
    seconds: float
    api_key: str = ""
    """The listener's key (:func:`_start_server`): only this process's tokenizer calls use it."""
    name: str = ""
    """The registry name, else the file's name (what :func:`loaded_models` reports)."""


_SERVERS: dict[tuple[str, int, int], _Loaded] = {}
_SERVERS_LOCK = threading.Lock()


def _start_server(path: Path, n_ctx: int, n_threads: int, api_key: str) -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise LLMError("local GGUF models need the package xllamacpp: "
                       "pip install xllamacpp") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    params.warmup = False
    params.verbosity = 0
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.api_keys = [api_key]
    params.endpoint_metrics = False
    params.endpoint_slots = False
    params.ui = False
    try:
        return xllamacpp.Server(params)
    except Exception as error:  # the C++ side reports every failure as RuntimeError
        raise LLMError(f"llama.cpp could not load {path}: {error}") from error


def loaded_server(resolved: ResolvedGGUF, n_ctx: int, n_threads: int) -> _Loaded:
    """The running server for this file and settings, started once per process."""
    key = (resolved.sha256, n_ctx, n_threads)
    with _SERVERS_LOCK:
        if key not in _SERVERS:
            started = time.perf_counter()
            verify_resolved(resolved)
            api_key = secrets.token_hex(32)
            server = _start_server(resolved.path, n_ctx, n_threads, api_key)
            _SERVERS[key] = _Loaded(server, threading.Lock(), time.perf_counter() - started,
                                    api_key, resolved.model.name if resolved.model is not None
                                    else resolved.path.name)
        return _SERVERS[key]


def loaded_models() -> list[str]:
    """The local models this process has loaded so far, in load order (registry names, else
    file names). A panel member is loaded when it is first asked, not when it is built: a
    question the gate lets one model answer loads that model alone (docs/speed.md)."""
    with _SERVERS_LOCK:
        return [loaded.name for loaded in _SERVERS.values()]


def unload_all() -> None:
    """Stop every loaded model (the server's destructor joins its threads)."""
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for loaded in servers:
        with loaded.lock:
            del loaded.server


atexit.register(unload_all)


def completion_prompt(messages: list[ChatMessage]) -> str:
    """A plain-text prompt for a base model with no chat template.

    Turns are written one after the other as a document; the prompt ends with ``Answer:``
    so that the model's continuation is the answer.
    """
    lines = [message["content"].strip() for message in messages]
    prompt = "\n\n".join(line for line in lines if line)
    if messages[-1]["role"] != "assistant" and not prompt.rstrip().endswith("Answer:"):
        prompt += "\nAnswer:"
    return prompt


class LocalGGUFBackend:
    """A GGUF model (a registry name or any ``.gguf`` path) answering in-process.

    Nothing is loaded until the first call; the loaded model is shared by every backend of
    the same file and settings in the process. ``identity`` is the file's sha256 (the pin of a
    registry model, so cached answers stay valid even before the model is installed).
    """

    def __init__(self, model: str | os.PathLike[str], n_ctx: int = 2048, n_threads: int = 2,
                 *, name: str | None = None, vendor: str | None = None,
                 chat_template: bool | None = None):
        self._source = model
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._resolved: ResolvedGGUF | None = None
        self.last_timings: dict[str, Any] = {}
        entry = GGUF_MODELS.get(os.fspath(model))
        if entry is not None:
            self.identity = entry.sha256
            self.name = name or entry.name
            self.vendor = vendor or entry.vendor
            self.chat_template = entry.chat_template if chat_template is None else chat_template
            return
        resolved = self._resolve()
        self.identity = resolved.sha256
        self.name = name or resolved.name
        metadata = read_gguf_metadata(resolved.path, ["tokenizer.chat_template",
                                                      "general.architecture"])
        self.vendor = vendor or f"unknown ({metadata.get('general.architecture', '?')})"
        self.chat_template = (bool(metadata.get("tokenizer.chat_template"))
                              if chat_template is None else chat_template)

    def _resolve(self) -> ResolvedGGUF:
        if self._resolved is None:
            self._resolved = resolve_gguf(self._source)
        return self._resolved

    def __repr__(self) -> str:
        return f"LocalGGUFBackend({self.name!r}, sha256={self.identity[:12]})"

    def with_context(self, n_ctx: int) -> LocalGGUFBackend:
        """The same model with another context size (a separate llama.cpp instance): for a
        reader that must read far more than the default 2,048 tokens, e.g. 50 passages."""
        return LocalGGUFBackend(self._source, n_ctx=n_ctx, n_threads=self.n_threads,
                                name=self.name, vendor=self.vendor,
                                chat_template=self.chat_template)

    def trained_context(self) -> int | None:
        """The context length the model was trained for (GGUF ``<arch>.context_length``)."""
        path = self._resolve().path
        architecture = read_gguf_metadata(path, ["general.architecture"]).get(
            "general.architecture")
        if not architecture:
            return None
        value = read_gguf_metadata(path, [f"{architecture}.context_length"]).get(
            f"{architecture}.context_length")
        return int(value) if value else None

    @property
    def context_window(self) -> int:
        """Tokens llama.cpp was started with (``n_ctx``): prompt and answer together."""
        return self.n_ctx

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One call to the in-process server's own HTTP listener (loopback, keyed): the
        library exposes tokenisation and chat templates only there, and each answers in a few
        milliseconds without evaluating the model."""
        loaded = loaded_server(self._resolve(), self.n_ctx, self.n_threads)
        request = urllib.request.Request(
            f"{loaded.server.listening_address}{path}", data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {loaded.api_key}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                reply = json.loads(response.read())
        except (OSError, ValueError) as error:
            raise LLMError(f"{self.name}: llama.cpp's {path} failed: {error}") from error
        if not isinstance(reply, dict):
            raise LLMError(f"{self.name}: llama.cpp's {path} returned {reply!r:.200}")
        return reply

    def _tokens(self, text: str, *, special: bool) -> int:
        tokens = self._post("/tokenize", {"content": text, "add_special": special}).get("tokens")
        if not isinstance(tokens, list):
            raise LLMError(f"{self.name}: llama.cpp's /tokenize returned no tokens")
        return len(tokens)

    def count_prompt_tokens(self, messages: list[ChatMessage]) -> int:
        """The prompt's tokens exactly as :meth:`chat` will send it: through the model's chat
        template, or as the completion prompt of a base model."""
        messages = validate_messages(messages)
        if not self.chat_template:
            return self._tokens(completion_prompt(messages), special=True)
        prompt = self._post("/apply-template", {"messages": messages}).get("prompt")
        if not isinstance(prompt, str):
            raise LLMError(f"{self.name}: llama.cpp's /apply-template returned no prompt")
        return self._tokens(prompt, special=True)

    def count_text_tokens(self, text: str) -> int:
        return self._tokens(text, special=False)

    def load(self) -> float:
        """Load the model now (verifying its sha256); returns the seconds loading took."""
        return loaded_server(self._resolve(), self.n_ctx, self.n_threads).seconds

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        messages = validate_messages(messages)
        loaded = loaded_server(self._resolve(), self.n_ctx, self.n_threads)
        request: dict[str, Any] = {
            "max_tokens": params.max_tokens, "temperature": params.temperature,
            "seed": params.seed, "cache_prompt": False, "stream": False,
        }
        if self.chat_template:
            request |= {"messages": messages, "stop": list(params.stop)}
        else:
            request |= {"prompt": completion_prompt(messages),
                        "stop": list(dict.fromkeys(params.stop + BASE_MODEL_STOPS))}
        started = time.perf_counter()
        with loaded.lock:
            if self.chat_template:
                reply = loaded.server.handle_chat_completions(request)
            else:
                reply = loaded.server.handle_completions(request)
        seconds = time.perf_counter() - started
        return self._parse(reply, seconds)

    def _parse(self, reply: Any, seconds: float) -> LLMResponse:
        if not isinstance(reply, dict):
            raise LLMError(f"{self.name}: llama.cpp returned {type(reply).__name__}, not a dict")
        if "error" in reply:
            error = reply["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise LLMError(f"{self.name}: llama.cpp refused the request: {message}")
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] if self.chat_template else choice["text"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"{self.name}: llama.cpp reply has no completion: "
                           f"{str(reply)[:300]}") from None
        usage = reply.get("usage") or {}
        self.last_timings = dict(reply.get("timings") or {})
        return LLMResponse(text=text or "", model=self.name,
                           prompt_tokens=int(usage.get("prompt_tokens", 0)),
                           completion_tokens=int(usage.get("completion_tokens", 0)),
                           seconds=seconds, cached=False)

