"""An LLM that answers a question from numbered passages (the RAG reading step).

Prompts are short on purpose: on a CPU, reading the prompt dominates the cost of an answer,
so the instruction is two sentences and the passages are numbered, not decorated. The reply
is parsed into a short answer; "I don't know" (or an equivalent) becomes a refusal.
"""

from __future__ import annotations

import re
from typing import Literal

from trishield.llm.base import (
    NO_ANSWER,
    ChatBackend,
    ChatMessage,
    GenerationParams,
    Passage,
    ReaderAnswer,
    passage_pairs,
)
from trishield.llm.context_budget import Packing, TokenCounter, fit_passages
from trishield.text import content_words

INSTRUCTION = ("Answer the question using only the context. Reply with a short answer "
               "(a few words). If the context does not contain the answer, reply exactly: "
               "I don't know.")
QUOTE_INSTRUCTION = ("Answer the question by copying the shortest exact phrase from the context "
                     "that answers it. If the context does not contain the answer, reply "
                     "exactly: I don't know.")
"""What a reader is asked when it reads the same passages a second time (:meth:`LLMReader.quoting`):
the same model and prompt at temperature 0 would only repeat its answer."""
# One worked example for base models without a chat template: they continue a document, and
# a single example shows them where the answer goes and how short it is.
FEW_SHOT = ("Context:\n[1] The Amazon river flows through Brazil, Peru and Colombia.\n"
            "Question: Which country does the Amazon flow through besides Peru and Colombia?\n"
            "Answer: Brazil\n\n")
PromptStyle = Literal["auto", "chat", "user-only", "few-shot"]
PROMPT_STYLES: tuple[str, ...] = ("auto", "chat", "user-only", "few-shot")

_PREFIX = re.compile(r"^\s*(?:\*\*)?(?:final\s+)?(?:answer\s*[:\-]|a\s*:)\s*(?:\*\*)?\s*",
                     re.IGNORECASE)
_REFUSAL = re.compile(
    r"\b(i\s+(?:do\s+not|don['\u2019]?t)\s+know|cannot\s+(?:be\s+)?(?:answer|determine)|"
    r"(?:context|passages?|text)\s+(?:does\s+not|doesn'?t)\s+(?:contain|mention|say|provide)|"
    r"not\s+(?:mentioned|provided|stated|specified)\s+in\s+the\s+(?:context|passages?)|"
    r"no\s+information)\b", re.IGNORECASE)


def format_context(pairs: list[tuple[str, str]]) -> str:
    """Passages as ``[n] text`` lines (whitespace collapsed: tokens cost seconds)."""
    return "\n".join(f"[{n}] {' '.join(text.split())}" for n, (_, text) in enumerate(pairs, 1))


