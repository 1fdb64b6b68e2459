"""Claims: what answer to the question each passage gives, without a model.

A poison works by *stating* an answer, so the unit of evidence is a stated answer, not a
passage and not a word overlap. Without an extractive-QA or NLI model (none ships offline, see
docs/design/ring3-consensus.md), a passage's claim is read from its text:

* the passage must be **about the question**: it holds at least :data:`MIN_RELEVANCE` of the
  question's own terms (question phrasing such as "how" or "name" aside);
* its **answer-bearing sentences** are those that share the most question terms;
* its document's **title** counts as said in every sentence (:func:`subject_terms`): a
  paragraph leaves its article's subject to "it", and read without it gave no answer;
* in them, the **candidate answers** are the spans of the type the question asks for
  (:func:`answer_type`: a number, a date, a name, or any of these) that do not merely repeat
  the question.

Two passages state the same claim when they share a candidate span (compared after
normalisation). What a passage says about a *given* answer is decided differently, by
containment (:func:`states`): a passage that contains the answer's core terms supports it,
whatever its spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, NamedTuple

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
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                 "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                 "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty",
                 "seventy", "eighty", "ninety", "hundred", "thousand", "million", "billion")
_NUMBER_DIGITS = r"(?<![\w.])[$£€]?\d+(?:[.,]\d+)*(?:\s*%)?"
_NUMBER_SPELT = (rf"\b(?:{'|'.join(_NUMBER_WORDS)})(?:[- ](?:one|two|three|four|five|six|"
                 r"seven|eight|nine|hundred|thousand|million|billion))*\b")
_NUMBER = re.compile(f"{_NUMBER_DIGITS}|{_NUMBER_SPELT}", re.IGNORECASE)
_DIGITS_ONLY = re.compile(_NUMBER_DIGITS, re.IGNORECASE)
_SPELT_ONLY = re.compile(_NUMBER_SPELT, re.IGNORECASE)
_NUMBER_WORD_SET = frozenset(_NUMBER_WORDS)
_WORD_RUN = re.compile(r"\w+")
_NAME_WORD = r"(?:[A-Z][\w'\u2019.&-]*|\d+[A-Za-z]*)"
_CONNECTOR = r"(?:of|de|du|da|del|der|la|le|van|von|the|and|&|y)"
_NAME = re.compile(rf"{_NAME_WORD}(?:\s+(?:{_CONNECTOR}\s+)?{_NAME_WORD})*")
_DIGIT = re.compile(r"\d")
_OPENING = re.compile(r"[\w']+\s+")
_WORD = re.compile(r"[\w']+")


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
class Asked:
    """What a question asks, read once per question (Ring 2 reads a pool of 20 passages for
    one question, so nothing here is recomputed per passage)."""

    terms: frozenset[str]
    """:func:`question_terms`: what a passage must share to be about the question."""
    kind: AnswerType
    """:func:`answer_type`: which spans answer it."""
    words: frozenset[str]
    """Every stemmed word of the question: a span made only of these merely echoes it."""
    needles: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Each of :attr:`terms` between single spaces, to count how many a stored term set
    (terms joined by spaces) holds by substring tests: exact, since a term holds no space,
    and cheaper than splitting the set (:func:`claim_of`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "needles", tuple(f" {term} " for term in sorted(self.terms)))

    def held_by(self, joined_terms: str) -> int:
        """How many of the question's terms a stored term set (terms joined by single spaces)
        holds: ``len(terms & set(joined_terms.split()))`` without building the set."""
        padded = f" {joined_terms} "
        held = 0
        for needle in self.needles:
            if needle in padded:
                held += 1
        return held


def read_question(question: str) -> Asked:
    """The question as :func:`claim_of` reads passages against it."""
    return Asked(frozenset(question_terms(question)), answer_type(question),
                 frozenset(stem(w) for w in re.findall(r"[\w']+", question.lower())))


@lru_cache(maxsize=4096)
def subject_terms(title: str) -> str:
    """A document title's stemmed terms, joined by spaces (the form of a stored term set):
    what every passage of the document is about, whether its text says so or leaves it to
    "it" and "the stories" (a Wikipedia paragraph rarely repeats its article's name).
    Underscores separate words, as SQuAD writes its titles ("Victoria_and_Albert_Museum")."""
    return _joined(set(index_terms(title.replace("_", " "))))


@dataclass(frozen=True)
class Span:
    """A candidate answer: its text as written and the key two claims are compared by."""

    text: str
    key: str
    kind: str


MEMO_PASSAGES = 2048
"""Passages whose :class:`Reading` is kept in process: the last ~100 wiki5k pools of 20
(retrieved passages recur across related questions, and Ring 3 reads the context again).
Bounded, least recently used dropped: with :data:`MEMO_SENTENCES` about 16 KB a passage
measured on wiki5k (sentences, term sets, spans), so 30-35 MB at most."""
MEMO_SENTENCES = 8192
"""(Sentence, span kind) pairs whose :class:`Found` spans are kept (about 3.4 per passage
read on wiki5k), and span texts whose keys are."""


@lru_cache(maxsize=MEMO_SENTENCES)
def _key(text: str) -> str:
    """A span's comparison key; spans recur (one name in many passages), so kept."""
    return normalize_answer(canonical_numbers(text))


_COMPONENTS: dict[AnswerType, tuple[str, ...]] = {
    "date": ("date",), "number": ("number",), "name": ("name",),
    "any": ("date", "number", "name")}
"""The span kinds each answer type looks for, in the order their spans are listed."""


class Found(NamedTuple):
    """A span of one kind in one sentence, with what does not depend on the question: its
    place, its text and comparison key, the stems of its key (to tell an echo of the
    question) and the terms of the :data:`WINDOW_WORDS` words either side of it. (A named
    tuple, like :class:`Sentence` and :class:`Reading`: thousands are built when a pool is
    read cold, three times faster than frozen dataclasses.) A stored reading
    (:class:`StoredReading`) holds the same six fields as a JSON list, term sets as text."""

    start: int
    end: int
    text: str
    key: str
    key_stems: frozenset[str]
    window: frozenset[str]


class Sentence(NamedTuple):
    """One sentence of a passage and its stemmed content terms."""

    text: str
    terms: frozenset[str]


class Reading(NamedTuple):
    """A passage read once, whatever the question: its terms and its sentences."""

    terms: frozenset[str]
    sentences: tuple[Sentence, ...]


@lru_cache(maxsize=MEMO_PASSAGES)
def read_passage(text: str) -> Reading:
    """Tokenising and splitting a passage is the cost of reading it, and it does not depend
    on the question: done once per text and kept (bounded). The passage's terms are the
    union of its sentences' (no word crosses a sentence boundary: the text between two
    sentences is whitespace, closing quotes or brackets), so it is tokenised once."""
    parts = tuple(Sentence(s, frozenset(index_terms(s))) for s in sentences(text))
    return Reading(frozenset().union(*(part.terms for part in parts)), parts)


def _window(sentence: str, start: int, end: int) -> frozenset[str]:
    # only the words next to the span are split off (the same words as splitting it all)
    before = sentence[:start].rsplit(None, WINDOW_WORDS)[-WINDOW_WORDS:]
    after = sentence[end:].split(None, WINDOW_WORDS)[:WINDOW_WORDS]
    return frozenset(index_terms(" ".join(before + after)))


def _found(sentence: str, start: int, end: int, text: str) -> Found:
    key = _key(text)
    return Found(start, end, text, key, frozenset(stem(w) for w in key.split()),
                 _window(sentence, start, end))


@lru_cache(maxsize=MEMO_SENTENCES)
def spans_in(sentence: str, component: str) -> tuple[Found, ...]:
    """Every candidate answer of one kind (``date``, ``number``, ``name``) in ``sentence``,
    echoes of the question included (:func:`claim_of` drops those for its question). The
    regex scans are most of a passage's reading: done once per sentence and kind, kept."""
    if component == "date":
        if not _DIGIT.search(sentence):
            return ()  # every date has a digit; two thirds of sentences have none
        return tuple(_found(sentence, m.start(), m.end(), m.group(0))
                     for m in _DATE.finditer(sentence))
    if component == "number":
        return tuple(_found(sentence, m.start(), m.end(), m.group(0))
                     for m in _numbers(sentence))
    if component != "name":
        raise ValueError(f"unknown span kind {component!r}; known: date, number, name")
    found = []
    for match in _NAME.finditer(sentence):
        text = match.group(0).rstrip(".'\u2019-&")
        start = match.start()
        while (opening := _OPENING.match(text)) and (
                opening.group(0).strip().lower() in STOPWORDS):
            text, start = text[opening.end():], start + opening.end()
        words = _WORD.findall(text.lower())
        if not [w for w in words if w not in STOPWORDS]:
            continue
        if start == 0 and len(words) == 1:
            continue  # a capitalised sentence opening ("Remarkably"), not a name
        found.append(_found(sentence, start, start + len(text), text))
    return tuple(found)


def _numbers(sentence: str) -> list[re.Match[str]]:
    """``_NUMBER.finditer(sentence)``, about twice as fast on ASCII text.

    The spelt-out alternative (31 words, case-insensitive, tried at every word boundary) is
    most of the scan. Its matches and the digits' can neither overlap nor start at one place
    (letters, spaces and hyphens against digits, currency, separators and a space only before
    ``%``), so the two are scanned apart and merged by position, each only when it can match:
    digits when there is a digit, spelt numbers when a whole word is one (a spelt match
    starts at a word boundary and its first word ends at one). On ASCII text case-insensitive
    matching is matching the lower-cased text; elsewhere (U+017F matches "s") the one scan."""
    if not sentence.isascii():
        return list(_NUMBER.finditer(sentence))
    found = list(_DIGITS_ONLY.finditer(sentence)) if _DIGIT.search(sentence) else []
    if not _NUMBER_WORD_SET.isdisjoint(_WORD_RUN.findall(sentence.lower())):
        found += _SPELT_ONLY.finditer(sentence)
        found.sort(key=lambda match: match.start())
    return found


def clear_memo() -> None:
    """Forget every passage read so far (to measure a cold start; nothing else needs it)."""
    read_passage.cache_clear()
    spans_in.cache_clear()
    _key.cache_clear()


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
    """The candidate answers ``text`` gives to ``question`` (see :func:`claim_of`)."""
    return claim_of(read_question(question), text)


SPAN_KINDS: tuple[str, ...] = ("date", "number", "name")
"""Every span kind, in the order a stored reading lists a sentence's spans."""
_KIND_INDEX = {kind: index for index, kind in enumerate(SPAN_KINDS)}
KIND_SEPARATOR = "\x1e"
"""Separates a stored sentence's span lists of each kind: compact JSON escapes every
control character, so none of them holds it."""


class StoredReading(NamedTuple):
    """A passage's whole query-independent reading as stored at ingest
    (:mod:`trishield.rings.analysis`), in a form whose decoding allocates almost nothing but
    strings: the passage's terms, then per sentence its terms and its spans. A term set is
    its terms joined by spaces (a term holds no whitespace); a sentence's spans are one JSON
    list per kind (:data:`SPAN_KINDS` order: dates, numbers, names; ``""`` for a kind it has
    none of) joined by :data:`KIND_SEPARATOR`, each span a :class:`Found`'s six fields with
    its two term sets joined likewise, or ``""`` when it has none at all. Only a sentence
    that shares a question term has its spans decoded, and only of the kinds that answer the
    question (decoding every kind was most of reading a stored claim).

    Why strings: decoding nested JSON lists for every candidate of every question was as
    slow as reading the text again, most of it in the garbage collector (every list is a
    tracked object, and a large process's collections are long); strings are not tracked."""

    terms: str
    sentence_terms: Sequence[str]
    sentence_spans: Sequence[str]

    @classmethod
    def of(cls, text: str) -> StoredReading:
        """``text``'s reading in this form (what is stored with the chunk)."""
        reading = read_passage(text)
        spans = []
        for sentence in reading.sentences:
            kinds = [spans_in(sentence.text, kind) for kind in SPAN_KINDS]
            spans.append("" if not any(kinds) else KIND_SEPARATOR.join(
                "" if not found else json.dumps(
                    [[f.start, f.end, f.text, f.key, _joined(f.key_stems), _joined(f.window)]
                     for f in found], ensure_ascii=False, separators=(",", ":"))
                for found in kinds))
        return cls(_joined(reading.terms),
                   tuple(_joined(sentence.terms) for sentence in reading.sentences),
                   tuple(spans))

    def as_flat(self) -> list[str]:
        """The stored list: terms, then each sentence's terms and spans in turn."""
        return [self.terms, *(part for pair in zip(self.sentence_terms, self.sentence_spans,
                                                   strict=True) for part in pair)]

    @classmethod
    def from_flat(cls, parts: Sequence[str]) -> StoredReading:
        """:meth:`as_flat` reversed (refuses a list of the wrong shape)."""
        if len(parts) % 2 != 1 or set(map(type, parts)) != {str}:
            raise ValueError("a stored reading is a list of strings: the terms, then a terms "
                             "and spans pair per sentence")
        return cls(parts[0], parts[1::2], parts[2::2])

    def sentences(self) -> list[tuple[frozenset[str], tuple[tuple[Found, ...], ...]]]:
        """Every sentence's terms and spans per kind, decoded in full (for checks: a claim
        decodes only what its question needs)."""
        found = []
        for terms, spans in zip(self.sentence_terms, self.sentence_spans, strict=True):
            kinds = ([json.loads(kind) if kind else [] for kind in spans.split(KIND_SEPARATOR)]
                     if spans else [[] for _ in SPAN_KINDS])
            found.append((frozenset(terms.split()), tuple(
                tuple(Found(f[0], f[1], f[2], f[3], frozenset(f[4].split()),
                            frozenset(f[5].split())) for f in kind) for kind in kinds)))
        return found


def _joined(terms: Collection[str]) -> str:
    return " ".join(sorted(terms))


def whole_reading(text: str) -> list[tuple[frozenset[str], tuple[tuple[Found, ...], ...]]]:
    """What :func:`read_passage` and :func:`spans_in` give for ``text``, every sentence and
    span kind, in the shape of :meth:`StoredReading.sentences` (to compare the two)."""
    return [(sentence.terms, tuple(spans_in(sentence.text, kind) for kind in SPAN_KINDS))
            for sentence in read_passage(text).sentences]


def claim_of(asked: Asked, text: str, stored: StoredReading | None = None,
             subject: str = "") -> PassageClaim:
    """The candidate answers ``text`` gives to the question ``asked`` (see the module
    docstring), read from ``stored`` (the reading stored at ingest) when given, else from
    the in-process memos. ``subject``: the :func:`subject_terms` of the passage's document
    title, counted as said in every sentence of it ("Completed in 1998, it is a steel
    sculpture" in the article *Angel of the North*).

    Every span of the asked type in a sentence that shares a question term is scored by the
    question terms in its sentence plus twice those within :data:`WINDOW_WORDS` words of it
    (span scoring: "The season contained 23 episodes" puts 23 next to "season" and
    "episodes"; a date in the sentence that names the show sits next to neither). A span
    that only repeats the question ("season 4" asked about "season 4") answers nothing."""
    terms = asked.terms
    kinds = _COMPONENTS[asked.kind]
    scored: list[tuple[int, int, str, Found]] = []
    if stored is None:
        reading = read_passage(text)
        said = frozenset(subject.split())
        for sentence in reading.sentences:
            overlap = len(terms.intersection(sentence.terms | said))
            if overlap:
                for kind in kinds:
                    _score(spans_in(sentence.text, kind), kind, overlap, asked, scored)
        share = len(terms.intersection(reading.terms | said)) / len(terms) if terms else 0.0
    else:
        held_by = asked.held_by
        indexes = [(kind, _KIND_INDEX[kind]) for kind in kinds]
        for sentence_terms, spans in zip(stored.sentence_terms, stored.sentence_spans,
                                         strict=True):
            if spans:
                overlap = held_by(f"{sentence_terms} {subject}" if subject else sentence_terms)
                if overlap:
                    by_kind = spans.split(KIND_SEPARATOR)
                    for kind, index in indexes:
                        if by_kind[index]:
                            _score_stored(json.loads(by_kind[index]), kind, overlap, asked,
                                          scored)
        share = (held_by(f"{stored.terms} {subject}" if subject else stored.terms) / len(terms)
                 if terms else 0.0)
    scored.sort()  # best score first, then reading order (the second field is unique)
    spans: list[Span] = []
    keys: set[str] = set()
    for _, _, kind, found in scored:
        key = found[3]
        if key not in keys:
            keys.add(key)
            spans.append(Span(found[2], key, kind))
            if len(spans) == MAX_SPANS:
                break
    return PassageClaim(share, tuple(spans))


def _score(found_spans: Sequence[Found], kind: str, overlap: int, asked: Asked,
           scored: list) -> None:
    """Adds each span that answers (a key that is not only the question's words) with its
    score (negated: best first) and reading order."""
    terms, words = asked.terms, asked.words
    for found in found_spans:
        if found.key and not found.key_stems <= words:
            scored.append((-(overlap + 2 * len(terms & found.window)), len(scored),
                           kind, found))


def _score_stored(found_spans: Sequence[list], kind: str, overlap: int, asked: Asked,
                  scored: list) -> None:
    """:func:`_score` over stored spans (``[start, end, text, key, stems, window]``, term
    sets joined by spaces)."""
    held_by, words = asked.held_by, asked.words
    for found in found_spans:
        if found[3] and not words.issuperset(found[4].split()):
            scored.append((-(overlap + 2 * held_by(found[5])), len(scored), kind, found))


def states(answer: str, text: str, question: str = "") -> bool:
    """Whether ``text`` states ``answer``: it contains every term of the answer's core (the
    answer's own terms, the question's aside). An answer without own terms states nothing."""
    core = set(own_terms(answer, question))
    return bool(core) and core <= set(answer_core(text))
