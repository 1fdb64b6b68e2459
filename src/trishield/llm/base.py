"""What every LLM backend of the Ring 3 panel offers, local or remote.

The panel only needs one operation, a chat completion, and a stable ``identity`` for each
backend so that responses can be cached: the same model file (or remote model), the same
messages and the same parameters at temperature 0 give the same answer, and reading the
prompt is what costs seconds on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from trishield.errors import ModelError

ChatMessage = dict[str, str]
"""One chat turn: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""

ROLES = frozenset({"system", "user", "assistant"})


class LLMError(ModelError):
    """An LLM call failed: the backend is unreachable, refused the request or answered
    something that is not a completion. The message names the backend and the cause."""


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters; the defaults (greedy, fixed seed) make answers reproducible."""

    temperature: float = 0.0
    max_tokens: int = 64
    seed: int = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        # a list would make the dataclass unhashable and the cache key order-sensitive
        object.__setattr__(self, "stop", tuple(self.stop))

    def as_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["stop"] = list(self.stop)
        return payload


@dataclass(frozen=True)
class LLMResponse:
    """One completion, with what it cost: tokens read and written, and wall time."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class ChatBackend(Protocol):
    """An LLM that answers chat messages.

    ``name`` is the panel member's name, ``vendor`` who trained the model (the panel wants
    different vendors so that errors are independent), ``identity`` the exact model for
    caching: the GGUF file's sha256, or ``openai-compatible|<base_url>|<model>``.
    """

    name: str
    vendor: str
    identity: str

    def chat(self, messages: list[ChatMessage], params: GenerationParams) -> LLMResponse:
        ...


def validate_messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Check the shape of ``messages`` before paying for a call; returns plain copies."""
    if not messages:
        raise LLMError("no messages to send")
    checked = []
    for position, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ROLES or not isinstance(content, str):
            raise LLMError(f"message {position} must have a role in {sorted(ROLES)} and a "
                           f"string content, got {message!r}")
        checked.append({"role": role, "content": content})
    return checked


NO_ANSWER = "no answer"
"""The ``text`` of every refused answer, whichever reader refused, so that refusals group."""

Passage = str | tuple[str, str]
"""A context passage: its text (cited by its 1-based position) or an ``(id, text)`` pair."""


def passage_pairs(passages: Sequence[Passage]) -> list[tuple[str, str]]:
    """``(id, text)`` for each passage; a bare string is cited by its 1-based position."""
    pairs = []
    for position, passage in enumerate(passages, start=1):
        if isinstance(passage, str):
            pairs.append((str(position), passage))
        elif isinstance(passage, tuple) and len(passage) == 2:
            pairs.append((str(passage[0]), str(passage[1])))
        else:
            raise TypeError(f"passage {position} must be a string or an (id, text) pair, "
                            f"got {type(passage).__name__}")
    return pairs


@dataclass(frozen=True)
class ReaderAnswer:
    """A reader's answer to one question over a context, with its cost.

    ``citations`` are the ids of the passages the answer rests on; ``raw`` is what the reader
    produced before parsing (the model's reply, or the chosen sentence).
    """

    text: str
    citations: list[str]
    refused: bool
    raw: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool
    model: str
    packing: str = ""
    """What was cut or left out of the context to fit the model's window ("" when nothing):
    the answer was read from less than the whole context, and the trace says so."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Reader(Protocol):
    """Answers a question from passages: an LLM behind a prompt, or the extractive reader.

    The one definition of a reader, used by the panel, the single-reader answerer and every
    baseline. ``vendor`` is who trained the model (the panel wants independent errors);
    ``uses_llm`` says whether an answer costs an LLM call, which is what the evaluation counts
    (the extractive reader costs none and cannot be instruction-injected).
    """

    name: str
    vendor: str
    uses_llm: bool

    def answer(self, question: str, passages: Sequence[Passage]) -> ReaderAnswer:
        ...
