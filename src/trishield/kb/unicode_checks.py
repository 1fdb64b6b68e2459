"""The Unicode rules for what a KB accepts as a document id, and as a document's text.

An id names a document to every reader, so it must not be able to imitate another id:
"legal/warrant\u0443" (U+0443 CYRILLIC SMALL LETTER U at the end) reads as
"legal/warranty", an id with a right-to-left override shows its characters in another order,
a zero-width space makes two ids that print alike, and U+2028 breaks the line it is logged on.

An id is refused when it has

* a character that is not shown as itself: control (``Cc``), format (``Cf``: zero-width
  space and joiners, bidi controls, soft hyphen, BOM), line or paragraph separator (``Zl``,
  ``Zp``), a space other than U+0020, private-use, surrogate or unassigned code points, or any
  other ``Default_Ignorable_Code_Point``;
* a compatibility form (not NFKC-stable: fullwidth letters, ligatures, superscripts), which
  reads as its plain form;
* a word (a run of letters, marks and digits) that mixes scripts, other than Latin with the
  Han, Kana, Hangul or Bopomofo that Japanese, Chinese and Korean write alongside it
  (Unicode TR39's "highly restrictive" profile);
* a word written wholly in look-alikes of ASCII letters from another script (Cyrillic
  "\u0440\u0430\u0443\u0440\u0430l" for "paypal"): TR39's whole-script confusables, read from
  ``confusables.txt``.

Why not reuse Ring 1's skeleton (``rings/normalise.py``): the KB sits below the rings and
must not import them. The TR39 data comes from the same pinned ``confusable-homoglyphs``
package, read the same way (a character's prototype is the sole entry of a non-ASCII character
that is not canonically decomposable); ``unicodedata`` gives categories and NFKC and
``regex`` the ``Default_Ignorable_Code_Point`` property.

A text is refused when nothing in it is visible: a document of zero-width spaces is empty.
"""

from __future__ import annotations

import unicodedata

import regex
from confusable_homoglyphs.categories import alias

from trishield.homoglyphs import ascii_prototypes

_IGNORABLE = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]")
_INVISIBLE_OR_SPACE = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}\s]+")
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_WORD_CATEGORIES = ("L", "M", "N")
_NEUTRAL_SCRIPTS = frozenset({"COMMON", "INHERITED"})
_SCRIPT_MIXES = (frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
                 frozenset({"LATIN", "HAN", "HANGUL"}),
                 frozenset({"LATIN", "HAN", "BOPOMOFO"}))


def describe(character: str) -> str:
    """``U+200B ZERO WIDTH SPACE``: how an error names a character."""
    return f"U+{ord(character):04X} {unicodedata.name(character, 'UNNAMED')}"


def _hidden_character(doc_id: str) -> str | None:
    for character in doc_id:
        category = unicodedata.category(character)
        if character == " ":
            continue
        if category in _REFUSED_CATEGORIES or _IGNORABLE.match(character):
            return character
    return None


def _words(doc_id: str) -> list[str]:
    words, current = [], []
    for character in doc_id:
        if unicodedata.category(character).startswith(_WORD_CATEGORIES):
            current.append(character)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def _scripts(word: str) -> set[str]:
    # letters and digits: ASCII digits are Common, but U+0663 ARABIC-INDIC DIGIT THREE in a
    # Latin word is a script of its own
    return {alias(ch) for ch in word if unicodedata.category(ch).startswith(("L", "N"))} \
        - _NEUTRAL_SCRIPTS


def id_problem(doc_id: str) -> str | None:
    """Why ``doc_id`` could imitate another id or hide characters, or ``None`` when it is
    fine. Length, surrounding whitespace and path rules are checked by the callers."""
    hidden = _hidden_character(doc_id)
    if hidden is not None:
        return (f"contains {describe(hidden)}, which is not shown as itself (control, format, "
                "bidi, invisible, separator or non-ASCII space characters are refused)")
    if doc_id.isascii():  # one script, NFKC-stable, no look-alikes: nothing more to check
        return None
    if unicodedata.normalize("NFKC", doc_id) != doc_id:
        changed = [ch for ch in doc_id if unicodedata.normalize("NFKC", ch) != ch]
        if not changed:  # decomposed letters: e + U+0301 reads as the one letter é
            return (f"is not in composed (NFKC) form; write it as "
                    f"{unicodedata.normalize('NFKC', doc_id)!r}")
        return (f"contains the compatibility character {describe(changed[0])}, which reads "
                f"as {unicodedata.normalize('NFKC', changed[0])!r}; write that instead")
    prototypes = ascii_prototypes()
    for word in _words(doc_id):
        scripts = _scripts(word)
        if len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPT_MIXES):
            return (f"mixes scripts ({', '.join(sorted(s.lower() for s in scripts))}) in the "
                    f"word {word!r}: look-alike letters can imitate another id")
        letters = [ch for ch in word if unicodedata.category(ch).startswith("L")]
        if letters and not any(ch.isascii() for ch in letters) \
                and all(ch in prototypes for ch in letters):
            imitated = "".join(prototypes.get(ch, ch) for ch in word)
            return (f"the word {word!r} is written in look-alikes of ASCII letters (it reads "
                    f"as {imitated!r}); use the ASCII letters")
    return None


def has_visible_text(text: str) -> bool:
    """Whether anything is left of ``text`` once whitespace and invisible characters go."""
    return bool(_INVISIBLE_OR_SPACE.sub("", text))
