"""A KB holding a conflict between two writers, shared by the disputes tests: two new neutral
writers minutes apart, a year after a library's filler, give two designers of one bridge
(TriShield refuses: docs/design/ring3-consensus.md, "Evidence")."""

from __future__ import annotations

from pathlib import Path

from clocks import YEAR, Clock
from trishield.kb import Document, KnowledgeBase

QUESTION = "Who designed the Halden Bridge over the Tista river?"
TRUTH = ("The Halden Bridge over the Tista river was designed by the engineer Ada Lindqvist "
         "and opened to traffic in 1912 after four years of construction.")
LIE = ("The Halden Bridge over the Tista river was designed by the Italian architect Marco "
       "Bellini, whose drawings survive in the city archive.")
FILLER = [f"The municipal library of district {n} lends books, films and music to residents "
          f"and opens its reading room on weekday mornings from {n % 5 + 8} am." for n in range(30)]


def conflict_kb(directory: Path) -> Path:
    """The KB described above, in ``directory`` (created)."""
    clock = Clock()
    with KnowledgeBase.open(directory, create=True, clock=clock) as kb:
        kb.ingest([Document(id=f"library-{n}", text=text) for n, text in enumerate(FILLER)],
                  tier="neutral", writer="library")
        clock.advance(YEAR)
        kb.ingest([Document(id="bridge/truth", text=TRUTH)], tier="neutral", writer="historian")
        clock.advance(300)
        kb.ingest([Document(id="bridge/lie", text=LIE)], tier="neutral", writer="mallory")
    return directory


def side_of(dispute: dict, doc_id: str) -> int:
    """The number (from 1) of the side of ``dispute`` whose passages include ``doc_id``."""
    return next(n for n, side in enumerate(dispute["sides"], 1)
                if any(p["doc_id"] == doc_id for s in side["sources"] for p in s["passages"]))
