"""Ring 1's pattern signals: text shapes that poisons and injections have and evidence lacks.

Each detector returns the evidence it found (a short quote of the text as written), so the
trace can say *why* a document scored, not only how much. Weights combine the detectors by
noisy-OR: several weak signals add up, one strong signal is enough, and the score stays in
[0, 1]. Every detector reads the normalised text (:mod:`trishield.rings.normalise`), and the
query is normalised the same way, so invisible and look-alike characters hide nothing; the
``obfuscated_text`` detector (:mod:`trishield.rings.obfuscation`) scores their presence.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from functools import lru_cache

from pydantic.dataclasses import dataclass as config_dataclass

from trishield.rings.config_types import CONFIG, Unit
from trishield.rings.misspelling import misspelt_question_words, unknown_words
from trishield.rings.normalise import Normalised, lowered, normalise, visible
from trishield.rings.obfuscation import (
    Obfuscation,
    disguises,
    obfuscated_words,
    written_in_disguise,
)
from trishield.rings.questions import questions
from trishield.text import word_spans, words

AUTHORITY_PHRASES = (
    "verified records", "multiple independent sources", "officially confirmed",
    "independent sources confirm", "it is confirmed that", "according to verified",
    "authoritative sources", "has been officially", "records confirm", "experts confirm",
    "it is a well-known fact", "undisputed fact", "the correct answer is", "the answer is",
    "confirmed by multiple", "widely verified", "definitive answer",
)

INJECTION_PHRASES = (
    "ignore previous instructions", "ignore all previous", "ignore the previous",
    "ignore prior instructions", "disregard previous", "disregard all prior",
    "disregard the above", "forget previous instructions", "forget your instructions",
    "system update", "system prompt", "your new instructions", "new instructions:",
    "new instructions follow", "you must answer",
    "you must respond", "you must reply", "always answer",
    "respond only with", "policy update effective immediately",
    "supersedes all previous", "this message is from the administrator",
)

"""Instruction phrases addressed to the reader (the model). "New instructions" alone names
instructions in prose ("New instructions for registering media type handlers", a changelog);
only addressed ("your new instructions") or as a label ("new instructions:") does it give
one."""


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A phrase as whole words: "system update" is not in "filesystem updates"."""
    return re.compile(rf"(?<!\w){re.escape(phrase)}(?!\w)")


_PHRASES = {phrase: _phrase_pattern(phrase) for phrase in AUTHORITY_PHRASES + INJECTION_PHRASES}

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,}(?![0-9A-Fa-f])")
SHORT_DOCUMENT_WORDS = 80
PASSAGE_WORDS = 300
"""About the longest text a reader is given as one passage (a chunk is 120 words and its
overlap by default; the longest PoisonedRAG poison of any family is 235). The weak cues
(:data:`PER_WORD_CUES`) of a longer text weigh ``PASSAGE_WORDS / words`` of their weight."""
PER_WORD_CUES = frozenset({"question_inside", "authority_once", "authority"})
"""Cues that ordinary prose produces now and then, at a rate per word: a manual of 20,000
words almost surely asks a question somewhere ("What if it looks like your plugin is not being
loaded?") and says "officially" once. In a passage they are evidence of a pasted question or
stacked appeals; spread over a whole long document they are evidence of its length. At ingest
Ring 1 judges whole documents, and Vim's help files, ingested as a new writer's, were
quarantined for a question plus being a new topic (``S_out``). After retrieval a chunk is
judged on its own, at full weight, so a poison padded into a long document loses nothing
there. Injection phrases, payloads and disguises are never ordinary and keep their weight."""


@dataclass(frozen=True)
class PatternHit:
    """One detector that fired, its weight, and the text that made it fire."""

    name: str
    weight: float
    evidence: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "weight": self.weight, "evidence": self.evidence}


