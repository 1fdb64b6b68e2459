"""Claims: what answer to the question each passage gives, without a model.

A poison works by *stating* an answer, so the unit of evidence is a stated answer, not a
passage and not a word overlap. Without an extractive-QA or NLI model (none ships offline, see
docs/design.md), a passage's claim is read from its text:

* the passage must be **about the question**: it holds at least :data:`MIN_RELEVANCE` of the
  question's own terms (question phrasing such as "how" or "name" aside);
* its **answer-bearing sentences** are those that share the most question terms;
* in them, the **candidate answers** are the spans of the type the question asks for
  (:func:`answer_type`: a number, a date, a name, or any of these) that do not merely repeat
  the question.

Two passages state the same claim when they share a candidate span (compared after
normalisation). What a passage says about a *given* answer is decided differently, by
containment (:func:`states`): a passage that contains the answer's core terms supports it,
whatever its spans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from trishield.answers import answer_core, canonical_numbers, normalize_answer, own_terms
from trishield.text import QUESTION_PHRASING, STOPWORDS, index_terms, sentences, stem

AnswerType = Literal["number", "date", "name", "any"]

MIN_RELEVANCE = 0.5
"""A passage is about the question when it holds at least half of the question's terms.
Below that it may mention the answer's words by chance, and its silence is no dissent."""

_NUMBER_Q = re.compile(r"\bhow (many|much|long|old|far|often|tall|high|big|large|deep|wide|"
                       r"fast)\b|\bwhat (percentage|percent|number|amount)\b", re.IGNORECASE)
_DATE_Q = re.compile(r"\bwhen\b|\b(what|which) (year|date|day|month|century|decade|era)\b",
                     re.IGNORECASE)
_NAME_Q = re.compile(r"\b(who|whom|whose|where)\b", re.IGNORECASE)

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|"
           "december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(rf"\b(?:(?:\d{{1,2}}\s+)?(?:{_MONTHS})\.?(?:\s+\d{{1,2}})?,?\s+)?"
                   r"\d{3,4}s?\b(?:\s*(?:BC|BCE|AD|CE)\b)?"
                   r"|\b\d{1,2}(?:st|nd|rd|th)\s+century\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])[$£€]?\d+(?:[.,]\d+)*(?:\s*%)?"
                     r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                     r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|"
                     r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|"
                     r"million|billion)(?:[- ](?:one|two|three|four|five|six|seven|eight|nine|"
                     r"hundred|thousand|million|billion))*\b", re.IGNORECASE)
_NAME_WORD = r"(?:[A-Z][\w'\u2019.&-]*|\d+[A-Za-z]*)"
_CONNECTOR = r"(?:of|de|du|da|del|der|la|le|van|von|the|and|&|y)"
_NAME = re.compile(rf"{_NAME_WORD}(?:\s+(?:{_CONNECTOR}\s+)?{_NAME_WORD})*")


def answer_type(question: str) -> AnswerType:
    """What kind of span answers ``question``: its first wh-phrase decides ("where did he go
    when ..." asks for a place), "any" when none is recognised."""
    found = [(match.start(), kind) for kind, pattern in
             (("number", _NUMBER_Q), ("date", _DATE_Q), ("name", _NAME_Q))
             if (match := pattern.search(question))]
    return min(found)[1] if found else "any"


def question_terms(question: str) -> set[str]:
    """The question's own stemmed terms, phrasing ("how", "many", "name") aside."""
    terms = set(index_terms(question))
    return (terms - QUESTION_PHRASING) or terms


def relevance(question: str, text: str) -> float:
    """The share of the question's terms that ``text`` holds."""
    asked = question_terms(question)
    if not asked:
        return 0.0
    return len(asked & set(index_terms(text))) / len(asked)


@dataclass(frozen=True)
class Span:
    """A candidate answer: its text as written and the key two claims are compared by."""

    text: str
    key: str
    kind: str


def _key(text: str) -> str:
    return normalize_answer(canonical_numbers(text))


