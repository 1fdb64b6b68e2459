"""The question's own words, misspelt: a passage that hides what it is about from a matcher.

Ring 2 reads a passage's claim only when the passage holds at least half of the question's
terms (:mod:`trishield.rings.claims`), letter for letter after stemming. A reader model reads
through typos as a person does, so a poison that misspells the question's words ("the
capiatl of the Habsbrug Epmire") is no evidence to Ring 2, contradicts nothing, and still
hands the reader its answer. Measured (docs/benchmarks.md, "Misspelt poisons"): such poisons
went through ``full-gated`` at 0.22-0.27 against 0.33-0.36 undefended, where every family of
the matrix is at 0.00-0.03.

So Ring 1 reads each passage against the question for *near misses*: a word one edit away
(a letter dropped, added, changed, or two neighbours swapped) from one of the question's
content words, that is no English word itself (:func:`english_words`: "kings" is a word,
not a misspelt "sings"), not another form of the question's word (same stem), and stands
where that word is absent. Natural typos hit a question word now and then; a passage that
misspells at least :data:`MIN_MISSPELT` of the question's words, and more of them than it
spells right, is hiding its topic. The detector's evidence lists the pairs (``capiatl~capital``).

A passage's words that are no English word are found once, at ingest (:func:`unknown_words`,
stored with its analysis): a question looks only at those few, by their deletions.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from functools import cache, lru_cache

from spellchecker import SpellChecker

from trishield.text import QUESTION_PHRASING, STOPWORDS, stem

MIN_LETTERS = 5
"""Question words shorter than this are not checked: one edit turns a short word into
another word too easily ("form"/"from")."""
MIN_MISSPELT = 2
"""Misspelt question words a passage needs before it is hiding its topic: one is a typo."""
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


def unknown_words(words: Iterable[str]) -> str:
    """The words a misspelling can be: four letters or more, letters only (the part before an
    apostrophe: "hevaen's"), no English word; sorted, joined by spaces. Query-independent,
    so it is stored with a passage's analysis (:mod:`trishield.rings.analysis`) and a
    question only looks at these few words."""
    lexicon = english_words()
    found = set()
    for word in words:
        base = word.split("'", 1)[0]
        if len(base) >= MIN_LETTERS - 1 and base.isalpha() and base not in lexicon:
            found.add(base)
    return " ".join(sorted(found))


def _deletions(word: str) -> set[str]:
    """``word`` and every string one deletion from it: two words one edit apart share one
    (a substitution or a swap deletes to the same string in both; an insertion deletes to
    the other word)."""
    return {word, *(word[:i] + word[i + 1:] for i in range(len(word)))}


def one_edit(written: str, word: str) -> bool:
    """Whether ``written`` is ``word`` with exactly one edit: a letter dropped, added or
    changed, or two neighbours swapped."""
    if written == word or abs(len(written) - len(word)) > 1:
        return False
    if len(written) != len(word):
        shorter, longer = sorted((written, word), key=len)
        return any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer)))
    differ = [i for i, (a, b) in enumerate(zip(written, word, strict=True)) if a != b]
    return len(differ) == 1 or (len(differ) == 2 and differ[1] == differ[0] + 1
                                and written[differ[0]] == word[differ[1]]
                                and written[differ[1]] == word[differ[0]])


@lru_cache(maxsize=256)
def _checked(words: tuple[str, ...]) -> dict[str, str]:
    """The question's words this detector checks, each with its stem."""
    checked = {}
    for word in dict.fromkeys(words):
        if len(word) >= MIN_LETTERS and word.isalpha() and word not in STOPWORDS:
            word_stem = stem(word)
            if word_stem not in QUESTION_PHRASING:
                checked[word] = word_stem
    return checked


def _spelled(word: str, word_stem: str, padded: str) -> bool:
    """Whether the passage's words (``padded``: between spaces) hold ``word`` or its stem
    with one of :data:`_ENDINGS`."""
    return f" {word} " in padded or any(f" {word_stem}{ending} " in padded
                                        for ending in _ENDINGS)


@lru_cache(maxsize=256)
def _keys(words: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The checked question words by each of their :func:`_deletions`: a written word is
    looked up by its own deletions, so a question costs a few dozen strings, not the
    thousands of its words' one-edit variants."""
    keys: dict[str, list[str]] = {}
    for word in _checked(words):
        for key in _deletions(word):
            keys.setdefault(key, []).append(word)
    return {key: tuple(found) for key, found in keys.items()}


def misspelt_question_words(passage_words: str, unknown: str, question_words: tuple[str, ...]
                            ) -> list[tuple[str, str]]:
    """``(as written, question word)`` for each question word the passage misspells and
    nowhere spells right, when these are at least :data:`MIN_MISSPELT` and more than the
    question words it spells right; else ``[]``.

    ``passage_words``: the passage's normalised words joined by single spaces
    (:attr:`trishield.rings.patterns.TextSignals.words`); ``unknown``: its
    :func:`unknown_words`; ``question_words``: the question's, normalised the same way."""
    checked = _checked(question_words)
    if len(checked) < MIN_MISSPELT or not unknown:
        return []
    keys = _keys(question_words)
    near: dict[str, str] = {}
    for written in unknown.split():
        if written in checked:
            continue
        for key in _deletions(written):
            for meant in keys.get(key, ()):
                if meant not in near and one_edit(written, meant) \
                        and stem(written) != checked[meant]:  # not a form ("states")
                    near[meant] = written
    if len(near) < MIN_MISSPELT:
        return []
    padded = f" {passage_words} "
    spelled = {word for word, word_stem in checked.items() if _spelled(word, word_stem, padded)}
    found = {meant: written for meant, written in sorted(near.items()) if meant not in spelled}
    if len(found) < MIN_MISSPELT or len(found) <= len(spelled):
        return []
    return sorted(((written, meant) for meant, written in found.items()), key=lambda p: p[1])
