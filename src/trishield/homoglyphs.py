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