def _spans_of(sentence: str, kind: AnswerType,
              asked_words: set[str]) -> list[tuple[int, int, Span]]:
    """``(start, end, span)`` of every candidate answer of ``kind`` in ``sentence``."""
    found: list[tuple[int, int, Span]] = []
    if kind in ("date", "any"):
        found += [(m.start(), m.end(), Span(m.group(0), _key(m.group(0)), "date"))
                  for m in _DATE.finditer(sentence)]
    if kind in ("number", "any"):
        found += [(m.start(), m.end(), Span(m.group(0), _key(m.group(0)), "number"))
                  for m in _NUMBER.finditer(sentence)]
    if kind in ("name", "any"):
        for match in _NAME.finditer(sentence):
            text = match.group(0).rstrip(".'\u2019-&")
            start = match.start()
            while (opening := re.match(r"[\w']+\s+", text)) and (
                    opening.group(0).strip().lower() in STOPWORDS):
                text, start = text[opening.end():], start + opening.end()
            words = re.findall(r"[\w']+", text.lower())
            if not [w for w in words if w not in STOPWORDS]:
                continue
            if start == 0 and len(words) == 1:
                continue  # a capitalised sentence opening ("Remarkably"), not a name
            found.append((start, start + len(text), Span(text, _key(text), "name")))
    return [(start, end, span) for start, end, span in found
            if span.key and not _echoes(span.key, asked_words)]


def _echoes(key: str, asked_words: set[str]) -> bool:
    """A span whose every term is in the question answers nothing ("season 4" asked "season
    4"); a number of the question is an echo too."""
    return {stem(w) for w in key.split()} <= asked_words


@dataclass(frozen=True)
class PassageClaim:
    """What one passage says about the question: whether it is about it, and its candidate
    answers (strongest first: the answer-bearing sentence's spans in reading order)."""

    relevance: float
    spans: tuple[Span, ...]

    @property
    def about_question(self) -> bool:
        return self.relevance >= MIN_RELEVANCE

    @property
    def answers(self) -> bool:
        """About the question and gives a candidate answer of the asked type."""
        return self.about_question and bool(self.spans)


WINDOW_WORDS = 4
"""Words either side of a span that count as its neighbourhood ("contained 23 episodes")."""
MAX_SPANS = 6


def passage_claim(question: str, text: str) -> PassageClaim:
    """The candidate answers ``text`` gives to ``question`` (see the module docstring).

    Every span of the asked type in a sentence that shares a question term is scored by the
    question terms in its sentence plus twice those within :data:`WINDOW_WORDS` words of it
    (span scoring: "The season contained 23 episodes" puts 23 next to "season" and
    "episodes"; a date in the sentence that names the show sits next to neither)."""
    share = relevance(question, text)
    kind = answer_type(question)
    asked = question_terms(question)
    asked_words = {stem(w) for w in re.findall(r"[\w']+", question.lower())}
    scored: list[tuple[float, int, Span]] = []
    order = 0
    for sentence in sentences(text):
        overlap = len(asked & set(index_terms(sentence)))
        if not overlap:
            continue
        for start, end, span in _spans_of(sentence, kind, asked_words):
            before = sentence[:start].split()[-WINDOW_WORDS:]
            after = sentence[end:].split()[:WINDOW_WORDS]
            local = len(asked & set(index_terms(" ".join(before + after))))
            scored.append((overlap + 2 * local, order, span))
            order += 1
    spans: list[Span] = []
    for _, _, span in sorted(scored, key=lambda item: (-item[0], item[1])):
        if span.key not in {s.key for s in spans}:
            spans.append(span)
    return PassageClaim(share, tuple(spans[:MAX_SPANS]))


def states(answer: str, text: str, question: str = "") -> bool:
    """Whether ``text`` states ``answer``: it contains every term of the answer's core (the
    answer's own terms, the question's aside). An answer without own terms states nothing."""
    core = set(own_terms(answer, question))
    return bool(core) and core <= set(answer_core(text))