@config_dataclass(frozen=True, config=CONFIG)
class PatternWeights:
    """Per-detector weights (noisy-OR). Defaults: see ``trishield.eval.calibration``."""

    question_opening: Unit = 0.6
    question_inside: Unit = 0.25
    query_verbatim: Unit = 0.8
    authority: Unit = 0.5
    """Two or more distinct authority phrases: the stacked appeals of poison boilerplate
    ("according to verified records from multiple independent sources, the answer is")."""
    authority_once: Unit = 0.3
    """A single authority phrase: ordinary prose has one now and then ("was officially
    confirmed", "an undisputed fact"), so alone it flags (``0.6 * 0.3 = 0.18``) and blocks
    only with another detector, as ``obfuscated_text`` does."""
    injection: Unit = 0.9
    encoded_payload: Unit = 0.7
    obfuscated_text: Unit = 0.3
    """Alone it flags (``0.6 * 0.3 = 0.18``: over ``flag_theta``, under ``theta``); with any
    other detector it blocks. Scraped text has stray invisible characters; hiding a trigger
    with them is what a poison does."""
    disguised_text: Unit = 0.5
    """The text as a whole is written in look-alike or styled letters (most of what reads as
    ASCII is disguised): no stray characters of scraped text, and hidden from the embedding
    that would find the text it copies; blocks alone (``0.6 * 0.5 = 0.3``)."""
    misspelt_query: Unit = 0.5
    """The passage misspells the question's own words (:mod:`trishield.rings.misspelling`):
    hidden from the evidence reader, not from the model; blocks alone, as disguised text
    does."""


MIN_PAYLOAD_WORDS = 3
"""Words a decoded blob must hold to be a payload: an instruction needs a verb and what it
acts on. Software documentation is full of encoded *data* (a JWT's header and claims, an API's
pagination token: base64 of compact JSON such as ``{"NextToken": null}``), which decodes to
readable characters but not to words for a reader; such blobs are no payload (their text is
still searched for injection phrases)."""
_PAYLOAD_PUNCTUATION = "\"'`()[]{}<>.,;:!?"


def _decodes_to_text(blob: bytes) -> str | None:
    try:
        decoded = blob.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch.isspace() for ch in decoded)
    letters = sum(ch.isalpha() for ch in decoded)
    if len(decoded) >= 8 and printable / len(decoded) > 0.95 and letters / len(decoded) > 0.5:
        return decoded
    return None


def reads_as_words(decoded: str) -> bool:
    """Whether decoded text is written for a reader: at least :data:`MIN_PAYLOAD_WORDS` of
    its whitespace-separated tokens are words (letters, an apostrophe or hyphen inside, once
    surrounding quotes, brackets and punctuation are stripped), and words are at least half
    of its tokens. JSON keys joined by quotes and colons, identifiers with underscores and
    numbers are not words."""
    tokens = decoded.split()
    found = 0
    for token in tokens:
        word = token.strip(_PAYLOAD_PUNCTUATION)
        if len(word) >= 2 and word.replace("'", "").replace("-", "").isalpha():
            found += 1
    return found >= MIN_PAYLOAD_WORDS and 2 * found >= len(tokens)


def decoded_blobs(text: str) -> list[str]:
    """Every base64 or hex blob in ``text`` that decodes to readable characters (decoded),
    whether or not it reads as words: injection phrases are looked for in all of them."""
    blobs: list[str] = []
    for match in _BASE64.finditer(text):
        blob = match.group()
        if blob.isalpha() and (blob.islower() or blob.isupper()):
            continue  # a long plain word, not an encoding
        try:
            decoded = _decodes_to_text(base64.b64decode(blob + "=" * (-len(blob) % 4)))
        except (binascii.Error, ValueError):
            decoded = None
        if decoded:
            blobs.append(decoded)
    for match in _HEX.finditer(text):
        decoded = _decodes_to_text(bytes.fromhex(match.group()))
        if decoded:
            blobs.append(decoded)
    return blobs


def encoded_payloads(text: str) -> list[str]:
    """Base64 or hex blobs in ``text`` that decode to words for a reader (returned decoded):
    hidden text, not encoded data (:func:`reads_as_words`)."""
    return [decoded for decoded in decoded_blobs(text) if reads_as_words(decoded)]


def _quoted_query(text: Normalised, query: str) -> tuple[int, int] | None:
    """Where the (normalised) query's words appear consecutively in ``text``, if they do."""
    wanted = list(_query_words(query))
    if len(wanted) < 3:
        return None
    spans = word_spans(text.text)
    tokens = [word for word, _, _ in spans]
    for index in range(len(tokens) - len(wanted) + 1):
        if tokens[index:index + len(wanted)] == wanted:
            return spans[index][1], spans[index + len(wanted) - 1][2]
    return None


