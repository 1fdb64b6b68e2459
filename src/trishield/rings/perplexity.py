"""Ring 1's repetition signal ``S_perp`` and its length-aware excess ``S_perp_len``.

A module of its own (re-exported by :mod:`trishield.rings.ingest_guard`) because it is part of
the query-independent passage analysis (:mod:`trishield.rings.analysis`), whose version is a
hash of the modules it runs: the guard's weights and thresholds can change without making
every stored analysis stale.
"""

from __future__ import annotations

from collections import Counter

from trishield.text import words

HEAPS_K = 1.734
HEAPS_EXPONENT = -0.205
"""Clean-text vocabulary growth ``|V|/n = K * n^exponent``, fitted on the HotpotQA training
corpus (994 passages; not part of any evaluation KB): see ``trishield.eval.calibration``."""


def perplexity_score(text: str) -> dict[str, float]:
    """The paper's ``S_perp`` and its length-aware excess ``S_perp_len``."""
    tokens = words(text)
    if not tokens:
        return {"s_perp": 0.0, "s_perp_len": 0.0, "rep": 0.0, "top": 0.0, "words": 0}
    count = len(tokens)
    rep = 1.0 - len(set(tokens)) / count
    top = Counter(tokens).most_common(1)[0][1] / count
    s_perp = min(1.0, 0.6 * rep + 2.0 * max(0.0, top - 0.12))
    expected_rep = max(0.0, 1.0 - min(1.0, HEAPS_K * count ** HEAPS_EXPONENT))
    s_perp_len = min(1.0, max(0.0, s_perp - 0.6 * expected_rep))
    return {"s_perp": s_perp, "s_perp_len": s_perp_len, "rep": rep, "top": top, "words": count}
