"""Unicode rewrites of a text that keep it readable to a person and a model, as an attacker
would use them to hide a poison from Ring 1's detectors.

Five rewrites (:data:`OBFUSCATIONS`): a zero-width space, a zero-width joiner or a soft hyphen
in the middle of every word of 2+ letters; every letter that has a Cyrillic look-alike
replaced by it (from TR39's confusables.txt via ``confusable-homoglyphs``); every printable
ASCII character replaced by its fullwidth form. Each is applied either to the whole text, or
(:func:`on_triggers`) only where Ring 1 would look: the question sentences (as Ring 1 reads
them: a white-box attacker), the injection phrases and the authority phrases, the rest left
plain, so that no stray disguised word elsewhere gives the rewrite away.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from confusable_homoglyphs.confusables import confusables_data

from trishield.rings.patterns import AUTHORITY_PHRASES, INJECTION_PHRASES
from trishield.rings.questions import questions

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


def trigger_spans(text: str) -> list[tuple[int, int]]:
    """Where Ring 1's text detectors look in ``text`` (written plainly): each question
    sentence, and each authority or injection phrase (whole words, any case); sorted and
    merged."""
    spans = [(q.start, q.end) for q in questions(text)]
    lowered = text.lower()
    for phrase in AUTHORITY_PHRASES + INJECTION_PHRASES:
        spans += [m.span() for m in re.finditer(rf"(?<!\w){re.escape(phrase)}(?!\w)", lowered)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def on_triggers(rewrite: Callable[[str], str]) -> Callable[[str], str]:
    """``rewrite`` applied only to :func:`trigger_spans` of a text."""
    def targeted(text: str) -> str:
        parts, at = [], 0
        for start, end in trigger_spans(text):
            parts += [text[at:start], rewrite(text[start:end])]
            at = end
        return "".join(parts) + text[at:]
    return targeted


TARGETED: dict[str, Callable[[str], str]] = {
    name: on_triggers(rewrite) for name, rewrite in OBFUSCATIONS.items()}
"""The same rewrites, on the question sentences and the authority and injection phrases
only."""
