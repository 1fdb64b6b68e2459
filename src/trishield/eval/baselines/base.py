"""What every baseline defense shares: the interface, argument checks and the trace.

The PoisonedRAG runner compares TriShield with these defenses side by side, so each returns a
:class:`trishield.pipeline.Answer` whose trace has the pipeline's keys (``defense``,
``candidates``, ``context``, ``llm_calls``, ``llm_calls_cached``, ``tokens``, ``timings_s``)
plus ``removed``: every retrieved passage the defense filtered out, which is what detection
precision and recall are measured on. One extractor then reads TriShield and its peers alike.

Readers see the context in retrieval order, as the undefended pipeline (``--defense none``)
does: these defenses have no notion of trust to order by.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from trishield.answers import contains_answer
from trishield.errors import InputError
from trishield.kb import KnowledgeBase
from trishield.kb.knowledge_base import MAX_K
from trishield.kb.retrieval import BACKENDS, Candidate
from trishield.llm.base import LLMResponse, ReaderAnswer
from trishield.pipeline import TRACE_VERSION, Answer, _candidate_row
from trishield.rings.consensus import Vote, is_llm


@runtime_checkable
class BaselineDefense(Protocol):
    """A defense the benchmark runner can ask questions, exactly like the pipeline."""

    name: str

    def ask(self, question: str) -> Answer:
        ...


def check_k(k: object, what: str = "k") -> int:
    """``k`` as a positive int within the KB's limit, or an InputError that says why."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"{what} must be an integer between 1 and {MAX_K}, got {k!r}")
    return k


def check_pool(pool: object, k: int) -> int:
    """How many candidates a filter screens: ``k`` when not given, never fewer than ``k``."""
    value = k if pool is None else check_k(pool, "pool")
    if value < k:
        raise InputError(f"pool ({value}) must be at least k ({k})")
    return value


def check_backend(backend: object) -> str:
    if backend not in BACKENDS:
        raise InputError(f"unknown retrieval backend {backend!r}; choose from "
                         f"{', '.join(BACKENDS)}")
    return str(backend)


def check_reader(reader: object) -> object:
    """A reader is anything with ``answer(question, pairs)``, a ``name`` and a ``vendor``."""
    if not callable(getattr(reader, "answer", None)) or not hasattr(reader, "name") \
            or not hasattr(reader, "vendor"):
        raise InputError(f"{reader!r} is not a reader: it needs answer(), name and vendor "
                         "(an LLMReader or the ExtractiveReader)")
    return reader


def check_fraction(value: object, what: str, *, low: float = 0.0, high: float = 1.0) -> float:
    """A finite number in ``[low, high]`` (NaN and infinities are refused, not compared)."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not low <= value <= high:
        raise InputError(f"{what} must be a finite number in [{low}, {high}], got {value!r}")
    return float(value)


def check_question(question: object) -> str:
    if not isinstance(question, str) or not question.strip():
        raise InputError("the question is empty")
    return question


def context_row(candidate: Candidate) -> dict[str, Any]:
    """A context passage as the pipeline writes it; every passage is equally trusted here."""
    chunk = candidate.chunk
    return {"id": chunk.chunk_id, "doc_id": chunk.doc_id, "tier": chunk.tier, "trust": 1.0,
            "text": chunk.text}


def removed_row(candidate: Candidate, reason: str) -> dict[str, Any]:
    return {"id": candidate.chunk_id, "doc_id": candidate.doc_id, "reason": reason}


@dataclass
class Call:
    """One model call a defense paid for (or found in the response cache)."""

    purpose: str
    model: str
    llm: bool
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    @classmethod
    def of_reply(cls, purpose: str, reader: object, reply: ReaderAnswer) -> Call:
        return cls(purpose, reply.model, is_llm(reader), bool(reply.cached),
                   reply.prompt_tokens, reply.completion_tokens, reply.seconds)

    @classmethod
    def of_response(cls, purpose: str, response: LLMResponse) -> Call:
        return cls(purpose, response.model, True, response.cached, response.prompt_tokens,
                   response.completion_tokens, response.seconds)

    def as_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "model": self.model, "llm": self.llm,
                "cached": self.cached, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3)}


@dataclass
class Run:
    """One question's trace under construction: timings, model calls and the trace dict."""

    defense: str
    question: str
    backend: str
    k: int
    reader: object
    trace: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.trace.update({"version": TRACE_VERSION, "question": self.question,
                           "defense": self.defense, "backend": self.backend, "k": self.k,
                           "panel": [{"name": self.reader.name, "vendor": self.reader.vendor,
                                      "llm": is_llm(self.reader)}]})

    def timed(self, phase: str, since: float) -> None:
        self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - since

    def retrieve(self, kb: KnowledgeBase, query: str, depth: int) -> list[Candidate]:
        mark = time.perf_counter()
        candidates = kb.search(query, backend=self.backend, k=depth)
        self.timed("retrieval", mark)
        self.trace["pool"] = depth
        self.trace["candidates"] = [_candidate_row(c) for c in candidates]
        return candidates

    def answer(self, question: str, context: Sequence[Candidate], *,
               purpose: str = "answer") -> Answer:
        """The reader answers ``question`` from ``context`` (retrieval order); finish."""
        self.trace["context"] = [context_row(c) for c in context]
        self.trace.setdefault("removed", [])
        if not context:
            self.trace["reader"] = None
            return self.finish(None, True, "no passage survived the defense to answer from", [])
        mark = time.perf_counter()
        pairs = [(c.chunk_id, c.chunk.text) for c in context]
        reply = self.reader.answer(question, pairs)
        self.timed("answer", mark)
        self.calls.append(Call.of_reply(purpose, self.reader, reply))
        vote = Vote.of(self.reader, reply).as_dict()
        self.trace["reader"] = vote  # the pipeline's key for one reader's vote
        if vote["refused"]:
            return self.finish(None, True, f"{self.reader.name} declined: the context does not "
                               "hold the answer", [])
        cited = {c.doc_id for c in context if c.chunk_id in set(reply.citations)}
        cited |= {c.doc_id for c in context if contains_answer(c.chunk.text, reply.text)}
        return self.finish(reply.text, False, "answered by one model", sorted(cited))

    def finish(self, answer: str | None, refused: bool, reason: str,
               citations: list[str]) -> Answer:
        self.trace.setdefault("context", [])
        self.trace.setdefault("removed", [])
        self.timings["total"] = time.perf_counter() - self.started
        self.trace["calls"] = [c.as_dict() for c in self.calls]
        self.trace["llm_calls"] = sum(1 for c in self.calls if c.llm and not c.cached)
        self.trace["llm_calls_cached"] = sum(1 for c in self.calls if c.llm and c.cached)
        self.trace["tokens"] = {"prompt": sum(c.prompt_tokens for c in self.calls),
                                "completion": sum(c.completion_tokens for c in self.calls)}
        self.trace["timings_s"] = {name: round(value, 4) for name, value in self.timings.items()}
        return Answer(answer, refused, reason, citations, self.trace)
