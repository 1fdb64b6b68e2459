"""Rings 1 and 2 as stages (``defenses/ring_stages.py``): the candidates' embeddings are read
from the retriever once per question, Ring 2 reusing the rows Ring 1 fetched, and the
decisions are those of fetching them anew."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from trishield.defenses.retrievers import KBRetriever
from trishield.defenses.ring_stages import run_embeddings
from trishield.demo import attacks, questions
from trishield.eval.poisonedrag.defenses import make_asker
from trishield.kb import KnowledgeBase
from trishield.kb.indexes.retrieval import Candidate
from trishield.llm.panel import build_panel
from trishield.settings import PipelineConfig
from trishield.stages import Run
from trishield.trace import Trace


class CountingRetriever(KBRetriever):
    """The KB's own retriever, recording which chunks each ``embeddings`` call asked for."""

    def __init__(self, kb: KnowledgeBase):
        super().__init__(kb)
        self.asked: list[list[str]] = []

    def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
        self.asked.append([c.chunk_id for c in candidates])
        return super().embeddings(candidates)


def test_ring1_and_ring2_read_the_pools_embeddings_once_per_question(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        counting = CountingRetriever(kb)
        ask = make_asker("ring12", counting, build_panel(["extractive"]),
                         PipelineConfig(backend="dense"))
        for question in [q.question for q in questions()] + [a.question for a in attacks()]:
            counting.asked.clear()
            trace = ask(question).trace
            pool = [row.chunk_id for row in trace.ring2.ranked] + list(trace.ring1.blocked)
            assert len(counting.asked) == 1, question  # Ring 1's call; Ring 2 asks nothing
            assert sorted(counting.asked[0]) == sorted(pool)


def test_shared_rows_equal_rows_fetched_anew(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        retriever = KBRetriever(kb)
        pool = kb.search("How long are gift cards valid?", k=8)
        run = Run(Trace(question="q", defense="ring12", backend="dense", k=5, panel=[]),
                  retriever=retriever)
        whole = run_embeddings(run, pool)
        survivors = pool[1::2]
        shared = run_embeddings(run, survivors)
        assert np.array_equal(whole, retriever.embeddings(pool))
        assert np.array_equal(shared, retriever.embeddings(survivors))
        assert run_embeddings(run, []) is None


def test_a_retriever_that_returns_the_wrong_count_is_refused(demo_kb_dir: Path) -> None:
    class Short(KBRetriever):
        def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
            return super().embeddings(candidates)[:-1]

    with KnowledgeBase.open(demo_kb_dir) as kb:
        run = Run(Trace(question="q", defense="ring12", backend="dense", k=5, panel=[]),
                  retriever=Short(kb))
        with pytest.raises(ValueError, match="returned 3 embeddings for 4 candidates"):
            run_embeddings(run, kb.search("How long are gift cards valid?", k=4))
        assert run.embeddings == {}
