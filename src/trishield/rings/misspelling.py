"""The question's own words, misspelt: a passage that hides what it is about from a matcher.

Ring 2 reads a passage's claim only when the passage holds at least half of the question's
terms (:mod:`trishield.rings.claims`), letter for letter after stemming. A reader model reads
through typos as a person does, so a poison that misspells the question's words ("the
capiatl of the Habsbrug Epmire") is no evidence to Ring 2, contradicts nothing, and still
hands the reader its answer. Measured held out (docs/benchmarks.md, "Misspelt poisons"): such
poisons went through ``full-gated`` about as often as through no defense at all.

So Ring 1 reads each passage against the question for *near misses*: a word one edit away
(a letter dropped, added, changed, or two neighbours swapped) from one of the question's
content words, that is no English word itself (:func:`english_words`: "kings" is a word,
not a misspelt "sings"), not another form of the question's word (same stem), and stands
where that word is absent. Natural typos hit a question word now and then; a passage that
misspells at least :data:`MIN_MISSPELT` of the question's words, and more of them than it
spells right, is hiding its topic. The detector's evidence lists the pairs (``capiatl~capital``).

The question's one-edit variants are built once per question (a few thousand strings), so a
passage costs one pass over its words with set lookups.
"""

from __future__ import annotations

from collections.abc import Container
from functools import cache, lru_cache

from spellchecker import SpellChecker

from trishield.text import QUESTION_PHRASING, STOPWORDS, stem

MIN_LETTERS = 5
"""Question words shorter than this are not checked: one edit turns a short word into
another word too easily ("form"/"from")."""
MIN_MISSPELT = 2
"""Misspelt question words a passage needs before it is hiding its topic: one is a typo."""
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_ENDINGS = ("", "s", "es", "e", "ed", "d", "ing", "er", "ers", "ly", "ion", "ions", "al",
            "y", "ies", "ied", "ic", "ism", "ist", "ists", "ity", "ment", "ments")
"""What may follow a question word's stem in a passage that spells the word right in another
form ("recorded": "record", "records", "recording"); a misspelling keeps the stem's letters
too ("fallnig" starts like "fall"), so the form must end here."""


@cache
def english_words() -> Container[str]:
    """The English lexicon a near miss is checked against (pyspellchecker's, about 160,000
    lower-case words with their frequencies in subtitles): "kings" for "sings", "would" for
    "world", "part" for "party" are words, so no misspelling. Loaded on first use (0.1 s)."""
    return SpellChecker(language="en", distance=1).word_frequency


def _variants(word: str) -> set[str]:
    """Every lower-case string one edit from ``word`` (Damerau: deletion, insertion,
    substitution, transposition of neighbours), ``word`` itself excluded."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    found = {left + right[1:] for left, right in splits if right}
    found |= {left + right[1] + right[0] + right[2:] for left, right in splits
              if len(right) > 1}
    found |= {left + c + right[1:] for left, right in splits if right for c in _LETTERS}
    found |= {left + c + right for left, right in splits for c in _LETTERS}
    found.discard(word)
    return found


@lru_cache(maxsize=256)
def _checked(words: tuple[str, ...]) -> dict[str, str]:
    """The question's words this detector checks, each with its stem."""
    return {w: stem(w) for w in dict.fromkeys(words) if len(w) >= MIN_LETTERS and w.isalpha()
            and w not in STOPWORDS and stem(w) not in QUESTION_PHRASING}


@lru_cache(maxsize=256)
def _misspellings(words: tuple[str, ...]) -> dict[str, str]:
    """Each one-edit variant of a checked question word, mapped to the word it misspells (a
    variant that is itself a checked word is none). Built once per question, and only for a
    question some passage leaves checked words out of."""
    checked = _checked(words)
    variants: dict[str, str] = {}
    for word in checked:
        for variant in _variants(word):
            variants.setdefault(variant, word)
    for word in checked:
        variants.pop(word, None)
    return variants


def misspelt_question_words(passage_words: str, question_words: tuple[str, ...]
                            ) -> list[tuple[str, str]]:
    """``(as written, question word)`` for each question word the passage misspells and
    nowhere spells right, when these are at least :data:`MIN_MISSPELT` and more than the
    question words it spells right; else ``[]``.

    ``passage_words``: the passage's normalised words joined by single spaces
    (:attr:`trishield.rings.patterns.TextSignals.words`); ``question_words``: the question's,
    normalised the same way."""
    checked = _checked(question_words)
    if len(checked) < MIN_MISSPELT:
        return []
    padded = f" {passage_words} "
    spelled = {word for word, word_stem in checked.items()
               if f" {word} " in padded
               or any(f" {word_stem}{ending} " in padded for ending in _ENDINGS)}
    if len(checked) - len(spelled) < MIN_MISSPELT:
        return []
    variants = _misspellings(question_words)
    written_words = set(passage_words.split())
    if "'" in passage_words:  # "hevaen's": the word before the apostrophe too
        written_words |= {w.split("'", 1)[0] for w in written_words if "'" in w}
    found: dict[str, str] = {}
    words = english_words()
    for written in sorted(variants.keys() & written_words):
        meant = variants[written]
        if meant in spelled or meant in found or written in words \
                or stem(written) == checked[meant]:
            continue  # spelled right elsewhere, a word itself, or a form of it ("states")
        found[meant] = written
    if len(found) < MIN_MISSPELT or len(found) <= len(spelled):
        return []
    return [(written, meant) for meant, written in found.items()]