def build_messages(question: str, pairs: list[tuple[str, str]], style: str,
                   instruction: str = INSTRUCTION) -> list[ChatMessage]:
    body = f"Context:\n{format_context(pairs)}\nQuestion: {' '.join(question.split())}"
    if style == "chat":
        return [{"role": "system", "content": instruction}, {"role": "user", "content": body}]
    if style == "user-only":
        return [{"role": "user", "content": f"{instruction}\n\n{body}"}]
    if style == "few-shot":
        return [{"role": "user", "content": f"{instruction}\n\n{FEW_SHOT}{body}\nAnswer:"}]
    raise ValueError(f"unknown prompt style {style!r}; known: {', '.join(PROMPT_STYLES)}")


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def parse_reply(reply: str) -> tuple[str, bool]:
    """(short answer, refused) from a model's reply: the first sentence of the first non-empty
    line, without an "Answer:" prefix (base models keep writing after the answer)."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return NO_ANSWER, True
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:  # "You can mail it to:\nNorthwind Returns, ..."
        first = lines[1]
    first_sentence = _SENTENCE_BREAK.split(first, maxsplit=1)[0]
    answer = _PREFIX.sub("", first_sentence).strip().strip("*\"'` ").rstrip(".").strip()
    if not answer or _REFUSAL.search(answer):
        return NO_ANSWER, True
    return answer, False


_PLACE_QUESTION = re.compile(r"\bwhere\b", re.IGNORECASE)
_ADDRESS_PART = re.compile(r",\s*(?:[A-Z][\w'.&-]*|\d[\w-]*)(?:\s+(?:[A-Z][\w'.&-]*|\d[\w-]*))*")


def complete_address(answer: str, question: str, texts: list[str]) -> str:
    """The whole postal address a passage states where the reader gave its first line.

    Told to answer in a few words, a reader asked "Where do I mail my return?" answers
    "Northwind Returns" from "...mailed to Northwind Returns, 1200 Harbor Road, Portland, OR
    97209.": a true span, and no answer. For a *where* question whose answer a passage holds
    verbatim, the comma-separated parts that follow it there, each of capitalised words or
    numbers (a street, a town, a state and postcode), are part of the same value when one of
    them holds a digit (a street number, a postcode); "Paris, France" and a list of names have
    none, so they stay as the reader gave them. The answer only grows by the passage's own
    words: a claim is never changed into another one."""
    if not _PLACE_QUESTION.search(question) or not answer.strip():
        return answer
    needle = " ".join(answer.split()).lower()
    for text in texts:
        flat = " ".join(text.split())
        lowered = flat.lower()
        start = lowered.find(needle)
        while start >= 0:
            end = start + len(needle)
            bounded = (start == 0 or not flat[start - 1].isalnum()) and (
                end == len(flat) or not flat[end].isalnum())
            position = end
            while bounded and (part := _ADDRESS_PART.match(flat, position)):
                position = part.end()
            if position > end and any(ch.isdigit() for ch in flat[end:position]):
                return flat[start:position]
            start = lowered.find(needle, start + 1)
    return answer


def cite(answer: str, pairs: list[tuple[str, str]]) -> list[str]:
    """The passages an answer rests on: those that contain it, else those sharing most words."""
    needle = " ".join(answer.lower().split())
    containing = [pid for pid, text in pairs if needle and needle in " ".join(text.lower().split())]
    if containing:
        return containing
    answer_words = set(content_words(answer))
    overlaps = [(len(answer_words & set(content_words(text))), pid) for pid, text in pairs]
    best = max((count for count, _ in overlaps), default=0)
    return [pid for count, pid in overlaps if best and count == best]


class LLMReader:
    """Answers from passages with one chat backend (the unit a Ring 3 panel member uses)."""

    uses_llm = True

    def __init__(self, backend: ChatBackend, prompt_style: PromptStyle = "auto", *,
                 max_tokens: int = 48, seed: int = 0, instruction: str = INSTRUCTION):
        if prompt_style not in PROMPT_STYLES:
            raise ValueError(f"unknown prompt style {prompt_style!r}; known: "
                             f"{', '.join(PROMPT_STYLES)}")
        self.backend = backend
        self.instruction = instruction
        self.name = backend.name
        self.vendor = backend.vendor
        if prompt_style == "auto":
            # base models (no chat template) need the worked example; chat models do not
            has_template = getattr(backend, "chat_template", True)
            prompt_style = "chat" if has_template else "few-shot"
        self.prompt_style = prompt_style
        # a base model's answer is the rest of the "Answer:" line; stopping at the newline
        # saves generating the next (invented) example
        stop = ("\n",) if prompt_style == "few-shot" else ()
        self.params = GenerationParams(temperature=0.0, max_tokens=max_tokens, seed=seed,
                                       stop=stop)

    def __repr__(self) -> str:
        return f"LLMReader({self.backend!r}, {self.prompt_style!r})"

    def quoting(self) -> LLMReader:
        """The same model asked for the context's exact words (:data:`QUOTE_INSTRUCTION`).

        Why: Ring 3 asks its second reader when the panel's answer is in no passage; when the
        second reader is the model that gave that answer (the default panel's reader), the
        same prompt returns the same answer, a call that cannot help. Asked to copy the
        phrase, the 1.5B gave the stated span where its own words had been refused ("about
        four men attending Harvard College for every woman studying at Radcliffe" for "4:1")."""
        return LLMReader(self.backend, self.prompt_style, max_tokens=self.params.max_tokens,
                         seed=self.params.seed, instruction=QUOTE_INSTRUCTION)

    def answer(self, question: str, passages: list[Passage]) -> ReaderAnswer:
        pairs = passage_pairs(passages)
        pairs, messages, packing = self._fit(question, pairs)
        response = self.backend.chat(messages, self.params)
        text, refused = parse_reply(response.text)
        if not refused:
            text = complete_address(text, question, [passage for _, passage in pairs])
        return ReaderAnswer(text=text, citations=[] if refused else cite(text, pairs),
                            refused=refused, raw=response.text,
                            prompt_tokens=response.prompt_tokens,
                            completion_tokens=response.completion_tokens,
                            seconds=response.seconds, cached=response.cached,
                            model=response.model,
                            packing=packing.describe() if packing is not None else "")

    def _fit(self, question: str, pairs: list[tuple[str, str]]
             ) -> tuple[list[tuple[str, str]], list[ChatMessage], Packing | None]:
        """The prompt for these passages, packed into the model's window when the backend can
        count tokens (:mod:`trishield.llm.context_budget`); as built otherwise."""
        def build(kept: list[tuple[str, str]]) -> list[ChatMessage]:
            return build_messages(question, kept, self.prompt_style, self.instruction)

        if not isinstance(self.backend, TokenCounter):
            return pairs, build(pairs), None
        cached = getattr(self.backend, "has_response", None)
        fits = None if cached is None else (lambda messages: cached(messages, self.params))
        return fit_passages(question, pairs, build, self.backend, self.params.max_tokens,
                            fits=fits)
