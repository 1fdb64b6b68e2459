"""A deterministic extractive reader: no LLM, the best-matching sentence of the context.

It is the floor every LLM reader must beat and the reader that runs where no model can (CI,
a machine without the GGUF files). It answers with the one sentence whose stemmed content
words overlap most with the question, so it never invents anything, but it also cannot
paraphrase, combine passages or notice a contradiction.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from trishield.llm.base import NO_ANSWER, Passage, ReaderAnswer, passage_pairs
from trishield.text import index_terms, sentences, words

MODEL_NAME = "extractive"

_NUMBER = re.compile(r"\d")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+")
_NUMERIC_QUESTION = re.compile(r"\b(how (many|much|long|old|far|often)|when|what year|"
                               r"which year|what date|how large|how big)\b", re.IGNORECASE)
_PERSON_QUESTION = re.compile(r"\b(who|whom|whose)\b", re.IGNORECASE)
TYPE_BONUS = 0.5


@dataclass(frozen=True)
class _Candidate:
    score: float
    overlap: int
    passage: int
    sentence: int
    passage_id: str
    text: str


def _type_bonus(question: str, sentence: str, question_words: set[str]) -> float:
    """A small bonus for a sentence holding the kind of token the question asks for."""
    if _NUMERIC_QUESTION.search(question) and _NUMBER.search(sentence):
        return TYPE_BONUS
    if _PERSON_QUESTION.search(question):
        # capitalised words after the first, not already in the question: likely a name
        names = [m.group(0) for m in _CAPITALISED.finditer(sentence) if m.start() > 0]
        if any(name.lower() not in question_words for name in names):
            return TYPE_BONUS
    return 0.0


class ExtractiveReader:
    """Picks the context sentence that shares the most stemmed content words with the question.

    Ties go to the earlier passage (the context arrives in trust order) and then to the
    earlier sentence, so the answer depends only on the input.
    """

    name = MODEL_NAME
    vendor = "TriShield (no LLM)"
    uses_llm = False

    def answer(self, question: str, passages: list[Passage]) -> ReaderAnswer:
        started = time.perf_counter()
        question_terms = set(index_terms(question))
        question_words = set(words(question))
        best: _Candidate | None = None
        for position, (passage_id, text) in enumerate(passage_pairs(passages)):
            for index, sentence in enumerate(sentences(text)):
                if sentence.lstrip().startswith("#") or len(sentence.split()) < 4:
                    continue  # a heading or a fragment restates the question, it answers nothing
                overlap = len(question_terms & set(index_terms(sentence)))
                if overlap == 0:
                    continue
                score = overlap + _type_bonus(question, sentence, question_words)
                candidate = _Candidate(score, overlap, position, index, passage_id, sentence)
                if best is None or (-score, position, index) < (-best.score, best.passage,
                                                                  best.sentence):
                    best = candidate
        seconds = time.perf_counter() - started
        if best is None:
            return ReaderAnswer(text=NO_ANSWER, citations=[], refused=True, raw="",
                                prompt_tokens=0, completion_tokens=0, seconds=seconds,
                                cached=False, model=MODEL_NAME)
        return ReaderAnswer(text=best.text, citations=[best.passage_id], refused=False,
                            raw=best.text, prompt_tokens=0, completion_tokens=0,
                            seconds=seconds, cached=False, model=MODEL_NAME)
