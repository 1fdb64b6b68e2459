"""Numeric/attribute conflicts between passages: "30 days" in one, "90 days" in another.

A conflict is two passages from different documents that state different numbers for the same
unit in the same frame (they share a content word just before the number, or the unit is a
measure word like days or percent and the passages share the topic). Conflicts do not decide
anything: they are shown in the trace for a reader of it (the gate no longer opens on
them, see docs/design/ring3-consensus.md, "Gate").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

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


MEMO_PASSAGES = 2048
"""Passages whose numeric claims are kept in process: reading them is per-passage work that
does not depend on the question, and pools of related questions share passages."""


def numeric_claims(text: str) -> list[NumericClaim]:
    """Numbers with their unit (the word after, or $/%), and the content words before them."""
    return list(read_numbers(text))


@lru_cache(maxsize=MEMO_PASSAGES)
def read_numbers(text: str) -> tuple[NumericClaim, ...]:
    """:func:`numeric_claims`, kept per text (bounded, least recently used dropped)."""
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
    return tuple(claims)


def find_conflicts(passages: list[tuple[str, str, str]],
                   stored: Sequence[Sequence[NumericClaim] | None] | None = None
                   ) -> list[Conflict]:
    """Conflicts among ``(passage_id, doc_id, text)``; passages of one document never conflict.
    ``stored`` (one per passage, ``None`` where none is) holds numeric claims read at ingest
    (:mod:`trishield.rings.analysis`): the others are read now (memoised).

    Only claims of one unit can conflict, so claims are indexed by unit and compared within
    it, not every claim of every pair of passages; the conflicts come out in the order of the
    pairwise reading (first passage, second passage, their claims), first of each kept."""
    if stored is not None and len(stored) != len(passages):
        raise ValueError(f"{len(stored)} stored claim lists for {len(passages)} passages: "
                         "one each")
    by_unit: dict[str, list[tuple[int, int, NumericClaim]]] = {}
    for i, (_, _, text) in enumerate(passages):
        known = None if stored is None else stored[i]
        for number, claim in enumerate(read_numbers(text) if known is None else known):
            by_unit.setdefault(claim.unit, []).append((i, number, claim))
    pairs = []
    for same_unit in by_unit.values():
        for position, (i, m, a) in enumerate(same_unit):
            for j, n, b in same_unit[position + 1:]:
                if j != i and passages[i][1] != passages[j][1] and a.value != b.value:
                    shared = a.frame & b.frame
                    if shared:
                        pairs.append((i, j, m, n, a, b, shared))
    found: dict[tuple, Conflict] = {}
    for i, j, _, _, a, b, shared in sorted(pairs, key=lambda pair: pair[:4]):
        key = (passages[i][0], passages[j][0], a.unit, a.value, b.value)
        found.setdefault(key, Conflict(a.unit, passages[i][0], a.quote, passages[j][0],
                                       b.quote, tuple(sorted(shared))))
    return list(found.values())


def clear_memo() -> None:
    """Forget every passage read so far (to measure a cold start; nothing else needs it)."""
    read_numbers.cache_clear()
