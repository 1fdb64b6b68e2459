"""Fit a reader's prompt into its model's context window, counted with the model's tokenizer.

A reader's prompt is the instruction, the question and the numbered passages. On documentation
a 120-word passage can cost four times the tokens of a 120-word Wikipedia paragraph (option
lists, identifiers, hex dumps), so five of them overflowed a 2,048-token window and the
question failed every time it was asked. A deterministic failure is a bug, not a busy server:
the prompt is packed instead.

Packing, in order, only as far as needed:

1. the prompt as built fits: nothing changes (the common case costs one exact count, or none
   when the response cache already holds the answer, since a cached answer proves it fitted);
2. the passages share what the window leaves after the instruction, the question and the
   answer's tokens: each passage over its fair share keeps its sentences that share most of
   the question's terms, in their original order (a passage is cut, never reworded);
3. a share too small to hold a useful passage drops the *last* passage (the caller orders
   them most important first: rank or trust) and the shares are computed again.

Only a question that cannot fit with no passage at all is an error
(:class:`~trishield.errors.ContextOverflowError`, its own exit code and a 4xx over HTTP).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from trishield.errors import ContextOverflowError
from trishield.llm.base import ChatMessage
from trishield.text import index_terms, sentence_spans

MIN_PASSAGE_TOKENS = 48
"""Below this share a passage is dropped rather than cut: a 30-token stub of an option list
rarely holds both the question's terms and the answer, and it costs the others room."""

SAFETY_TOKENS = 8
"""Kept free beyond the answer's ``max_tokens``: a chat template may add a token or two that
the count of the rendered prompt does not see (a BOS token)."""

MAX_ROUNDS = 4
"""Packing rounds: the share is estimated from per-passage counts, then checked with an exact
count of the whole prompt; each round that misses shrinks the budget by the measured excess."""


@runtime_checkable
class TokenCounter(Protocol):
    """A backend that knows its context window and can count a prompt with its own tokenizer.

    Backends without it (a remote API whose window is not configured) are sent the prompt as
    built; the API reports an overflow itself."""

    context_window: int

    def count_prompt_tokens(self, messages: list[ChatMessage]) -> int:
        """Tokens of the prompt these messages render to (chat template included)."""
        ...

    def count_text_tokens(self, text: str) -> int:
        """Tokens of a bare text (no template, no special tokens)."""
        ...


@dataclass(frozen=True)
class Packing:
    """What packing did to a context, for the trace: nothing, or which passages were cut or
    dropped to fit ``window`` tokens."""

    window: int
    prompt_tokens: int
    trimmed: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.trimmed or self.dropped)

    def describe(self) -> str:
        parts = []
        if self.trimmed:
            parts.append(f"cut {len(self.trimmed)} passage(s) to their sentences nearest the "
                         f"question ({', '.join(self.trimmed)})")
        if self.dropped:
            parts.append(f"left out {len(self.dropped)} passage(s) ({', '.join(self.dropped)})")
        return (f"context packed into {self.window} tokens: " + "; ".join(parts)
                if parts else "")


Pairs = list[tuple[str, str]]
BuildPrompt = Callable[[Pairs], list[ChatMessage]]


