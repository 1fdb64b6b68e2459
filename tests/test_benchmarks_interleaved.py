"""``benchmarks/interleaved.py``: every question is asked of every defense with the first one
alternating, and seconds are compared only where no defense answered from its cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import interleaved


def test_the_defense_asked_first_alternates_question_by_question() -> None:
    calls: list[tuple[str, int]] = []

    def asker(name: str):
        def ask(question: int) -> dict:
            calls.append((name, question))
            return {"answer": f"{name}{question}"}
        return ask

    records = interleaved.ask_in_turn([0, 1, 2], {"none": asker("none"), "full": asker("full")})
    assert calls == [("none", 0), ("full", 0), ("full", 1), ("none", 1), ("none", 2),
                     ("full", 2)]
    assert [r["answer"] for r in records["full"]] == ["full0", "full1", "full2"]
    assert all(r["seconds"] >= 0 for rows in records.values() for r in rows)


def test_timing_counts_only_questions_every_defense_answered_fresh() -> None:
    records = {"none": [{"seconds": 2.0, "cached": False}, {"seconds": 9.0, "cached": True},
                        {"seconds": 4.0, "cached": False}],
               "full": [{"seconds": 3.0, "cached": False}, {"seconds": 1.0, "cached": False},
                        {"seconds": 3.0, "cached": False}]}
    timed = interleaved.timing(records, "none", lambda r: not r["cached"])
    assert timed["timed_questions"] == 2
    assert timed["seconds_per_question"] == {"none": 3.0, "full": 3.0}
    assert timed["ratio_to_none"] == {"none": 1.0, "full": 1.0}


def test_timing_refuses_an_unknown_baseline_and_unequal_answers() -> None:
    with pytest.raises(ValueError, match="baseline"):
        interleaved.timing({"none": []}, "full", lambda r: True)
    with pytest.raises(ValueError, match="same questions"):
        interleaved.timing({"none": [{"seconds": 1.0}], "full": []}, "none", lambda r: True)
