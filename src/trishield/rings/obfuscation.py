"""Obfuscated words: invisible characters inside words, and look-alike letters mixed in.

Normalisation (:mod:`trishield.rings.normalise`) lets the other detectors see through these
characters; this module makes their presence a signal of its own, since ordinary prose has
little use for them. What counts, and what deliberately does not:

- **An invisible character between two letters** of Latin, Greek, Cyrillic or Armenian script
  ("ign\\u200bore"). Not a soft hyphen (German, Dutch and hyphenated English text put them
  inside long words as line-break hints), not a joiner between letters of scripts that need
  joiners (ZWNJ in Persian, ZWJ in Indic scripts), not a ZWJ in an emoji sequence (no letters
  around it), not a zero-width space in Thai or Japanese text (used there for line breaking).
- **A mixed word**: a word that reads as all ASCII, written with ASCII letters and at least
  one *disguised letter*: a letter that reads as an ASCII letter (its fold in ``normalise`` is
  ASCII) and is either of another script ("ign\u043ere" with a Cyrillic o) or a styled form
  (fullwidth or mathematical letters). A whole word in one script (Russian, Greek, Chinese) is
  not mixed; nor is a Greek word with a stray Latin letter (its other Greek letters do not read
  as ASCII); Latin letters of real orthographies that fold to ASCII (Turkish dotless i, U+0131)
  are not disguised.
- **A disguised trigger** (:func:`disguises`): the words that made another detector fire (an
  injection or authority phrase, a question's opening words, the query quoted in the passage)
  were written with an invisible character between letters (a soft hyphen included) or with a
  disguised letter. This catches what the two rules above let pass for fear of false
  positives: soft hyphens, whole words in Cyrillic look-alikes, whole words in fullwidth.
- **A text written in disguise** (:func:`written_in_disguise`): most of what reads as ASCII
  letters is disguised. Stray look-alikes occur in scraped text; a whole English text in
  Cyrillic look-alikes or fullwidth forms does not, and it also hides from the embedding (its
  vector lies far from the text it reads as, so the dense search cannot find what it copies).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import regex

from trishield.rings.normalise import describe, fold, has_script, is_invisible, is_latin, visible

SOFT_HYPHEN = "\u00ad"
NAMED = 3
STYLED = ("<wide>", "<font>")
"""Compatibility forms that only restyle a letter (fullwidth, mathematical). Ligatures such as
U+FB01 (fi), common in text extracted from PDFs, are not disguises."""
_JOINERLESS = regex.compile(r"[\p{Script=Latin}\p{Script=Greek}\p{Script=Cyrillic}"
                            r"\p{Script=Armenian}]")
_WORD = regex.compile(r"[\p{L}\p{M}\p{N}\p{Cf}\p{Default_Ignorable_Code_Point}]+")


@dataclass(frozen=True)
class Obfuscation:
    """One obfuscated word (or trigger span) and the characters that obfuscate it."""

    word: str
    characters: tuple[str, ...]

    @property
    def evidence(self) -> str:
        """``ign\\u200bore (U+200B ZERO WIDTH SPACE)``: at most three characters named."""
        names = ", ".join(describe(ch) for ch in self.characters[:NAMED])
        more = len(self.characters) - NAMED
        return f"{visible(self.word)} ({names}{f', {more} more' if more > 0 else ''})"


def is_disguised_letter(character: str) -> bool:
    """A non-ASCII letter that reads as an ASCII one: another script's look-alike or a
    compatibility form (fullwidth, mathematical). Latin letters of real orthographies that
    fold to ASCII (Turkish dotless i) are not disguised."""
    if character.isascii() or not unicodedata.category(character).startswith("L"):
        return False
    folded = fold(character)
    if not (folded.isascii() and folded.isalpha()):
        return False
    styled = unicodedata.decomposition(character).startswith(STYLED)
    return styled or (has_script(character) and not is_latin(character))


def _letter_neighbours(word: str, index: int) -> tuple[str, str]:
    before = next((ch for ch in reversed(word[:index]) if not is_invisible(ch)), "")
    after = next((ch for ch in word[index + 1:] if not is_invisible(ch)), "")
    return before, after


def _invisibles_between_letters(word: str, *, soft_hyphens: bool,
                                scripts: regex.Pattern[str] | None) -> list[str]:
    found = []
    for index, ch in enumerate(word):
        if not is_invisible(ch) or (ch == SOFT_HYPHEN and not soft_hyphens):
            continue
        before, after = _letter_neighbours(word, index)
        if not (before.isalpha() and after.isalpha()):
            continue
        if scripts is None or all(scripts.match(fold(ch)[:1] or ch) for ch in (before, after)):
            found.append(ch)
    return found


def _unique(characters: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(characters))


def _mixed_letters(word: str) -> list[str]:
    """The disguised letters of a word that reads as all ASCII but mixes ASCII letters with
    disguised ones. A word with any non-ASCII letter that is not disguised ("\u0393o\u03c1..."
    , a Greek word with two Latin o's) is a word of that other script, left alone."""
    letters = [ch for ch in word if ch.isalpha()]
    disguised = [ch for ch in letters if not ch.isascii() and is_disguised_letter(ch)]
    ascii_letters = sum(ch.isascii() for ch in letters)
    if disguised and ascii_letters and ascii_letters + len(disguised) == len(letters):
        return disguised
    return []


def obfuscated_words(text: str) -> list[Obfuscation]:
    """Words of ``text`` with an invisible character between letters, or mixed with
    disguised letters (the first two rules of the module)."""
    if text.isascii():
        return []
    found = []
    for match in _WORD.finditer(text):
        word = match.group()
        if word.isascii():
            continue
        suspicious = _invisibles_between_letters(word, soft_hyphens=False, scripts=_JOINERLESS)
        suspicious += _mixed_letters(word)
        if suspicious:
            found.append(Obfuscation(word, _unique(suspicious)))
    return found


DISGUISE_SHARE = 0.5
"""At least this share of the letters that read as ASCII are disguised ..."""
DISGUISE_LETTERS = 20
"""... at least this many of them (a fullwidth acronym or two in a Japanese text is not it) ..."""
FOREIGN_SHARE = 0.1
"""... and at most this many other letters (non-ASCII, not disguised) per letter that reads as
ASCII: a Russian, Greek or Japanese text has many letters with no ASCII look-alike (и,
л, λ, kana), a text disguised letter by letter has none."""


def written_in_disguise(text: str) -> Obfuscation | None:
    """The text's disguised letters, when the text as a whole is written in them (see the
    module); evidence: how many of how many, and the first characters named."""
    if text.isascii():
        return None
    letters = [ch for ch in text if ch.isalpha()]
    disguised = [ch for ch in letters if not ch.isascii() and is_disguised_letter(ch)]
    reading = sum(ch.isascii() for ch in letters) + len(disguised)
    foreign = len(letters) - reading
    if (len(disguised) < DISGUISE_LETTERS or len(disguised) < DISGUISE_SHARE * reading
            or foreign > FOREIGN_SHARE * reading):
        return None
    return Obfuscation(f"{len(disguised)} of {reading} letters that read as ASCII",
                       _unique(disguised))


def disguises(span: str) -> Obfuscation | None:
    """The obfuscation of a trigger ``span`` (as written), if it has any: an invisible
    character between letters (soft hyphens included) or a disguised letter."""
    if span.isascii():
        return None
    suspicious = []
    for match in _WORD.finditer(span):
        word = match.group()
        suspicious += _invisibles_between_letters(word, soft_hyphens=True, scripts=None)
        suspicious += [ch for ch in word if is_disguised_letter(ch)]
    return Obfuscation(span, _unique(suspicious)) if suspicious else None
