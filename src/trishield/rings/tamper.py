"""Ring 1's tampered-copy detector: a new text that copies a stored text of *another* writer
word for word except for a changed fact.

The gt-swap attack (the real passage with only the answer swapped) agrees with the real
passage on style, topic and embedding, so every signal that judges a text on its own misses
it. What gives it away is the original it was copied from: aligned with it, almost every word
is unchanged, and what changed is a fact (a number, a date, a name, the polarity), not the
wording. So the detector aligns the two texts (:mod:`difflib` on word tokens of the
normalised texts), measures how much of them is copied verbatim, and classifies each changed
span. Only the alignment decides; the embedding merely picks which stored texts to align.

A writer revising its own text is never compared with it (the neighbourhood excludes the
writer's documents); which writer may be believed over which is provenance's job, so the
strength of the finding depends on the tiers (:func:`tamper_weight`).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic.dataclasses import dataclass as config_dataclass

from trishield.kb.screening import Neighbourhood, StoredNeighbour
from trishield.rings.config_types import CONFIG, AtLeastOne, Unit
from trishield.rings.normalise import normalise, visible
from trishield.rings.patterns import PatternHit
from trishield.text import STOPWORDS, stem, word_spans

MIN_RUN = 3
"""Only runs of at least this many words in a row count as copied: two unrelated texts on
one topic share single words ("the", "in", a name) everywhere, never long runs."""
MAX_SPAN = 6
"""A replaced span longer than this (on either side) is a rewritten passage, not a
substituted fact."""
MAX_WORDS = 5000
"""Texts are aligned on at most their first this many words (difflib is quadratic)."""

NEGATIONS = frozenset({
    "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "nowhere", "without",
    "cannot", "n't",
})
NUMBER_WORDS = frozenset({
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    "hundred", "thousand", "million", "billion", "trillion", "first", "second", "third",
    "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "dozen", "half",
    "once", "twice",
})
DATE_WORDS = frozenset({
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday", "spring", "summer", "autumn", "winter", "bc", "bce", "ad", "ce",
})
FACT_KINDS = ("number", "date", "name", "negation")
"""Changes that alter what a text claims; any other changed word is a change of wording."""
TIER_RANK = {"untrusted": 0, "neutral": 1, "trusted": 2}
_SPELLING = 0.8
"""Two words this similar (difflib's character ratio) are one word spelt two ways."""
_DIGIT = re.compile(r"\d")


@config_dataclass(frozen=True, config=CONFIG)
class TamperConfig:
    """Thresholds of the tampered-copy detector (chosen on training data only:
    ``benchmarks/ring1_tamper.py --split train``; see docs/design/ring1-ingest-guard.md)."""

    min_copied: Unit = 0.9
    """A copy: at least this share of both texts' words (the stored one over the aligned
    stretch) lies in verbatim runs of ``MIN_RUN``+ words shared with the other."""
    min_words: AtLeastOne = 30
    """A copy shares at least this many words in such runs: short template sentences ("A list
    of films produced in Japan in the 1970s.") are shared by many texts without copying."""
    max_facts: AtLeastOne = 3
    """At most this many distinct fact substitutions: a tamperer changes one fact; two texts
    from one template (village stubs, census lines) differ in many."""
    neighbours: AtLeastOne = 5
    """Stored chunks by other writers (nearest by embedding) whose documents are aligned. No
    similarity floor: on the training data a copy's nearest chunk scored as low as 0.55 (a
    document's mean vector against one chunk), and aligning five documents costs
    milliseconds."""
    weight: Unit = 0.9
    """Noisy-OR weight when a fact changed in a copy of a text by a writer at least as
    trusted as the new one: blocks alone, like an injection phrase."""
    weak_weight: Unit = 0.3
    """Weight when only wording changed, or the original's writer is less trusted than the
    copy's (the copy may be the correction): flags alone, blocks with any other detector,
    as ``obfuscated_text`` does."""


@dataclass(frozen=True)
class Token:
    """One word: lower-cased for matching, as written for names and evidence."""

    word: str
    surface: str
    start: int
    end: int


@dataclass(frozen=True)
class Change:
    """One changed span of the new text against the stored one."""

    kind: str  # number | date | name | negation | wording | spelling | rewrite | added | removed
    before: str
    after: str

    @property
    def fact(self) -> bool:
        return self.kind in FACT_KINDS

    def describe(self) -> str:
        if not self.before:
            return f"{self.after!r} inserted"
        if not self.after:
            return f"{self.before!r} removed"
        return f"{self.before!r} -> {self.after!r}"


@dataclass(frozen=True)
class Alignment:
    """How a new text relates to a stored one."""

    copied: float
    """Share of words in verbatim runs (the smaller of the two texts' shares)."""
    words: int
    """Words in those runs."""
    changes: tuple[Change, ...]

    @property
    def facts(self) -> tuple[Change, ...]:
        return tuple(dict.fromkeys(c for c in self.changes if c.fact))

    @property
    def wording(self) -> tuple[Change, ...]:
        return tuple(dict.fromkeys(c for c in self.changes if c.kind == "wording"))


def tokens(text: str) -> list[Token]:
    """Word tokens of the normalised text (invisible characters, compatibility forms and
    look-alike letters cannot fake a difference or hide one), with their original spans.
    ``n't`` is split off its verb so that "did" -> "didn't" reads as an inserted negation."""
    plain = normalise(text)
    found: list[Token] = []
    for word, start, end in word_spans(plain.text):
        surface = visible(plain.original_span(start, end))
        if word.endswith(("n't", "n\u2019t")) and len(word) > 3:
            cut = end - 3
            found.append(Token(word[:-3], visible(plain.original_span(start, cut)), start, cut))
            found.append(Token("n't", "n't", cut, end))
        else:
            found.append(Token(word, surface, start, end))
    return found[:MAX_WORDS]


def align(stored: list[Token], new: list[Token]) -> Alignment:
    """Align the new text with the stored one: the share copied, and each changed span.

    Only the stretch of the stored text between the first and last copied run counts
    towards its share, so a copy of one paragraph of a long document is still a copy.
    """
    if not stored or not new:
        return Alignment(0.0, 0, ())
    matcher = difflib.SequenceMatcher(None, [t.word for t in stored], [t.word for t in new],
                                      autojunk=False)
    runs = [block for block in matcher.get_matching_blocks() if block.size >= MIN_RUN]
    if not runs:
        return Alignment(0.0, 0, ())
    copied = sum(block.size for block in runs)
    window = runs[-1].a + runs[-1].size - runs[0].a
    share = min(copied / len(new), copied / window)
    first, last = runs[0].a, runs[-1].a + runs[-1].size
    changes = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal" or (b0 == b1 and (a1 <= first or a0 >= last)):
            continue  # stored text outside the copied stretch: not copied, not changed
        if a1 <= first:  # the new text's first words stand for the stored words before them
            a0 = max(a0, a1 - MAX_SPAN)
        if a0 >= last:
            a1 = min(a1, a0 + MAX_SPAN)
        changes.append(classify(stored[a0:a1], new[b0:b1]))
    return Alignment(share, copied, tuple(c for c in changes if c is not None))


def _is_name(token: Token) -> bool:
    """Capitalised and not a function word ("The"), or written in capitals (an initial, a
    letter naming a shape or grade: "S-shaped"), the pronoun "I" and the article "A" aside."""
    surface = token.surface
    if not surface[:1].isupper():
        return False
    return token.word not in STOPWORDS or (surface.isupper() and surface not in ("I", "A"))


def _is_number(token: Token) -> bool:
    return bool(_DIGIT.search(token.word)) or token.word in NUMBER_WORDS


def classify(before: list[Token], after: list[Token]) -> Change | None:
    """What one changed span is. Polarity first (an inserted "not" is a new claim), then the
    kinds of fact; a span that changes none of them is wording, or spelling when it is one
    word spelt differently (a typo fixed, a hyphen, American vs British)."""
    old = " ".join(t.surface for t in before)
    new = " ".join(t.surface for t in after)
    words_before, words_after = [t.word for t in before], [t.word for t in after]
    if _count(words_before, NEGATIONS) != _count(words_after, NEGATIONS):
        return Change("negation", old, new)
    if not before or not after:
        content = [w for w in words_before + words_after if w not in STOPWORDS]
        return Change("added" if after else "removed", old, new) if content else None
    if len(before) > MAX_SPAN or len(after) > MAX_SPAN:
        return Change("rewrite", old, new)
    for kind, test in (("number", _is_number), ("date", lambda t: t.word in DATE_WORDS),
                       ("name", _is_name)):
        if (Counter(t.word for t in before if test(t))
                != Counter(t.word for t in after if test(t))):
            return Change(kind, old, new)
    joined_before, joined_after = "".join(words_before), "".join(words_after)
    if ({stem(w) for w in words_before} == {stem(w) for w in words_after}
            or difflib.SequenceMatcher(None, joined_before, joined_after).ratio() >= _SPELLING):
        return Change("spelling", old, new)
    if all(w in STOPWORDS for w in words_before + words_after):
        return None
    return Change("wording", old, new)


def _count(found: list[str], vocabulary: frozenset[str]) -> int:
    return sum(word in vocabulary for word in found)


def tamper_weight(alignment: Alignment, config: TamperConfig, *, copy_tier: str,
                  original_tier: str, order_known: bool = True) -> float:
    """The detector's weight for one aligned pair (0: not a tampered copy).

    A copy (``copied >= min_copied`` and ``words >= min_words``) whose facts changed, but in
    at most ``max_facts`` distinct substitutions, is a tampered copy: ``weight`` when the
    original's writer is at least as trusted as the copy's (the stored text is the one to
    believe), else ``weak_weight``. A copy whose changes are only wording (words other than
    facts, not a spelling) gets ``weak_weight``: a synonym and a swapped common noun
    ("nucleus" -> "mitochondria") cannot be told apart without a lexicon. Without
    ``order_known`` (two retrieved passages: which was written first is not known), equal
    tiers give ``weak_weight`` too: either may be the original.
    """
    if alignment.copied < config.min_copied or alignment.words < config.min_words:
        return 0.0
    facts = alignment.facts
    if len(facts) > config.max_facts:
        return 0.0
    if facts:
        original, copy = TIER_RANK.get(original_tier, 0), TIER_RANK.get(copy_tier, 0)
        believed = original > copy or (order_known and original == copy)
        return config.weight if believed else config.weak_weight
    return config.weak_weight if alignment.wording else 0.0


def evidence(alignment: Alignment, *, original: str, writer: str, limit: int = 4) -> str:
    """The changed words, quoted, and what was copied: ``'1998' -> '2003' (copy of wiki:12 by
    writer wikipedia, 97% unchanged)``."""
    shown = alignment.facts or alignment.wording
    changes = "; ".join(c.describe() for c in shown[:limit])
    more = f"; {len(shown) - limit} more" if len(shown) > limit else ""
    return (f"{changes}{more} (copy of {original} by writer {writer}, "
            f"{alignment.copied:.0%} unchanged)")


@dataclass(frozen=True)
class TamperedCopy:
    """The best finding for one new document: the original it copies and how."""

    original: StoredNeighbour
    alignment: Alignment
    weight: float

    def hit(self) -> PatternHit:
        return PatternHit("tampered_copy", self.weight, evidence(
            self.alignment, original=self.original.doc_id, writer=self.original.writer))


def find_tampered_copy(doc_id: str, text: str, tier: str,
                       neighbours: list[StoredNeighbour], config: TamperConfig, *,
                       order_known: bool = True) -> TamperedCopy | None:
    """The stored document ``text`` is a tampered copy of, if any: among ``neighbours``, the
    one with the highest weight (then the most copied). A stored document with the same id is
    the writer's own earlier version, never an original."""
    return _best_copy(doc_id, tier, tokens(text),
                      [(neighbour, _Tokenised(neighbour.text)) for neighbour in neighbours],
                      config, order_known=order_known)


class _Tokenised:
    """A text's tokens and vocabulary, made on first use (or given, from a stored analysis):
    a passage compared with several others is tokenised once."""

    def __init__(self, text: str, made: Callable[[], list[Token]] | None = None):
        self._make = made or (lambda: tokens(text))
        self._tokens: list[Token] | None = None
        self._vocabulary: frozenset[str] | None = None

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = self._make()
        return self._tokens

    @property
    def vocabulary(self) -> frozenset[str]:
        if self._vocabulary is None:
            self._vocabulary = frozenset(t.word for t in self.tokens)
        return self._vocabulary


def _best_copy(doc_id: str, tier: str, new: list[Token],
               neighbours: list[tuple[StoredNeighbour, _Tokenised]], config: TamperConfig, *,
               order_known: bool) -> TamperedCopy | None:
    best: TamperedCopy | None = None
    for neighbour, tokenised in neighbours:
        if neighbour.doc_id == doc_id:
            continue
        vocabulary = tokenised.vocabulary
        if sum(t.word in vocabulary for t in new) < config.min_copied * len(new):
            continue  # fewer shared words than a copy needs: no alignment can make it one
        alignment = align(tokenised.tokens, new)
        weight = tamper_weight(alignment, config, copy_tier=tier,
                               original_tier=neighbour.tier, order_known=order_known)
        if weight > 0 and (best is None or (weight, alignment.copied)
                           > (best.weight, best.alignment.copied)):
            best = TamperedCopy(neighbour, alignment, weight)
    return best


def tampered_copies(ids: list[str], texts: list[str], tiers: list[str], vectors,
                    neighbourhood: Neighbourhood,
                    config: TamperConfig) -> list[TamperedCopy | None]:
    """At ingest: each new document against the stored documents of other writers nearest to
    it (the writer's own documents are not in the neighbourhood: a revision is no copy)."""
    if not ids:
        return []
    found = neighbourhood.nearest_documents(vectors, config.neighbours)
    return [find_tampered_copy(doc_id, text, tier, neighbours, config)
            for doc_id, text, tier, neighbours in zip(ids, texts, tiers, found, strict=True)]


def pool_tampered_copies(ids: list[str], doc_ids: list[str], texts: list[str],
                         tiers: list[str], writers: list[str], config: TamperConfig, *,
                         tokenised: Sequence[Callable[[], list[Token]]] | None = None,
                         ) -> list[TamperedCopy | None]:
    """After retrieval: each passage against the other retrieved passages by other writers.
    Which of two passages was written first is not known here, so a copy weighs ``weight``
    only when the other passage's writer is more trusted; otherwise both are flagged.

    ``tokenised`` gives each passage's :func:`tokens` (a stored analysis's); either way each
    passage is tokenised at most once, and only when another writer's passage is in the pool
    (a pool from one writer compares nothing)."""
    made = (list(tokenised) if tokenised is not None else [None] * len(texts))
    if len(made) != len(texts):
        raise ValueError(f"{len(made)} tokenisations for {len(texts)} passages")
    if len(set(writers)) < 2:
        return [None] * len(ids)  # one writer (or none): no passage has another's to copy
    passages = [StoredNeighbour(doc_id=d, chunk_id=i, writer=w, tier=t, text=x,
                                similarity=float("nan"))
                for i, d, x, t, w in zip(ids, doc_ids, texts, tiers, writers, strict=True)]
    lazy = [_Tokenised(text, make) for text, make in zip(texts, made, strict=True)]
    found: list[TamperedCopy | None] = []
    for number, (doc_id, tier, writer) in enumerate(zip(doc_ids, tiers, writers, strict=True)):
        others = [(passage, lazy[other]) for other, passage in enumerate(passages)
                  if passage.writer != writer]
        found.append(_best_copy(doc_id, tier, lazy[number].tokens, others, config,
                                order_known=False) if others else None)
    return found
