"""Ring 1's query-independent analysis of a passage, computed once (at ingest) and stored.

Most of what Ring 1 computes about a retrieved passage does not depend on the question: the
repetition signal, every pattern detector but ``query_verbatim``, the word tokens the
tampered-copy comparison aligns. Recomputing it for every candidate of every question was
most of Ring 1's time after retrieval. So the KB asks a :class:`PassageAnalyser` (its
:class:`~trishield.kb.analysis.ChunkAnalyser`) for each chunk's analysis when the chunk is
written, stores it beside the chunk in the same transaction, and hands it back with the
chunk; :class:`~trishield.defenses.ring_stages.Ring1Filter` completes it with the question.

The verdicts are the same either way, by construction: :func:`trishield.rings.patterns.
detect_patterns` *is* :func:`~trishield.rings.patterns.text_signals` followed by
:func:`~trishield.rings.patterns.pattern_hits`, and the guard judges from an analysis in both
paths. What keeps a stored analysis honest is its version (:data:`ANALYSIS_VERSION`): a hash
of the source of every module the analysis runs, of the Unicode data and of the libraries it
reads. A stored analysis of another version is never used: the passage is analysed again in
the process (and memoised), until ``trishield compact`` rewrites the stale rows.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import sys
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from trishield.kb.analysis import StoredAnalysis
from trishield.rings.claims import StoredReading
from trishield.rings.conflicts import NumericClaim, read_numbers
from trishield.rings.obfuscation import Obfuscation
from trishield.rings.patterns import TextSignals, text_signals
from trishield.rings.perplexity import perplexity_score
from trishield.rings.tamper import Token, tokens

FORMAT = 5
"""The stored layout below; part of the version."""
_ANALYSED_BY = ("trishield.rings.analysis", "trishield.rings.claims",
                "trishield.rings.conflicts", "trishield.answers", "trishield.rings.patterns",
                "trishield.rings.normalise", "trishield.rings.obfuscation",
                "trishield.rings.questions", "trishield.rings.perplexity",
                "trishield.rings.tamper", "trishield.rings.misspelling", "trishield.text",
                "trishield.homoglyphs")
_LIBRARIES = ("regex", "confusable-homoglyphs", "bm25s", "PyStemmer", "pyspellchecker")


def _version() -> str:
    """A hash of everything that decides an analysis: the source of the modules that compute
    it, Python's Unicode data, and the versions of the libraries they read (look-alike table,
    Unicode properties, stop words, stemmer). Any edit to one of them makes every stored
    analysis stale, which costs speed until the backfill, never correctness."""
    digest = hashlib.sha256(f"format {FORMAT}; unicode {unicodedata.unidata_version}; "
                            f"regex unicode {regex.__version__}".encode())
    for name in _ANALYSED_BY:
        module = sys.modules.get(name) or importlib.import_module(name)
        digest.update(name.encode() + b"\0" + Path(module.__file__).read_bytes())
    for package in _LIBRARIES:
        try:
            found = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found = "absent"
        digest.update(f"{package}=={found}".encode())
    return f"ring1-{FORMAT}-{digest.hexdigest()[:16]}"


@dataclass(frozen=True)
class Ring2Reading:
    """What Ring 2 reads in a passage whatever the question: its sentences, terms and
    candidate answer spans (:class:`~trishield.rings.claims.StoredReading`) and its numeric
    claims (:func:`~trishield.rings.conflicts.read_numbers`)."""

    reading: StoredReading
    numbers: tuple[NumericClaim, ...]


@dataclass(frozen=True)
class PassageAnalysis:
    """One passage's query-independent Ring 1 analysis. ``tokens`` (the tampered-copy
    detector's) are decoded or computed only when asked for: a pool from one writer never
    compares passages."""

    perplexity: Mapping[str, float]
    signals: TextSignals
    _tokens: Callable[[], list[Token]]

    def tokens(self) -> list[Token]:
        return self._tokens()


def read_for_ring2(text: str) -> Ring2Reading:
    """Ring 2's reading of ``text``, computed now (what is stored with the chunk)."""
    return Ring2Reading(StoredReading.of(text), read_numbers(text))


_UNIT = "\x1f"
"""Separates the reading's strings: none holds it (terms are word characters, and each
sentence's spans are compact JSON, which escapes every control character), so splitting on
it is the whole decode, without JSON's string unescaping (half the decode time)."""


def _encode_ring2(found: Ring2Reading) -> str:
    """The last two lines of the stored form: the reading's strings
    (:class:`~trishield.rings.claims.StoredReading`) joined by :data:`_UNIT`, then the
    numeric claims as a JSON list of strings, four a claim (value, unit, frame terms joined
    by spaces, quote). Strings because a decode then builds one list and its strings,
    nothing the garbage collector tracks (see :class:`~trishield.rings.claims.StoredReading`)."""
    numbers = [part for n in found.numbers
               for part in (n.value, n.unit, " ".join(sorted(n.frame)), n.quote)]
    parts = found.reading.as_flat()
    if any(_UNIT in part or "\n" in part for part in parts):
        raise ValueError("a stored reading part holds a separator")  # see _UNIT
    return (_UNIT.join(parts) + "\n"
            + json.dumps(numbers, ensure_ascii=False, separators=(",", ":")))


def decode_ring2(lines: str) -> Ring2Reading:
    """:func:`_encode_ring2` reversed. The reading stays strings (a claim decodes what its
    question needs); the numeric claims (a few per passage) are rebuilt."""
    reading, _, numbers = lines.partition("\n")
    parts = json.loads(numbers)
    if len(parts) % 4:
        raise ValueError(f"stored numeric claims hold {len(parts)} strings, not 4 a claim")
    return Ring2Reading(StoredReading.from_flat(reading.split(_UNIT)),
                        tuple(NumericClaim(parts[i], parts[i + 1],
                                           frozenset(parts[i + 2].split()), parts[i + 3])
                              for i in range(0, len(parts), 4)))


