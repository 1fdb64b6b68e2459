"""A KB clock for tests: a history of years written in seconds (the evidence weighs time)."""

from __future__ import annotations

DAY = 86_400.0
YEAR = 365 * DAY
START = 1_700_000_000.0


class Clock:
    """Stands at ``at`` and moves a millisecond per reading (writes keep their order); moved on
    by :meth:`advance`. Inject it with ``KnowledgeBase.open(..., clock=clock)``."""

    def __init__(self, at: float = START):
        self.at = at

    def __call__(self) -> float:
        self.at += 0.001
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += seconds
