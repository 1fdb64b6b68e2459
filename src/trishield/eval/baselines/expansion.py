"""PoisonedRAG's knowledge-expansion defense: retrieve many more passages (k=50) and answer
from all of them, hoping that the clean ones outnumber the handful of poisons.

Context length is the practical limit: 50 wiki chunks of up to 120 words are ~8,000 tokens,
four times the 2,048 that TriShield's local readers open with. A local GGUF reader is therefore
re-opened with a larger context (``n_ctx``, default 16,384, capped at what the model was trained
for; Qwen2.5 was trained for 32,768, SmolLM2-135M for 8,192) as a separate llama.cpp instance,
and the reader gets all 50 passages whenever they fit. Only if the estimated prompt still does
not fit are the lowest-ranked passages dropped, deterministically, and the trace says which and
why. The token cost is in ``trace.tokens`` (llama.cpp's own count).
"""

from __future__ import annotations

from typing import Any

from trishield.errors import InputError
from trishield.kb.indexes.retrieval import Candidate
from trishield.llm.cache import CachedBackend
from trishield.llm.reader import INSTRUCTION, LLMReader
from trishield.stages import Run

DEFAULT_K = 50
DEFAULT_N_CTX = 16384
CHARS_PER_TOKEN = 3.0
"""Conservative: English wiki text is ~4 characters per token for Qwen and SmolLM tokenizers."""
PROMPT_OVERHEAD_TOKENS = 128
"""Chat template, instruction, question and the ``[n]`` markers, generously."""


def estimate_tokens(text: str) -> int:
    return int(len(" ".join(text.split())) / CHARS_PER_TOKEN) + 4


def widened_reader(reader: object, n_ctx: int) -> tuple[object, dict[str, Any]]:
    """``reader`` with a context of ``n_ctx`` tokens (capped by the model's training), and a
    description; readers without a local context limit are returned unchanged."""
    from trishield.llm.local import LocalGGUFBackend

    backend = getattr(reader, "backend", None)
    inner = backend.backend if isinstance(backend, CachedBackend) else backend
    if not isinstance(reader, LLMReader) or not isinstance(inner, LocalGGUFBackend):
        kind = "no LLM" if backend is None else type(inner).__name__
        return reader, {"n_ctx": None, "limit": None,
                        "note": f"{kind}: no local context window to size"}
    trained = inner.trained_context()
    target = min(n_ctx, trained) if trained else n_ctx
    info = {"n_ctx": target, "default_n_ctx": inner.n_ctx, "model_trained_context": trained,
            "limit": target}
    if inner.n_ctx >= target:
        return reader, info | {"n_ctx": inner.n_ctx, "limit": inner.n_ctx}
    wide = inner.with_context(target)
    wrapped = CachedBackend(wide, backend.cache) if isinstance(backend, CachedBackend) else wide
    return LLMReader(wrapped, reader.prompt_style, max_tokens=reader.params.max_tokens,
                     seed=reader.params.seed), info


def fit_to_context(question: str, candidates: list[Candidate], limit: int | None,
                   answer_tokens: int) -> tuple[list[Candidate], list[Candidate], int]:
    """(kept, dropped, estimated prompt tokens): drop the lowest-ranked passages until the
    estimated prompt plus the answer fits in ``limit`` (no limit: keep everything)."""
    fixed = PROMPT_OVERHEAD_TOKENS + estimate_tokens(INSTRUCTION) + estimate_tokens(question)
    sizes = [estimate_tokens(c.chunk.text) + 3 for c in candidates]
    kept = list(candidates)
    while limit is not None and kept and fixed + sum(sizes[:len(kept)]) + answer_tokens > limit:
        kept.pop()
    return kept, candidates[len(kept):], fixed + sum(sizes[:len(kept)])


class FitToContext:
    """A candidate filter that keeps what fits the reader's context window (a length limit,
    not a detection: what it drops is traced in ``details``, never as ``removed``)."""

    name = "expansion"

    def __init__(self, context_window: dict[str, Any], answer_tokens: int):
        self.context_window = context_window
        self.answer_tokens = answer_tokens

    def screen(self, run: Run, question: str, candidates: list[Candidate]) -> list[Candidate]:
        kept, dropped, estimate = fit_to_context(question, candidates,
                                                 self.context_window["limit"],
                                                 self.answer_tokens)
        run.trace.details[self.name] = {
            **self.context_window, "retrieved": len(candidates), "passed": len(kept),
            "estimated_prompt_tokens": estimate, "truncated": bool(dropped),
            "dropped_for_context": [c.chunk_id for c in dropped],
            "dropped_rows": [{"id": c.chunk_id, "doc_id": c.doc_id,
                              "reason": "did not fit the reader's context window"}
                             for c in dropped]}
        return kept


def check_n_ctx(n_ctx: object) -> int:
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 512:
        raise InputError(f"n_ctx must be an integer >= 512, got {n_ctx!r}")
    return n_ctx
