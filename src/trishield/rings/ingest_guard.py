"""Ring 1, the Ingest Guard: judges each document on its own, before it can be retrieved.

``C = w_perp * S_perp_len + w_pat * S_pat + w_out * S_out``; a document is blocked when
``C >= theta``. ``S_perp`` is the paper's repetition score. Measured on clean Wikipedia it grows
with length (longer texts repeat more), so a short poison scores *lower* than clean passages; the
combination therefore uses ``S_perp_len``, the excess of ``S_perp`` over what clean text of the
same length scores (a Heaps'-law fit on clean training passages), and the trace carries both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from pydantic.dataclasses import dataclass as config_dataclass

from trishield.kb.screening import Contradiction, Neighbourhood
from trishield.rings.analysis import PassageAnalysis, analyse
from trishield.rings.config_types import CONFIG, Unit
from trishield.rings.outlier import outlier_scores as outlier_scores  # re-exported
from trishield.rings.outlier import stored_outlier_scores
from trishield.rings.patterns import PatternHit, PatternWeights, pattern_hits, pattern_score
from trishield.rings.perplexity import HEAPS_EXPONENT as HEAPS_EXPONENT  # re-exported
from trishield.rings.perplexity import HEAPS_K as HEAPS_K  # re-exported
from trishield.rings.perplexity import perplexity_score as perplexity_score  # re-exported
from trishield.rings.tamper import TamperConfig, tampered_copies


@config_dataclass(frozen=True, config=CONFIG)
class GuardConfig:
    """Ring 1 weights and thresholds (defaults chosen on training data only)."""

    w_perp: Unit = 0.2
    w_pat: Unit = 0.6
    w_out: Unit = 0.2
    theta: Unit = 0.24
    """Block at ``C >= theta``. Chosen by ``python -m trishield.eval.calibration`` on training
    halves only (five genres of clean text, ``S_out`` as at ingest; the published and template
    PoisonedRAG-NQ poisons of the training targets): the lowest worst-genre false-positive
    rate that keeps the poisons blocked and ``obfuscated_text``'s role. Held out, the whole
    ring (``tampered_copy`` included): at most 0.96% of any genre blocked (email, 3 of 312),
    wiki5k 0.22% (11 of 5,000), published poisons 0.88 (220 of 250). See
    docs/design/ring1-ingest-guard.md."""
    flag_theta: Unit = 0.1
    """Post-retrieval: at ``C >= flag_theta`` a passage is flagged (kept, but the gate opens)."""
    quarantine_trusted: bool = False
    """Trusted writers are accountable: their documents are scored but never quarantined."""
    patterns: PatternWeights = field(default_factory=PatternWeights)
    tamper: TamperConfig = field(default_factory=TamperConfig)
    """The tampered-copy detector (:mod:`trishield.rings.tamper`); its hit joins the
    pattern detectors' noisy-OR."""