@lru_cache(maxsize=256)
def _query_words(query: str) -> tuple[str, ...]:
    """The query's words as the detectors read them; one question is checked against every
    candidate of its pool, so it is normalised once."""
    return tuple(words(normalise(query).text))


@lru_cache(maxsize=256)
def _quote_needle(query: str) -> str | None:
    """What :attr:`TextSignals.words` holds, space-delimited, when the text quotes ``query``
    (``None``: too short a query to count as quoted)."""
    wanted = _query_words(query)
    return f" {' '.join(wanted)} " if len(wanted) >= 3 else None


@dataclass(frozen=True)
class TextSignals:
    """What the pattern detectors find in a text whatever the question: computed once per
    passage (at ingest, :mod:`trishield.rings.analysis`) and completed per question by
    :func:`pattern_hits`. Hits are kept without weights (the weights are configuration, the
    findings are not), in the order :func:`detect_patterns` reports them."""

    question: tuple[str, str] | None
    """``(question_opening | question_inside, quote)`` of the first question sentence."""
    question_disguise: Obfuscation | None
    """How that question's cue words are disguised, if they are."""
    phrases: tuple[tuple[str, str], ...]
    """``(authority | authority_once | injection, evidence)``, in that order."""
    phrase_disguises: tuple[Obfuscation, ...]
    """The disguised phrase triggers, in the order the phrases were found."""
    payload: str | None
    """The first encoded payload, decoded (evidence of ``encoded_payload``)."""
    word_obfuscations: tuple[Obfuscation, ...]
    disguised: str | None
    """Evidence of ``disguised_text``."""
    words: str
    """The normalised text's words joined by single spaces: whether the query is quoted is
    a substring test on it (words hold no spaces), and only a passage that passes it is
    normalised again to find where."""
    unknown: str = ""
    """Its words that may be misspellings (:func:`~trishield.rings.misspelling.unknown_words`:
    no English word), which ``misspelt_query`` reads against the question."""


def text_signals(text: str) -> TextSignals:
    """Every query-independent detector of :func:`detect_patterns` on ``text``."""
    plain = normalise(text)
    folded = lowered(plain)
    tokens = words(plain.text)
    short = len(tokens) <= SHORT_DOCUMENT_WORDS
    question: tuple[str, str] | None = None
    question_disguise: Obfuscation | None = None
    found = questions(plain.text)
    if found:
        first = found[0]
        quote = visible(plain.original_span(first.start, first.end))[:120]
        question_disguise = disguises(plain.original_span(first.cue_start, first.cue_end))
        name = "question_opening" if first.number == 0 and short else "question_inside"
        question = (name, quote)
    blobs = decoded_blobs(plain.text)
    payloads = [blob for blob in blobs if reads_as_words(blob)]
    decoded = lowered(normalise(" ".join(blobs))).text
    phrases: list[tuple[str, str]] = []
    phrase_disguises: list[Obfuscation] = []
    for name, listed in (("authority", AUTHORITY_PHRASES), ("injection", INJECTION_PHRASES)):
        matched = []
        covered: list[tuple[int, int]] = []  # where in the text, to count distinct appeals
        for phrase in listed:
            hit = _PHRASES[phrase].search(folded.text)
            if hit:
                if any(hit.start() < end and start < hit.end() for start, end in covered):
                    continue  # "according to verified" inside "... verified records"
                covered.append(hit.span())
                span = folded.original_span(*hit.span())
                disguise = disguises(span)
                if disguise:
                    phrase_disguises.append(disguise)
                matched.append(visible(" ".join(span.split())))
            elif _PHRASES[phrase].search(decoded):
                matched.append(phrase)
        if not matched:
            continue
        if name == "injection":
            phrases.append((name, ", ".join(matched[:4])))
        elif len(matched) >= 2:
            phrases.append(("authority", ", ".join(matched[:4])))
        else:
            phrases.append(("authority_once", matched[0]))
    disguised = written_in_disguise(text)
    return TextSignals(
        question=question, question_disguise=question_disguise, phrases=tuple(phrases),
        phrase_disguises=tuple(phrase_disguises),
        payload=payloads[0][:120] if payloads else None,
        word_obfuscations=tuple(obfuscated_words(text)),
        disguised=disguised.evidence if disguised else None, words=" ".join(tokens),
        unknown=unknown_words(tokens))


