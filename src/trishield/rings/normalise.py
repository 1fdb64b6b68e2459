"""The text Ring 1's detectors read: invisible characters removed, NFKC, look-alikes folded.

An attacker can hide "ignore previous instructions" or a pasted question from every pattern by
writing it with characters a reader does not see or cannot tell apart: zero-width spaces or
joiners, soft hyphens, Cyrillic or Greek look-alikes, fullwidth or mathematical letters. The
detectors therefore read a *normalised* copy of the text (the stored text stays as written):

1. **Invisible characters removed**: general category ``Cf`` (format controls: zero-width
   space and joiners, soft hyphen, bidi controls, word joiner, BOM, tags) and Unicode's
   ``Default_Ignorable_Code_Point`` property (variation selectors, combining grapheme joiner,
   Hangul fillers), read from the ``regex`` module's Unicode tables, not listed by hand.
2. **NFKC** per grapheme cluster (a base character and its combining marks): fullwidth,
   mathematical, circled and other compatibility letters become the plain letters.
3. **Confusables folded to ASCII**: each remaining non-ASCII character whose Unicode TR39
   prototype (``confusables.txt``) is ASCII is replaced by that prototype (U+043E CYRILLIC
   SMALL LETTER O and U+03BF GREEK SMALL LETTER OMICRON -> ``o``, U+0456 CYRILLIC SMALL LETTER
   BYELORUSSIAN-UKRAINIAN I -> ``i``).

Why ``confusable-homoglyphs`` (pinned 3.3.1) for step 3: it ships TR39's ``confusables.txt``
as data in a small pure-Python wheel. ``pyicu`` (ICU's ``SpoofChecker.getSkeleton``, exact
TR39) has no wheel on PyPI and needs libicu and a compiler; the ``pyicu-wheels`` repackaging
is an 18 MB binary from a third party. ``decancer-py`` uses its own curated mapping, not TR39,
and lower-cases and rewrites far more than look-alikes. The package's JSON keeps each
confusables.txt pair in both directions, so a prototype is read as: the sole entry of a
non-ASCII character that is not canonically decomposable. Checked against ICU 77 (Unicode 16)
``getSkeleton`` over every code point: all 1,723 mappings read this way agree with ICU; ICU has
more for Hebrew, Arabic and NKo letters and for default-ignorables (removed in step 1 anyway),
none more for Latin, Cyrillic or Greek.

This is a *restricted* skeleton, on purpose: TR39's full skeleton also rewrites ASCII (``m`` ->
``rn``, ``I`` and ``1`` -> ``l``, ``0`` -> ``O``) because it compares identifiers; the
detectors read English words, so ASCII stays as written and only characters outside ASCII are
folded onto it. One consequence: a capital whose prototype is ``l`` (Cyrillic and Greek
capital I) is read as ``I`` or ``l`` from its context (:func:`read_capital_i`). Genuine
non-Latin text is folded
too (the Cyrillic letters of Russian "sor", litter, read as Latin "cop"); that is harmless
here, since only English phrases and question shapes are looked for.

Each character of the normalised text remembers the span of the original it came from, so
evidence can quote what was actually written.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import regex

from trishield.homoglyphs import ascii_prototypes

_INVISIBLE = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]")
_LATIN = regex.compile(r"\p{Script=Latin}")
_NEUTRAL_SCRIPT = regex.compile(r"[\p{Script=Common}\p{Script=Inherited}]")


ASCII_PROTOTYPES: dict[str, str] = ascii_prototypes()
"""Non-ASCII character -> its TR39 prototype, for the prototypes that are ASCII."""

CAPITAL_I_LOOKALIKES = frozenset(ch for ch, prototype in ASCII_PROTOTYPES.items()
                                 if prototype == "l" and ch.isupper()
                                 and not unicodedata.normalize("NFKC", ch).isascii())
"""Capitals TR39 gives the prototype ``l`` (Cyrillic, Greek, Coptic capital I): they imitate
either ASCII ``I`` or ``l``, and :func:`read_capital_i` decides which from the context."""


def read_capital_i(previous: str, following: str) -> str:
    """Which ASCII letter a capital-I look-alike stands for, between ``previous`` (the folded
    text before it) and ``following`` (the next character, folded).

    TR39 folds ASCII ``I`` and ``l`` too, to ``l``; here ASCII stays as written, so the
    look-alike must be read as one of them: after a lower-case letter it is ``l`` ("a" + two of
    them reads "all"), after a capital ``I`` (a word in capitals); at the start of a word it is
    ``l`` before a vowel ("long", "list") and ``I`` otherwise ("Ignore", "In", "Is"): English
    words rarely start with I and a vowel, or with l and a consonant.
    """
    before = previous[-1:]
    if before.isalpha():
        return "l" if before.islower() else "I"
    return "l" if following[:1] in set("aeiouy") else "I"


def is_invisible(character: str) -> bool:
    """A format control or default-ignorable code point: rendered as nothing."""
    return _INVISIBLE.match(character) is not None


def is_latin(character: str) -> bool:
    return _LATIN.match(character) is not None


def has_script(character: str) -> bool:
    """A character of a particular script (not Common or Inherited: digits, marks, symbols)."""
    return _NEUTRAL_SCRIPT.match(character) is None


@lru_cache(maxsize=8192)
def fold(cluster: str) -> str:
    """One grapheme cluster, NFKC-normalised and with look-alikes folded to ASCII."""
    normal = unicodedata.normalize("NFKC", cluster)
    return "".join(ASCII_PROTOTYPES.get(ch, ch) for ch in normal)


def describe(character: str) -> str:
    """``U+200B ZERO WIDTH SPACE``: how evidence names a character."""
    return f"U+{ord(character):04X} {unicodedata.name(character, 'UNNAMED')}"


def visible(text: str) -> str:
    """``text`` with invisible characters written as ``\\u200b`` escapes, for evidence."""
    if text.isascii() or _INVISIBLE.search(text) is None:
        return text
    return "".join(f"\\u{ord(ch):04x}" if is_invisible(ch) else ch for ch in text)


@dataclass(frozen=True)
class Normalised:
    """The normalised text and, per character, the span of the original it came from."""

    original: str
    text: str
    starts: Sequence[int]
    ends: Sequence[int]
    """Per character of ``text``: where its span in ``original`` starts and ends. Ranges for
    an unchanged text (no per-character tuples: Ring 1 normalises every candidate of every
    question, and building them was most of its cost)."""

    def original_span(self, start: int, end: int) -> str:
        """The original text behind ``text[start:end]``."""
        if start >= end:
            return ""
        return self.original[self.starts[start]:self.ends[end - 1]]

    @property
    def changed(self) -> bool:
        return self.text != self.original


def _identity(text: str) -> Normalised:
    return Normalised(text, text, range(len(text)), range(1, len(text) + 1))


_FOLDED = frozenset(ASCII_PROTOTYPES)
_MARK = regex.compile(r"\p{M}")


def needs_normalising(text: str) -> bool:
    """Whether :func:`normalise` would change ``text``: it holds an invisible character, a
    character NFKC changes, or a look-alike with an ASCII prototype; or a combining mark
    (clusters are normalised one by one, which can differ from the whole text's NFKC). Most
    real text (precomposed accented names included) holds none, and the per-character pass
    is then skipped."""
    if text.isascii():
        return False
    return (_INVISIBLE.search(text) is not None
            or not unicodedata.is_normalized("NFKC", text)
            or not _FOLDED.isdisjoint(text)
            or _MARK.search(text) is not None)


def normalise(text: str) -> Normalised:
    """Invisible characters removed, NFKC per cluster, look-alikes folded (see the module)."""
    if not needs_normalising(text):
        return _identity(text)
    return _normalise_clusters(text)


def _normalise_clusters(text: str) -> Normalised:
    kept = [(i, ch) for i, ch in enumerate(text) if not is_invisible(ch)]
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    while position < len(kept):
        first, base = kept[position]
        cluster = [base]
        last = first
        position += 1
        while position < len(kept) and unicodedata.category(kept[position][1])[0] == "M":
            last = kept[position][0]
            cluster.append(kept[position][1])
            position += 1
        folded = fold("".join(cluster))
        if base in CAPITAL_I_LOOKALIKES:
            following = fold(kept[position][1]) if position < len(kept) else ""
            folded = read_capital_i(pieces[-1] if pieces else "", following) + folded[1:]
        pieces.append(folded)
        starts.extend([first] * len(folded))
        ends.extend([last + 1] * len(folded))
    return Normalised(text, "".join(pieces), tuple(starts), tuple(ends))


_NON_SPACE = regex.compile(r"\S+")


def lowered(base: Normalised) -> Normalised:
    """``base`` lower-cased with whitespace runs collapsed to one space (how phrases are
    matched); spans still point into the original. A collapsed run maps to its first
    whitespace character. Word by word, so the spans of a word are sliced, not rebuilt one
    character at a time (Ring 1 lowers every candidate of every question)."""
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    previous_end = None
    for match in _NON_SPACE.finditer(base.text):
        first, last = match.span()
        if previous_end is not None:  # the run of whitespace before this word, as one space
            pieces.append(" ")
            starts.append(base.starts[previous_end])
            ends.append(base.ends[previous_end])
        word = match.group().lower()
        if len(word) == last - first:
            pieces.append(word)
            starts.extend(base.starts[first:last])
            ends.extend(base.ends[first:last])
        else:  # lower() changed a character's length ("İ" -> "i̇")
            for index in range(first, last):
                piece = base.text[index].lower()
                pieces.append(piece)
                starts.extend([base.starts[index]] * len(piece))
                ends.extend([base.ends[index]] * len(piece))
        previous_end = last
    return Normalised(base.original, "".join(pieces), tuple(starts), tuple(ends))