def _once(make: Callable[[], list[Token]]) -> Callable[[], list[Token]]:
    made: list[list[Token]] = []

    def get() -> list[Token]:
        if not made:
            made.append(make())
        return made[0]
    return get


def analyse(text: str) -> PassageAnalysis:
    """The analysis of ``text``, computed now (tokens on first use)."""
    return PassageAnalysis(perplexity_score(text), text_signals(text),
                           _once(lambda: tokens(text)))


def _obfuscation(found: Obfuscation) -> list:
    return [found.word, list(found.characters)]


def _unobfuscation(stored: list) -> Obfuscation:
    return Obfuscation(stored[0], tuple(stored[1]))


_PERPLEXITY = ("s_perp", "s_perp_len", "rep", "top", "words")


def encode(analysis: PassageAnalysis, ring2: Ring2Reading) -> str:
    """The stored form, four lines of JSON (compact JSON holds no raw newline): a JSON
    array (perplexity and pattern signals, in a fixed order: an array decodes faster than an
    object, and Ring 1 decodes one per candidate per question), then the tokens (decoded
    only when needed), then Ring 2's reading and numeric claims (:func:`decode_ring2`, read
    by Ring 2 alone).
    JSON floats round-trip exactly."""
    signals = analysis.signals
    head = [
        [analysis.perplexity[key] for key in _PERPLEXITY],
        signals.words,
        None if signals.question is None else list(signals.question),
        None if signals.question_disguise is None
        else _obfuscation(signals.question_disguise),
        [list(pair) for pair in signals.phrases],
        [_obfuscation(o) for o in signals.phrase_disguises],
        signals.payload,
        [_obfuscation(o) for o in signals.word_obfuscations],
        signals.disguised,
        signals.unknown,
    ]
    body = [[t.word, t.surface, t.start, t.end] for t in analysis.tokens()]
    return (json.dumps(head, ensure_ascii=False, separators=(",", ":")) + "\n"
            + json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n"
            + _encode_ring2(ring2))


def decode(data: str) -> PassageAnalysis:
    """:func:`encode` reversed (tokens decoded on first use)."""
    head_text, _, rest = data.partition("\n")
    (perplexity, words, question, question_disguise, phrases, phrase_disguises, payload,
     word_obfuscations, disguised, unknown) = json.loads(head_text)
    signals = TextSignals(
        question=None if question is None else (question[0], question[1]),
        question_disguise=(None if question_disguise is None
                           else _unobfuscation(question_disguise)),
        phrases=tuple((name, evidence) for name, evidence in phrases) if phrases else (),
        phrase_disguises=(tuple(_unobfuscation(o) for o in phrase_disguises)
                          if phrase_disguises else ()),
        payload=payload,
        word_obfuscations=(tuple(_unobfuscation(o) for o in word_obfuscations)
                           if word_obfuscations else ()),
        disguised=disguised, words=words, unknown=unknown)
    return PassageAnalysis(dict(zip(_PERPLEXITY, perplexity, strict=True)), signals,
                           _once(lambda: [Token(*row) for row in
                                          json.loads(rest.partition("\n")[0])]))


ANALYSIS_VERSION = _version()
MEMO_SIZE = 4096
"""Passages whose analysis the query path keeps in memory when none is stored (a KB built
before the analysis was, a passage from outside any KB): about a pool of 20 for 200
questions."""


class PassageAnalyser:
    """The KB's chunk analyser (:class:`~trishield.kb.analysis.ChunkAnalyser`) and Ring 1's
    source of analyses at query time: the stored one when its version is current, else one
    computed now and kept in a bounded memo (the query path never writes to the KB)."""

    version = ANALYSIS_VERSION

    def __init__(self, memo_size: int = MEMO_SIZE):
        if memo_size < 0:
            raise ValueError(f"memo size must be >= 0, got {memo_size}")
        self.memo_size = memo_size
        self._memo: OrderedDict[str, PassageAnalysis] = OrderedDict()
        self._lock = threading.Lock()

    def analyse(self, texts: Sequence[str]) -> list[str]:
        """Each text's analysis in its stored form (what the KB writes with the chunk)."""
        return [encode(analyse(text), read_for_ring2(text)) for text in texts]

    def of(self, text: str, stored: StoredAnalysis | None) -> PassageAnalysis:
        """``text``'s analysis: ``stored`` when it is of this version, else computed (once per
        text while it stays in the memo)."""
        if stored is not None and stored.version == self.version:
            return decode(stored.data)
        with self._lock:
            found = self._memo.get(text)
            if found is not None:
                self._memo.move_to_end(text)
                return found
        found = analyse(text)
        if self.memo_size:
            with self._lock:
                self._memo[text] = found
                while len(self._memo) > self.memo_size:
                    self._memo.popitem(last=False)
        return found

    def ring2_of(self, stored: StoredAnalysis | None) -> Ring2Reading | None:
        """Ring 2's reading from ``stored`` when it is of this version, else ``None`` (Ring
        2 then reads the passage itself, through its own memos)."""
        if stored is None or stored.version != self.version:
            return None
        data = stored.data
        # Ring 2's lines follow the second newline (Ring 1's two lines hold no other)
        start = data.index("\n", data.index("\n") + 1) + 1
        return decode_ring2(data[start:])


DEFAULT_ANALYSER = PassageAnalyser()
"""The analyser the API, the CLI, the service and the benchmarks give the KBs they open."""
