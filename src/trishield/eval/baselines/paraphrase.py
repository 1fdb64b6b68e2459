"""PoisonedRAG's query-paraphrasing defense: an LLM rewrites the question before retrieval.

The idea (Zou et al., 2024, section 7): poisons are written to be retrieved for the target
question's exact wording, so a paraphrase might retrieve them less. As in the paper's setting,
the paraphrase is used for retrieval *and* the reader answers the paraphrased question.

The paraphraser is the reader's own LLM backend unless another is given (the extractive reader
has none, so it needs one). Its reply is validated: the first line, without a "Paraphrased
question:" prefix or quotes, must be non-empty, not a refusal and not absurdly long; otherwise
the original question is used and the trace says why.
"""

from __future__ import annotations

import re

from trishield.answers import is_refusal
from trishield.errors import InputError
from trishield.llm.base import ChatBackend, GenerationParams
from trishield.stages import Run
from trishield.text import words

NAME = "paraphrase"
INSTRUCTION = ("Paraphrase the user's question: ask exactly the same thing in different words. "
               "Reply with the paraphrased question only.")
MAX_WORDS_FACTOR = 3
MIN_MAX_WORDS = 30
"""A paraphrase longer than max(30, 3 x the question's words) is not a paraphrase."""

_PREFIX = re.compile(r"^\s*(?:\*\*)?(?:paraphrased(?:\s+question)?|paraphrase|rephrased"
                     r"(?:\s+question)?|question|q)\s*[:\-]\s*(?:\*\*)?\s*", re.IGNORECASE)


def clean_paraphrase(reply: str, question: str) -> tuple[str | None, str | None]:
    """(paraphrase, None) when the reply is usable, else (None, why not)."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None, "the paraphraser returned nothing"
    text = _PREFIX.sub("", lines[0]).strip().strip("*\"'`\u201c\u201d ").strip()
    if not text and len(lines) > 1:  # "Paraphrased question:\n<the question>"
        text = lines[1].strip().strip("*\"'`\u201c\u201d ").strip()
    if not words(text):
        return None, "the paraphrase is empty"
    if is_refusal(text):
        return None, f"the paraphraser declined: {text[:80]!r}"
    limit = max(MIN_MAX_WORDS, MAX_WORDS_FACTOR * len(words(question)))
    if len(words(text)) > limit:
        return None, f"the paraphrase has {len(words(text))} words (limit {limit})"
    return text, None


class QueryParaphrase:
    """A query rewriter: an LLM paraphrases the question; the composition retrieves the top
    ``k`` for the paraphrase and answers the paraphrase."""

    name = NAME

    def __init__(self, paraphraser: ChatBackend, *, max_tokens: int = 64):
        if paraphraser is None or not callable(getattr(paraphraser, "chat", None)):
            raise InputError("query paraphrasing needs an LLM: the reader has no chat backend, "
                             "so pass paraphraser= (e.g. a LocalGGUFBackend)")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 8:
            raise InputError(f"max_tokens must be an integer >= 8, got {max_tokens!r}")
        self.paraphraser = paraphraser
        self.params = GenerationParams(temperature=0.0, max_tokens=max_tokens, seed=0)

    def rewrite(self, run: Run, question: str) -> str:
        """The query to use, with the paraphrase (or the reason for falling back) traced."""
        messages = [{"role": "system", "content": INSTRUCTION},
                    {"role": "user", "content": " ".join(question.split())}]
        response = self.paraphraser.chat(messages, self.params)
        run.paid_chat("paraphrase", response)
        text, problem = clean_paraphrase(response.text, question)
        used = text if text is not None else question
        run.trace.details[self.name] = {
            "original": question, "paraphrase": text, "used": used, "fallback": problem,
            "raw": response.text, "model": response.model,
            "changed": text is not None and " ".join(words(text)) != " ".join(words(question))}
        return used