def quoted_query(signals: TextSignals, text: str, query: str) -> str | None:
    """The words of ``text`` (as written) that quote the normalised ``query``, if any. The
    substring test on :attr:`TextSignals.words` is exact as a filter (a quote's words are
    consecutive words of the text); only a passage that passes it is normalised again."""
    needle = _quote_needle(query)
    if needle is None or needle not in f" {signals.words} ":
        return None
    plain = normalise(text)
    quoted = _quoted_query(plain, query)
    return None if quoted is None else plain.original_span(*quoted)


def pattern_hits(signals: TextSignals, text: str, *, query: str | None = None,
                 weights: PatternWeights | None = None) -> list[PatternHit]:
    """:func:`detect_patterns` from a text's :class:`TextSignals`: the query-dependent
    detectors (``query_verbatim`` and whether the quote is disguised, ``misspelt_query``) run
    now, the weights applied."""
    weights = weights or PatternWeights()
    hits: list[PatternHit] = []
    obfuscations: list[Obfuscation] = []
    length = signals.words.count(" ") + 1 if signals.words else 0
    spread = min(1.0, PASSAGE_WORDS / length) if length else 1.0

    def cue(name: str, evidence: str) -> PatternHit:
        """A hit at its weight, or, for a per-word cue of a text longer than a passage, at
        the passage's share of it (the evidence says so)."""
        weight = getattr(weights, name)
        if name in PER_WORD_CUES and spread < 1.0:
            return PatternHit(name, weight * spread,
                              f"{evidence} (one cue in {length} words: weight x{spread:.3f})")
        return PatternHit(name, weight, evidence)

    if signals.question is not None:
        name, quote = signals.question
        hits.append(cue(name, quote))
        if signals.question_disguise is not None:
            obfuscations.append(signals.question_disguise)
    span = quoted_query(signals, text, query) if query else None
    if span is not None:
        hits.append(PatternHit("query_verbatim", weights.query_verbatim, visible(span)[:120]))
        disguise = disguises(span)
        if disguise:
            obfuscations.append(disguise)
    misspelt = (misspelt_question_words(signals.words, signals.unknown, _query_words(query))
                if query else [])
    if misspelt:
        hits.append(PatternHit("misspelt_query", weights.misspelt_query,
                               ", ".join(f"{written}~{meant}" for written, meant in misspelt)))
    hits += [cue(name, evidence) for name, evidence in signals.phrases]
    if signals.payload is not None:
        hits.append(PatternHit("encoded_payload", weights.encoded_payload, signals.payload))
    obfuscations += signals.phrase_disguises
    obfuscations += [o for o in signals.word_obfuscations
                     if not any(o.word in seen.word for seen in obfuscations)]
    if obfuscations:
        evidence = "; ".join(dict.fromkeys(o.evidence for o in obfuscations[:3]))
        hits.append(PatternHit("obfuscated_text", weights.obfuscated_text, evidence[:240]))
    if signals.disguised is not None:
        hits.append(PatternHit("disguised_text", weights.disguised_text, signals.disguised))
    return hits


def detect_patterns(text: str, *, query: str | None = None,
                    weights: PatternWeights | None = None) -> list[PatternHit]:
    """Every pattern detector that fires on ``text`` (and on ``query``, when known).

    Detectors read ``text`` normalised; evidence quotes the text as written (invisible
    characters shown as ``\\u200b`` escapes).
    """
    return pattern_hits(text_signals(text), text, query=query, weights=weights)


def pattern_score(hits: list[PatternHit]) -> float:
    """Noisy-OR of the fired detectors' weights: ``1 - prod(1 - w)``."""
    remaining = 1.0
    for hit in hits:
        remaining *= 1.0 - hit.weight
    return 1.0 - remaining
