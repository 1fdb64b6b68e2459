"""TriShield's own settings: which of the three rings run (``--defense``).

* ``none``   retrieve top-k, send it straight to one reader (the normal RAG pipeline);
* ``ring1``  a larger candidate pool, Ring 1's query-aware check drops what it blocks, top-k
             by retrieval rank, one reader;
* ``ring2``  the pool re-ranked by Ring 2's trust, top-k by trust, one reader;
* ``ring3``  top-k by retrieval rank to Ring 3 (gate, panel vote, evidence checks);
* ``ring12`` Rings 1 and 2, one reader;
* ``full``   all three rings.

Option ``gate`` overrides Ring 3's gate mode for one defense (the benchmark's ``full-always``).
"""

from __future__ import annotations

from trishield.defenses import DEFENSES, DefenseSpec
from trishield.defenses.answerers import PanelConsensus, SingleReader
from trishield.defenses.ring_stages import Ring1Filter, Ring2Reranker
from trishield.pipeline import Pipeline
from trishield.stages import Answerer, CandidateFilter

RINGS_OF: dict[str, frozenset[int]] = {
    "none": frozenset(), "ring1": frozenset({1}), "ring2": frozenset({2}),
    "ring3": frozenset({3}), "ring12": frozenset({1, 2}), "full": frozenset({1, 2, 3})}
SUMMARY = {
    "none": "undefended: top-k straight to one reader",
    "ring1": "Ring 1 on a larger pool, one reader",
    "ring2": "Ring 2's trust ranking, one reader",
    "ring3": "Ring 3's panel on the top-k",
    "ring12": "Rings 1 and 2, one reader",
    "full": "all three rings",
}


def build_trishield(name: str, spec: DefenseSpec) -> Pipeline:
    rings = RINGS_OF[name]
    config = spec.config
    if "gate" in spec.options:
        config = config.with_overrides(gate=spec.options["gate"])
    k, pool = config.scorer.context, config.scorer.pool
    filters: list[CandidateFilter] = [Ring1Filter(config.guard)] if 1 in rings else []
    reranker = Ring2Reranker(config.scorer, backend=spec.retriever.name) if 2 in rings else None
    answerer: Answerer
    if 3 in rings:
        answerer = PanelConsensus(spec.panel, config.consensus,
                                  second_reader=spec.second_reader)
    else:
        # the undefended baseline reads in retrieval order, as a normal RAG pipeline does
        answerer = SingleReader(spec.panel[0], order="trust" if rings else "retrieval",
                                empty_reason="no passage to answer from",
                                answered_reason="answered by one model (no consensus)")
    return Pipeline(name, spec.retriever, answerer, k=k,
                    pool=pool if rings - {3} else k,  # Rings 1-2 need a larger pool
                    filters=filters, reranker=reranker, rings=sorted(rings))


for _name, _rings in RINGS_OF.items():
    DEFENSES.add(_name, build_trishield, summary=SUMMARY[_name], suite="trishield",
                 rings=_rings, options=frozenset({"gate"}))