@dataclass(frozen=True)
class GuardVerdict:
    """Ring 1's judgement of one document or passage, with every score and reason."""

    subject: str
    s_perp: float
    s_perp_len: float
    s_pat: float
    s_out: float | None
    combined: float
    blocked: bool
    flagged: bool
    patterns: tuple[PatternHit, ...]
    reasons: tuple[str, ...]
    contradiction: Contradiction | None = field(default=None, compare=False)
    """At ingest, the other writer's stored document this one copies with a fact changed
    (the tampered-copy detector's finding, changed words and all): the KB records it as a
    dispute. Not part of :meth:`as_dict` (the scores and reasons say it already)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.subject,
            "s_perp": round(self.s_perp, 4),
            "s_perp_len": round(self.s_perp_len, 4),
            "s_pat": round(self.s_pat, 4),
            "s_out": None if self.s_out is None else round(self.s_out, 4),
            "c": round(self.combined, 4),
            "blocked": self.blocked,
            "flagged": self.flagged,
            "patterns": [hit.as_dict() for hit in self.patterns],
            "reasons": list(self.reasons),
        }


class IngestGuard:
    """Scores texts with the three Ring 1 signals and decides block / flag / pass.

    It is the knowledge base's screener at ingest (:class:`trishield.kb.screening.Screener`,
    through :meth:`screen`): the KB defines what it needs and Ring 1 provides it, so kb/ does
    not import rings/.
    """

    def __init__(self, config: GuardConfig | None = None):
        self.config = config or GuardConfig()

    def judge(self, subject: str, text: str, *, s_out: float | None = None,
              query: str | None = None, tier: str = "neutral",
              notes: Sequence[str] = (), extra: Sequence[PatternHit] = (),
              analysis: PassageAnalysis | None = None) -> GuardVerdict:
        """One verdict; ``notes`` are extra reasons (why a signal could not be measured),
        ``extra`` hits of detectors that need more than the text (a tampered copy).
        ``analysis`` is ``text``'s query-independent analysis when it is known already (stored
        at ingest); else it is computed here: the verdict is the same either way."""
        config = self.config
        analysis = analysis if analysis is not None else analyse(text)
        perplexity = analysis.perplexity
        hits = (*pattern_hits(analysis.signals, text, query=query, weights=config.patterns),
                *extra)
        s_pat = pattern_score(list(hits))
        combined = (config.w_perp * perplexity["s_perp_len"] + config.w_pat * s_pat
                    + config.w_out * (s_out or 0.0))
        over = combined >= config.theta
        exempt = tier == "trusted" and not config.quarantine_trusted
        reasons = [f"{hit.name}: {hit.evidence}" for hit in hits]
        if s_out is not None and s_out >= 0.5:
            reasons.append(f"embedding outlier (S_out={s_out:.2f})")
        if perplexity["s_perp_len"] >= 0.1:
            reasons.append(f"repetitive for its length (S_perp={perplexity['s_perp']:.2f}, "
                           f"excess {perplexity['s_perp_len']:.2f})")
        reasons += notes
        if over:
            verdict = "over threshold but trusted writer: kept" if exempt else "blocked"
            reasons.insert(0, f"C={combined:.3f} >= theta={config.theta} ({verdict})")
        return GuardVerdict(
            subject=subject, s_perp=perplexity["s_perp"], s_perp_len=perplexity["s_perp_len"],
            s_pat=s_pat, s_out=s_out, combined=combined, blocked=over and not exempt,
            flagged=combined >= config.flag_theta, patterns=hits, reasons=tuple(reasons))

    def judge_many(self, subjects: Sequence[str], texts: Sequence[str],
                   outliers: Sequence[float | None], *, query: str | None = None,
                   tiers: Sequence[str] | None = None, notes: Sequence[str] = (),
                   extras: Sequence[Sequence[PatternHit]] | None = None,
                   analyses: Sequence[PassageAnalysis | None] | None = None,
                   ) -> list[GuardVerdict]:
        tiers = tiers or ["neutral"] * len(texts)
        extras = extras or [()] * len(texts)
        analyses = analyses or [None] * len(texts)
        return [self.judge(s, t, s_out=o, query=query, tier=tier, notes=notes, extra=e,
                           analysis=a)
                for s, t, o, tier, e, a in zip(subjects, texts, outliers, tiers, extras,
                                               analyses, strict=True)]

    def screen(self, ids: Sequence[str], texts: Sequence[str], *, tiers: Sequence[str],
               embeddings: np.ndarray, neighbourhood: Neighbourhood) -> list[GuardVerdict]:
        """Ring 1 at ingest (the KB's ``Screener``): each document alone, plus ``S_out``, its
        distance from what the KB stores from other writers (``stored_outlier_scores``); where
        the KB cannot say yet, ``S_out`` is None and the reasons say why. A document that
        copies another writer's stored document with a fact changed scores
        ``tampered_copy``, with the changed words as evidence."""
        outliers = stored_outlier_scores(embeddings, neighbourhood)
        scores = ([None] * len(ids) if outliers.scores is None
                  else [float(o) for o in outliers.scores])
        notes = () if outliers.note is None else (outliers.note,)
        copies = tampered_copies(list(ids), list(texts), list(tiers), embeddings,
                                 neighbourhood, self.config.tamper)
        extras = [() if copy is None else (copy.hit(),) for copy in copies]
        verdicts = self.judge_many(list(ids), list(texts), scores, tiers=list(tiers),
                                   notes=notes, extras=extras)
        return [verdict if copy is None or not copy.alignment.facts else replace(
                    verdict, contradiction=Contradiction(
                        copy.original, tuple((c.before, c.after) for c in copy.alignment.facts),
                        copy.alignment.copied))
                for verdict, copy in zip(verdicts, copies, strict=True)]
