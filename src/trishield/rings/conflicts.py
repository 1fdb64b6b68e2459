"""Numeric/attribute conflicts between passages: "30 days" in one, "90 days" in another.

A conflict is two passages from different documents that state different numbers for the same
unit in the same frame (they share a content word just before the number, or the unit is a
measure word like days or percent and the passages share the topic). Conflicts do not decide
anything: they are shown in the trace for a reader of it (the gate no longer opens on
them, see docs/design.md "Gate").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trishield.text import STOPWORDS, content_words

_NUMBER = re.compile(r"(?<![\w.])(\$|£|€)?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(%)?"
                     r"\s*((?:business|calendar|working|full|paid)\s+[A-Za-z]+|[A-Za-z]+)?")
_FRAME_WORDS = 4
_GENERIC_FRAME = frozenset({"within", "up", "least", "about", "around", "approximately", "over",
                            "under", "less", "after", "before", "every", "per", "first", "last"})


@dataclass(frozen=True)
class NumericClaim:
    value: str
    unit: str
    frame: frozenset[str]
    quote: str


@dataclass(frozen=True)
class Conflict:
    unit: str
    first: str
    first_value: str
    second: str
    second_value: str
    shared_frame: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"unit": self.unit, "a": self.first, "a_value": self.first_value,
                "b": self.second, "b_value": self.second_value,
                "shared_frame": list(self.shared_frame)}


def numeric_claims(text: str) -> list[NumericClaim]:
    """Numbers with their unit (the word after, or $/%), and the content words before them."""
    claims = []
    for match in _NUMBER.finditer(text):
        currency, number, percent, following = match.groups()
        unit = currency or percent or " ".join((following or "").lower().split())
        if not unit or unit in STOPWORDS or unit in _GENERIC_FRAME:
            continue
        before = [word for word in content_words(text[max(0, match.start() - 80):match.start()])
                  if word not in _GENERIC_FRAME and not word.isdigit()][-_FRAME_WORDS:]
        value = number.replace(",", "")
        claims.append(NumericClaim(value, unit.rstrip("s") if unit[-1:].isalpha() else unit,
                                   frozenset(before), match.group().strip()))
    return claims


def find_conflicts(passages: list[tuple[str, str, str]]) -> list[Conflict]:
    """Conflicts among ``(passage_id, doc_id, text)``; passages of one document never conflict."""
    claims = [(pid, doc, numeric_claims(text)) for pid, doc, text in passages]
    found: dict[tuple, Conflict] = {}
    for i, (first_id, first_doc, first_claims) in enumerate(claims):
        for second_id, second_doc, second_claims in claims[i + 1:]:
            if first_doc == second_doc:
                continue
            for a in first_claims:
                for b in second_claims:
                    shared = a.frame & b.frame
                    if a.unit == b.unit and a.value != b.value and shared:
                        key = (first_id, second_id, a.unit, a.value, b.value)
                        found.setdefault(key, Conflict(a.unit, first_id, a.quote, second_id,
                                                       b.quote, tuple(sorted(shared))))
    return list(found.values())