def fit_passages(question: str, pairs: Pairs, build: BuildPrompt, counter: TokenCounter,
                 answer_tokens: int, *, fits: Callable[[list[ChatMessage]], bool] | None = None
                 ) -> tuple[Pairs, list[ChatMessage], Packing | None]:
    """The passages (cut or fewer where needed) and messages that fit ``counter``'s window
    with ``answer_tokens`` left for the answer.

    ``fits`` may vouch for a prompt without counting it (the response cache: a stored answer
    to exactly these messages proves they fitted). Raises :class:`ContextOverflowError` when
    even the question alone does not fit.
    """
    messages = build(pairs)
    if fits is not None and fits(messages):
        return pairs, messages, None
    limit = counter.context_window - answer_tokens - SAFETY_TOKENS
    total = counter.count_prompt_tokens(messages)
    if total <= limit:
        return pairs, messages, Packing(counter.context_window, total)
    bare = counter.count_prompt_tokens(build([]))
    if bare > limit:
        raise ContextOverflowError(
            f"the question alone takes {bare:,} tokens of the reader's {counter.context_window:,}"
            f"-token context ({answer_tokens} kept for the answer): shorten the question or "
            "configure a reader with a larger context (n_ctx)")
    sizes = [counter.count_text_tokens(text) for _, text in pairs]
    overhead = max(0, total - bare - sum(sizes))  # numbering and separators, all passages
    budget = limit - bare - overhead
    kept = list(pairs)
    kept_sizes = list(sizes)
    dropped: list[str] = []
    for _ in range(MAX_ROUNDS):
        while kept and _fair_share(kept_sizes, budget) < min(MIN_PASSAGE_TOKENS,
                                                             max(kept_sizes)):
            dropped.insert(0, kept.pop()[0])
            kept_sizes.pop()
        share = _fair_share(kept_sizes, budget)
        packed = [(pid, text if size <= share else trim_to(question, text, size, share))
                  for (pid, text), size in zip(kept, kept_sizes, strict=True)]
        messages = build(packed)
        total = counter.count_prompt_tokens(messages)
        if total <= limit:
            trimmed = tuple(pid for (pid, text), (_, original) in zip(packed, kept, strict=True)
                            if text != original)
            return packed, messages, Packing(counter.context_window, total, trimmed,
                                             tuple(dropped))
        budget -= total - limit
    # the estimate kept missing (a tokenizer far from proportional): fall back to fewer
    # passages, one at a time, each round exact
    while kept:
        dropped.insert(0, kept.pop()[0])
        kept_sizes.pop()
        messages = build(kept)
        total = counter.count_prompt_tokens(messages)
        if total <= limit:
            return kept, messages, Packing(counter.context_window, total, (), tuple(dropped))
    return [], build([]), Packing(counter.context_window, bare, (), tuple(dropped))


def _fair_share(sizes: Sequence[int], budget: int) -> int:
    """The largest cap ``c`` with ``sum(min(size, c)) <= budget`` (water-filling): short
    passages keep all of themselves and leave their room to the long ones."""
    if not sizes:
        return budget
    if sum(sizes) <= budget:
        return max(sizes)
    remaining = budget
    ordered = sorted(sizes)
    for position, size in enumerate(ordered):
        share = remaining // (len(ordered) - position)
        if size > share:
            return max(0, share)
        remaining -= size
    return max(0, remaining)


def trim_to(question: str, text: str, tokens: int, share: int) -> str:
    """``text`` cut to about ``share`` of its ``tokens``: its sentences holding most of the
    question's terms (earlier first among equals), in their original order. A single sentence
    over the share is cut to the words around its first question term."""
    if share <= 0:
        return ""
    asked = set(index_terms(question))
    spans = sentence_spans(text) or [(0, len(text))]
    per_char = tokens / max(1, len(text))
    scored = sorted(range(len(spans)), key=lambda i: (
        -len(asked & set(index_terms(text[spans[i][0]:spans[i][1]]))), i))
    chosen: list[int] = []
    used = 0.0
    for index in scored:
        start, end = spans[index]
        cost = (end - start + 1) * per_char
        if used + cost <= share:
            chosen.append(index)
            used += cost
    if not chosen:
        start, end = spans[scored[0]]
        return _window(text[start:end], asked, int(share / per_char))
    return " ".join(text[spans[i][0]:spans[i][1]] for i in sorted(chosen))


def _window(sentence: str, asked: set[str], chars: int) -> str:
    """About ``chars`` characters of ``sentence``, starting a little before its first word
    that the question holds (whole words only)."""
    words = sentence.split()
    first = next((i for i, word in enumerate(words) if asked & set(index_terms(word))), 0)
    start = max(0, first - 3)
    out: list[str] = []
    length = 0
    for word in words[start:]:
        if length + len(word) + 1 > chars and out:
            break
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:max(1, chars)]
