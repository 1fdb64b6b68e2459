"""Numeric conflicts compared within a unit give what comparing every claim of every pair of
passages gave, in the same order; a passage's numbers are read once."""

from __future__ import annotations

import random

from trishield.rings.conflicts import (
    Conflict,
    clear_memo,
    find_conflicts,
    numeric_claims,
    read_numbers,
)


def _reference_conflicts(passages: list[tuple[str, str, str]]) -> list[Conflict]:
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


PHRASES = ["Refunds are accepted within {} days of delivery.",
           "Shipping to Canada takes {} business days.", "The bridge cost ${} to build.",
           "About {}% of refunds are approved within {} days.",
           "The season contained {} episodes.", "Delivery of refunds takes {} days.",
           "Shipping to Canada costs {} dollars and takes {} days."]


def test_conflicts_equal_the_pairwise_reading_on_random_pools() -> None:
    rng = random.Random(11)
    for _ in range(150):
        passages = []
        for number in range(rng.randint(0, 12)):
            text = " ".join(rng.choice(PHRASES).format(*(rng.choice([5, 30, 90, "1,500"])
                                                         for _ in range(2)))
                            for _ in range(rng.randint(1, 3)))
            passages.append((f"p{number}", f"d{rng.randint(0, 5)}", text))
        assert find_conflicts(passages) == _reference_conflicts(passages)


def test_numbers_read_once_are_the_numbers_read_fresh() -> None:
    text = "Items can be returned for a refund within 30 days, or 90 days for members."
    clear_memo()
    fresh = numeric_claims(text)
    assert read_numbers.cache_info().currsize == 1
    assert numeric_claims(text) == fresh and [c.value for c in fresh] == ["30", "90"]
    fresh.clear()  # a caller's list is its own: the memo is untouched
    assert len(numeric_claims(text)) == 2
