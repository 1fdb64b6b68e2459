"""Unicode TR39 look-alikes with an ASCII prototype, read once from ``confusable-homoglyphs``.

One table for the two places that must agree on what imitates ASCII: Ring 1's skeleton
(``rings/normalise.py``) and the knowledge base's id checks (``kb/unicode_checks.py``), which
sit in layers that do not import each other.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from confusable_homoglyphs.confusables import confusables_data


@lru_cache(maxsize=1)
def ascii_prototypes() -> dict[str, str]:
    """Non-ASCII character -> its TR39 prototype, for the single-character prototypes that
    are ASCII (decomposed forms left out: NFKC handles those)."""
    table = {}
    for character, homoglyphs in confusables_data.items():
        if len(character) != 1 or character.isascii() or len(homoglyphs) != 1:
            continue
        prototype = homoglyphs[0]["c"]
        if prototype.isascii() and unicodedata.normalize("NFD", character) == character:
            table[character] = prototype
    return table


_DIRECTION_MARKS = "\u200e\u200f"  # the table wraps right-to-left entries in these


@lru_cache(maxsize=1)
def ascii_punctuation_lookalikes() -> frozenset[str]:
    """Non-ASCII characters that TR39 says read as ASCII punctuation or symbols (``/``, ``-``,
    ``.``, ``_``, ``:`` and the rest): U+30CE KATAKANA LETTER NO for ``/``, U+2CBA COPTIC
    CAPITAL LETTER DIALECT-P NI for ``-``, U+02D0 MODIFIER LETTER TRIANGULAR COLON for ``:``.
    Read in both directions of the table, since it lists a prototype's look-alikes under the
    prototype and each look-alike's prototype under the look-alike."""
    found = set()
    for character, homoglyphs in confusables_data.items():
        for homoglyph in homoglyphs:
            other = homoglyph["c"].strip(_DIRECTION_MARKS)
            for candidate, prototype in ((character, other), (other, character)):
                if len(candidate) == 1 and not candidate.isascii() and len(prototype) == 1 \
                        and prototype.isascii() and prototype.isprintable() \
                        and not prototype.isalnum() and prototype != " ":
                    found.add(candidate)
    return frozenset(found)
