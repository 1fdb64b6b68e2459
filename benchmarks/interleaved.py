"""Ask every question of every defense in turn, and time them against each other fairly.

A defended answer's cost is a *ratio* to the undefended one (issue: "at most 1.2x with the same
reader, same run"). Two runs one after the other measure two different loads on a shared
machine, so ``benchmarks/benign_answers.py`` and ``benchmarks/docqa.py`` both ask each
question of every defense back to back, alternating which defense goes first, and compare
seconds only on the questions where no defense was served from its response cache (a cached
answer costs nothing and would flatter whichever defense had it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

Question = TypeVar("Question")
Record = dict


def ask_in_turn(questions: Sequence[Question],
                askers: Mapping[str, Callable[[Question], Record]],
                *, on_question: Callable[[int, Mapping[str, list[Record]]], None] | None = None,
                ) -> dict[str, list[Record]]:
    """Every question by every asker, the first asker alternating question by question; each
    record gains its ``seconds``. ``on_question(number, records)`` reports progress."""
    names = list(askers)
    records: dict[str, list[Record]] = {name: [] for name in names}
    for number, question in enumerate(questions):
        for name in names if number % 2 == 0 else list(reversed(names)):
            started = time.perf_counter()
            record = askers[name](question)
            record["seconds"] = time.perf_counter() - started
            records[name].append(record)
        if on_question is not None:
            on_question(number, records)
    return records


def timing(records: Mapping[str, Sequence[Record]], baseline: str,
           is_fresh: Callable[[Record], bool]) -> dict:
    """Seconds per question over the questions every asker answered fresh (``is_fresh``),
    and each asker's ratio to ``baseline`` over exactly those questions."""
    if baseline not in records:
        raise ValueError(f"the baseline {baseline!r} is not among {sorted(records)}")
    names = list(records)
    count = len(records[baseline])
    if any(len(records[name]) != count for name in names):
        raise ValueError("every asker must have answered the same questions")
    fresh = [i for i in range(count) if all(is_fresh(records[name][i]) for name in names)]
    spent = {name: sum(records[name][i]["seconds"] for i in fresh) for name in names}
    return {"timed_questions": len(fresh),
            "seconds_per_question": {name: round(s / max(1, len(fresh)), 2)
                                     for name, s in spent.items()},
            f"ratio_to_{baseline}": {name: round(s / spent[baseline], 3) if spent[baseline]
                                     else None for name, s in spent.items()}}
