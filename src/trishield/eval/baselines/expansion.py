"""PoisonedRAG's knowledge-expansion defense: retrieve many more passages (k=50) and answer
from all of them, hoping that the clean ones outnumber the handful of poisons.

Context length is the practical limit: 50 wiki chunks of up to 120 words are ~8,000 tokens,
four times the 2,048 that TriShield's local readers open with. A local GGUF reader is therefore
re-opened with a larger context (``n_ctx``, default 16,384, capped at what the model was trained
for; Qwen2.5 was trained for 32,768, SmolLM2-135M for 8,192) as a separate llama.cpp instance,
and the reader gets all 50 passages whenever they fit. Only if the estimated prompt still does
not fit are the lowest-ranked passages dropped, deterministically, and the trace says which and
why. The token cost is in ``trace["tokens"]`` (llama.cpp's own count).
"""

from __future__ import annotations

from typing import Any

from trishield.errors import InputError
from trishield.eval.baselines.base import (
    Run,
    check_backend,
    check_k,
    check_question,
    check_reader,
    removed_row,
)
from trishield.kb import KnowledgeBase
from trishield.kb.retrieval import Candidate
from trishield.llm.cache import CachedBackend
from trishield.llm.reader import INSTRUCTION, LLMReader
from trishield.pipeline import Answer

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


class KnowledgeExpansion:
    """Retrieve ``k`` (50) and answer from every one of them."""

    def __init__(self, kb: KnowledgeBase, reader: object, *, backend: str = "dense",
                 k: int = DEFAULT_K, n_ctx: int = DEFAULT_N_CTX):
        self.kb = kb
        check_reader(reader)
        self.backend = check_backend(backend)
        self.k = check_k(k)
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 512:
            raise InputError(f"n_ctx must be an integer >= 512, got {n_ctx!r}")
        self.reader, self.context_window = widened_reader(reader, n_ctx)
        self.name = f"expansion-k{self.k}"

    def ask(self, question: str) -> Answer:
        question = check_question(question)
        run = Run(self.name, question, self.backend, self.k, self.reader)
        candidates = run.retrieve(self.kb, question, self.k)
        params = getattr(self.reader, "params", None)
        answer_tokens = params.max_tokens if params is not None else 0
        kept, dropped, estimate = fit_to_context(question, candidates,
                                                 self.context_window["limit"], answer_tokens)
        run.trace["expansion"] = {**self.context_window, "retrieved": len(candidates),
                                  "passed": len(kept), "estimated_prompt_tokens": estimate,
                                  "truncated": bool(dropped),
                                  "dropped_for_context": [c.chunk_id for c in dropped]}
        # dropped for length, not detected as poison: recorded, but not as a detection
        run.trace["removed"] = []
        run.trace["expansion"]["dropped_rows"] = [
            removed_row(c, "did not fit the reader's context window") for c in dropped]
        return run.answer(question, kept)
