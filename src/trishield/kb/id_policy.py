"""Which characters a *new* document id may hold: an allow-list by kind and script, not a list
of known look-alikes.

Why an allow-list: the earlier rules (:mod:`trishield.kb.unicode_checks`) refused what they
knew to be dangerous, and every review found another character that slipped through:
U+2044 FRACTION SLASH, U+2215 DIVISION SLASH, U+29F8 BIG SOLIDUS and U+2571 read as ``/``,
U+2010 HYPHEN and U+02D7 MODIFIER LETTER MINUS SIGN as ``-``, U+0338 COMBINING LONG SOLIDUS
OVERLAY strikes a ``/`` through a letter (issue 49). Here an id is built from parts that are
allowed, and anything else is refused:

* **ASCII**: letters, digits, the space and ASCII punctuation. Ids carry their structure
  (``/``, ``-``, ``.``, ``_``, ``:``) in ASCII only.
* **Outside ASCII, letters, digits and combining marks only**, in *words* (runs of them):
  no punctuation, symbol, separator or format character, whatever it looks like.
* **One script per word**: Latin, Cyrillic, Greek, Arabic, ... each on its own; Han may go
  with Hiragana and Katakana (Japanese), Hangul (Korean) or Bopomofo (Chinese), the way those
  languages are written. Latin does not mix with them inside a word.
* **Letters that depend on others**: a letter that TR39 lists as a look-alike of ASCII
  punctuation (U+30CE KATAKANA LETTER NO for ``/``), or a modifier letter, counts only inside
  a word with another letter of its script (``\u30ce\u30fc\u30c8``, never ``\u30ce`` or
  ``2024\u30ce05``); a
  letter of no script of its own (U+30FC KATAKANA-HIRAGANA PROLONGED SOUND MARK, U+02D0
  MODIFIER LETTER TRIANGULAR COLON) must follow a letter outside Latin (``コーヒー``); Latin
  has no such letters in ids (U+01C3 LATIN LETTER RETROFLEX CLICK reads as ``!``).
* **Marks** follow a letter of a script other than Latin (an accented Latin letter is
  written composed, as NFKC requires; a mark on a non-ASCII Latin letter, U+0131 DOTLESS I
  with U+0307 COMBINING DOT ABOVE, reads as a plain one), and no overlay mark (combining
  class 1: U+0338 and its kind) is allowed.
* **Digits outside ASCII** stand in a word with letters of their script and never beside
  ASCII digits (U+0660 ARABIC-INDIC DIGIT ZERO in ``2024\u066005`` reads as ``2024.05``).

The earlier rules still apply first (invisible and bidi characters, NFKC, whole-script
look-alikes of ASCII words). The policy is for ids being *created*: ids a KB already holds
keep working (:meth:`KnowledgeBase.ingest` checks only ids it does not store or hold), and
reads, deletes and the service's paths check ids with the earlier rules only, so no stored
document becomes unreachable.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from confusable_homoglyphs.categories import alias

from trishield.homoglyphs import ascii_punctuation_lookalikes
from trishield.kb.unicode_checks import describe, id_problem

_NO_SCRIPT = frozenset({"COMMON", "INHERITED"})
_UNKNOWN_SCRIPT = "Unknown"
_FAMILIES = (frozenset({"HAN", "HIRAGANA", "KATAKANA"}), frozenset({"HAN", "HANGUL"}),
             frozenset({"HAN", "BOPOMOFO"}))
_OVERLAY = 1  # canonical combining class of marks drawn through the character before them
ALLOWED_ASCII = "letters, digits, the space and ASCII punctuation such as / - . _ :"


def _words(doc_id: str) -> Iterator[tuple[int, str]]:
    """``(start, word)`` for each run of letters, marks and digits."""
    start = None
    for index, character in enumerate(doc_id + " "):
        inside = unicodedata.category(character)[0] in "LMN"
        if inside and start is None:
            start = index
        elif not inside and start is not None:
            yield start, doc_id[start:index]
            start = None


def _script(character: str) -> str:
    return alias(character)


def _same_family(one: str, other: str) -> bool:
    return one == other or any({one, other} <= family for family in _FAMILIES)


def _is_base_letter(character: str) -> bool:
    """A letter outside ASCII that stands on its own: of a script, not Latin, not a modifier
    letter and not a look-alike of punctuation."""
    return (not character.isascii() and unicodedata.category(character) in ("Lu", "Ll", "Lt", "Lo")
            and _script(character) not in _NO_SCRIPT | {"LATIN", _UNKNOWN_SCRIPT}
            and character not in ascii_punctuation_lookalikes())


def _mixed_scripts(word: str) -> str | None:
    scripts = {_script(ch) for ch in word if unicodedata.category(ch)[0] in "LN"} - _NO_SCRIPT
    if len(scripts) > 1 and not any(scripts <= family for family in _FAMILIES):
        return (f"mixes scripts ({', '.join(sorted(s.lower() for s in scripts))}) in the word "
                f"{word!r}: a word is written in one script")
    return None


def _digit_problem(word: str, character: str) -> str | None:
    if any(ch.isascii() and ch.isdigit() for ch in word):
        return (f"mixes ASCII digits with {describe(character)} in the word {word!r}: digits "
                "of two systems can pass for punctuation or other numbers")
    script = _script(character)
    if not any(_is_base_letter(ch) and (script in _NO_SCRIPT or _same_family(_script(ch), script))
               for ch in word):
        return (f"has {describe(character)} in the word {word!r} without a letter of its "
                "script: digits outside ASCII stand only in words of their own script")
    return None


def _mark_problem(word: str, position: int, character: str) -> str | None:
    if unicodedata.combining(character) == _OVERLAY:
        return (f"contains the overlay mark {describe(character)}, which strikes through the "
                "character before it")
    before = word[position - 1] if position > 0 else ""  # a mark before it passed already
    category = unicodedata.category(before) if before else ""
    if not before or before.isascii() or category[0] not in "LM" \
            or (category[0] == "L" and _script(before) == "LATIN"):
        return (f"has the mark {describe(character)} after {before or 'nothing'!r}: marks "
                "follow letters of scripts other than Latin (write an accented Latin letter "
                "composed; U+0131 DOTLESS I with a dot above would read as i)")
    return None


def _dependent_problem(word: str, position: int, character: str) -> str | None:
    """A look-alike of punctuation, a modifier letter or a letter of no script."""
    script = _script(character)
    why = ("reads as ASCII punctuation" if character in ascii_punctuation_lookalikes()
           else "is a modifier letter" if unicodedata.category(character) == "Lm"
           else "belongs to no script")
    if script in ("LATIN", _UNKNOWN_SCRIPT):
        return f"contains {describe(character)}, which {why}; ids use ASCII punctuation"
    if script in _NO_SCRIPT:
        before = position - 1  # back over marks and other letters of no script
        while before >= 0 and not word[before].isascii() and (
                unicodedata.category(word[before])[0] == "M"
                or _script(word[before]) in _NO_SCRIPT):
            before -= 1
        if before < 0 or word[before].isascii() or not word[before].isalpha() \
                or _script(word[before]) in ("LATIN", _UNKNOWN_SCRIPT):
            return (f"contains {describe(character)}, which {why}, without a letter outside "
                    "Latin before it")
        return None
    if not any(_is_base_letter(ch) and _same_family(_script(ch), script) for ch in word):
        return (f"contains {describe(character)}, which {why}, in the word {word!r} without "
                "another letter of its script")
    return None


def _character_problem(word: str, position: int) -> str | None:
    character = word[position]
    category = unicodedata.category(character)
    if character.isascii():
        return None
    if category[0] == "M":
        return _mark_problem(word, position, character)
    if category[0] == "N":
        return _digit_problem(word, character)
    script = _script(character)
    if script == _UNKNOWN_SCRIPT:
        return f"contains {describe(character)}, whose script is not known here"
    if character in ascii_punctuation_lookalikes() or category == "Lm" or script in _NO_SCRIPT:
        return _dependent_problem(word, position, character)
    return None


def new_id_problem(doc_id: str) -> str | None:
    """Why ``doc_id`` may not be given to a new document, or ``None`` when the policy allows
    it (see the module doc). Length and path rules are the callers'."""
    earlier = id_problem(doc_id)
    if earlier is not None or doc_id.isascii():  # printable ASCII is allowed as it is
        return earlier
    covered = set()
    for start, word in _words(doc_id):
        covered.update(range(start, start + len(word)))
        problem = _mixed_scripts(word)
        for position in range(len(word)):
            problem = problem or _character_problem(word, position)
        if problem is not None:
            return problem
    for index, character in enumerate(doc_id):
        if index not in covered and not (character.isascii() and character.isprintable()):
            return (f"contains {describe(character)}: outside letters, digits and marks an id "
                    f"holds only ASCII ({ALLOWED_ASCII})")
    return None
