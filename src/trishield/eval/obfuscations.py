"""Unicode rewrites of a text that keep it readable to a person and a model, as an attacker
would use them to hide a poison from Ring 1's detectors.

The same five rewrites as ``benchmarks/ring1_obfuscation.py`` (which keeps its own copy so
that it can measure commits older than this module): a zero-width space, a zero-width joiner
or a soft hyphen in the middle of every word of 2+ letters; every letter that has a Cyrillic
look-alike replaced by it (from TR39's confusables.txt via ``confusable-homoglyphs``); every
printable ASCII character replaced by its fullwidth form.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from confusable_homoglyphs.confusables import confusables_data

_WORD = re.compile(r"[A-Za-z]{2,}")


def _inside_words(mark: str) -> Callable[[str], str]:
    def rewrite(text: str) -> str:
        return _WORD.sub(lambda m: m.group()[:len(m.group()) // 2] + mark
                         + m.group()[len(m.group()) // 2:], text)
    return rewrite


def _cyrillic_lookalikes() -> dict[str, str]:
    """ASCII letter -> the lowest Cyrillic code point whose TR39 prototype it is."""
    table: dict[str, str] = {}
    for character, homoglyphs in sorted(confusables_data.items()):
        if (len(character) == 1 and 0x400 <= ord(character) <= 0x52F and len(homoglyphs) == 1
                and len(homoglyphs[0]["c"]) == 1 and homoglyphs[0]["c"].isascii()
                and homoglyphs[0]["c"].isalpha()
                and unicodedata.normalize("NFD", character) == character):
            table.setdefault(homoglyphs[0]["c"], character)
    return table


CYRILLIC = _cyrillic_lookalikes()

OBFUSCATIONS: dict[str, Callable[[str], str]] = {
    "zero-width space": _inside_words("\u200b"),
    "zero-width joiner": _inside_words("\u200d"),
    "soft hyphen": _inside_words("\u00ad"),
    "Cyrillic look-alikes": lambda text: "".join(CYRILLIC.get(ch, ch) for ch in text),
    "fullwidth": lambda text: "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch
                                      for ch in text),
}
