"""Ring 2, the Retrieval Scorer: re-ranks a candidate pool by trust, not by relevance alone.

``T = w_prov * S_ev + (1 - w_prov) * s_rel``. Relevance is the signal an attacker controls
best (a poison that repeats the question is maximally relevant), so it is down-weighted; the
less a source is trusted, the larger ``w_prov`` and the more the passage needs evidence.
``S_ev`` is *independent* evidence (:mod:`trishield.rings.evidence`): the weight of the
independent sources that give the same answer as the passage, normalised over the pool. It
replaces the paper's ``S_con`` (word overlap with the rest of the pool), which five
paraphrases of one lie maximise (docs/design/ring3-consensus.md, "Evidence"). The context then
takes passages
of at most ``per_source`` documents from each near-duplicate cluster, so it holds distinct
evidence.
Tiers come from the writer, never from the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator
from pydantic.dataclasses import dataclass as config_dataclass

from trishield.kb.indexes.retrieval import Candidate
from trishield.rings.config_types import CONFIG, TIERS, AtLeastOne, Backend, Tier, Unit
from trishield.rings.conflicts import Conflict, find_conflicts
from trishield.rings.evidence import Evidence, EvidenceConfig
from trishield.text import QUESTION_PHRASING, content_words


@config_dataclass(frozen=True, config=CONFIG)
class ScorerConfig(EvidenceConfig):
    """Ring 2 settings: pool size K, context size k, provenance weights per tier, and how
    evidence is weighed (the inherited :class:`EvidenceConfig` fields)."""

    pool: AtLeastOne = 20
    context: Annotated[AtLeastOne, Field(validate_default=True)] = 5
    """At most ``pool``: the context is chosen from the pool (checked even when left at its
    default, so ``pool = 3`` alone is refused too)."""
    w_prov: dict[Tier, Unit] = field(default_factory=lambda: {
        "trusted": 0.2, "neutral": 0.5, "untrusted": 0.8})
    """One weight for every tier: a tier without one would have no defined trust."""
    detect_conflicts: bool = True
    min_relevance: dict[Backend, float] = field(default_factory=dict)
    """Per retrieval backend: refuse when the best surviving candidate's raw score is below
    this floor ("nothing relevant was found"). Backends score on different scales (cosine,
    BM25, reciprocal-rank sums), so each floor is calibrated on its own backend; a backend
    without a floor has none."""
    refuse_unknown_terms: bool = False
    """Closed-domain mode: refuse when the question names something the KB never mentions
    (a content word in no chunk, question phrasing aside: "shipping to *India*" against
    policies that cover the US and Canada). Off by default: on an open-domain KB a misspelt
    name ("superbowl") would be refused too (4-6% of real NQ-open and SQuAD questions against
    wiki5k)."""

    @field_validator("context")
    @classmethod
    def _within_pool(cls, context: int, info: ValidationInfo) -> int:
        pool = info.data.get("pool")
        if pool is not None and context > pool:
            raise ValueError(f"must not exceed pool ({pool}), got {context}")
        return context

    @field_validator("w_prov")
    @classmethod
    def _every_tier(cls, weights: dict[str, float]) -> dict[str, float]:
        if set(weights) != set(TIERS):
            raise ValueError(f"must be a table with keys {', '.join(sorted(TIERS))}")
        return weights


@dataclass(frozen=True)
class ScoredPassage:
    """A candidate with Ring 2's scores and where it ended up."""

    candidate: Candidate
    s_rel: float
    s_con: float
    s_con_raw: float
    w_prov: float
    trust: float
    trust_rank: int = 0
    in_context: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "chunk_id": self.candidate.chunk_id,
            "doc_id": self.candidate.doc_id,
            "tier": self.candidate.chunk.tier,
            "writer": self.candidate.chunk.writer,
            "provenance": self.candidate.chunk.provenance,
            "retrieval_rank": self.candidate.rank,
            "retrieval_score": round(self.candidate.score, 6),
            "s_rel": round(self.s_rel, 4),
            "s_con": round(self.s_con, 4),
            "s_con_raw": round(self.s_con_raw, 4),
            "w_prov": self.w_prov,
            "trust": round(self.trust, 4),
            "trust_rank": self.trust_rank,
            "in_context": self.in_context,
        }


def min_max(values: Sequence[float]) -> list[float]:
    """Min-max normalise within the set; a set of equal values is all 1.0 (nothing to rank)."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return [1.0 for _ in values]
    return [(value - low) / (high - low) for value in values]


def corroboration(texts: Sequence[str]) -> list[float]:
    """The paper's raw ``S_con``: ``|B ∩ B_i| / |B \\ B_i|`` with ``B`` the other passages'
    content words. Kept for comparison only (``benchmarks``): Ring 2 ranks by evidence."""
    bags = [set(content_words(text)) for text in texts]
    raw = []
    for i, own in enumerate(bags):
        others = set().union(*(bag for j, bag in enumerate(bags) if j != i))
        outside = others - own
        raw.append(len(others & own) / len(outside) if outside else float(len(others & own)))
    return raw


@dataclass(frozen=True)
class ScorerResult:
    ranked: list[ScoredPassage]
    conflicts: list[Conflict]
    evidence: Evidence | None = None

    @property
    def context(self) -> list[ScoredPassage]:
        return [p for p in self.ranked if p.in_context]


def evidence_weights(evidence: Evidence) -> list[float]:
    """Raw ``S_ev`` per passage: the independent weight of the claim it gives (passages that
    give no answer to the question weigh nothing). Claims group passages that share a
    candidate answer; each claim's sources are weighed against every other claim's."""
    answering = [i for i, claim in enumerate(evidence.claims) if claim.answers]
    claims = evidence.claim_groups(answering)
    weights = [0.0] * len(evidence.items)
    for members in claims:
        others = [i for i in answering if i not in members]
        weight = sum(source.weight for source in evidence.sources(members, others))
        for i in members:
            weights[i] = weight
    return weights


class RetrievalScorer:
    def __init__(self, config: ScorerConfig | None = None):
        self.config = config or ScorerConfig()

    def weight(self, tier: str) -> float:
        return self.config.w_prov.get(tier, self.config.w_prov["untrusted"])

    def _diverse(self, order: list[int], candidates: Sequence[Candidate],
                 evidence: Evidence | None, k: int) -> set[int]:
        """The context: in trust order, passages of at most ``per_source`` documents per
        near-duplicate cluster, and at most ``per_writer`` passages per writer while other
        writers' passages remain (then the rest fills by trust): one writer cannot fill the
        context when the pool holds anyone else's evidence.

        The cluster cap counts documents, not passages: two passages of one document are
        two parts of it, never a copy of one another, though sections of one text on one
        topic embed as near-duplicates (the demo leave policy's sick-leave passage and its
        leave-requests passage: cosine 0.84), and capping passages dropped the part that
        answered. Copies made to flood the context are separate documents, and one
        document's parts are still held to ``per_writer``."""
        cluster_of: dict[int, int] = {}
        if evidence is not None:
            for number, cluster in enumerate(evidence.near_duplicate_clusters()):
                cluster_of.update({member: number for member in cluster})
        per_cluster: dict[int, set[str]] = {}
        per_writer: dict[str, int] = {}
        chosen: set[int] = set()
        for writer_cap in (self.config.per_writer, len(candidates)):
            for i in order:
                if len(chosen) == k:
                    break
                chunk = candidates[i].chunk
                documents = per_cluster.setdefault(cluster_of.get(i, -1 - i), set())
                if (i not in chosen
                        and (chunk.doc_id in documents
                             or len(documents) < self.config.per_source)
                        and per_writer.get(chunk.writer, 0) < writer_cap):
                    chosen.add(i)
                    documents.add(chunk.doc_id)
                    per_writer[chunk.writer] = per_writer.get(chunk.writer, 0) + 1
        return chosen

    def score(self, candidates: Sequence[Candidate], *, context: int | None = None,
              evidence: Evidence | None = None) -> ScorerResult:
        """Trust-rank ``candidates``; the top ``context`` (of at most ``per_source`` documents
        from each near-duplicate cluster) form the context sent to Ring 3. Without
        ``evidence`` (no question known) every passage has ``S_ev`` 0 and relevance alone
        ranks."""
        k = context or self.config.context
        if not candidates:
            return ScorerResult([], [], evidence)
        relevance = min_max([c.score for c in candidates])
        raw = evidence_weights(evidence) if evidence is not None else [0.0] * len(candidates)
        top = max(raw)
        support = [value / top if top > 0 else 0.0 for value in raw]
        provenance = [self.weight(c.chunk.tier) for c in candidates]
        trust = [w * s_ev + (1 - w) * s_rel
                 for w, s_ev, s_rel in zip(provenance, support, relevance, strict=True)]
        order = sorted(range(len(candidates)),
                       key=lambda i: (-trust[i], candidates[i].rank))
        chosen = self._diverse(order, candidates, evidence, k)
        # each passage built once, with its place already known
        ranked = [ScoredPassage(candidates[i], relevance[i], support[i], raw[i],
                                provenance[i], trust[i], position + 1, i in chosen)
                  for position, i in enumerate(order)]
        conflicts: list[Conflict] = []
        if self.config.detect_conflicts:
            conflicts = find_conflicts(
                [(p.candidate.chunk_id, p.candidate.doc_id, p.candidate.chunk.text)
                 for p in ranked],
                None if evidence is None else [evidence.items[i].numbers for i in order])
        return ScorerResult(ranked, conflicts, evidence)


def out_of_scope_terms(unknown_terms: Sequence[str]) -> list[str]:
    """Closed-domain mode: the terms of a question the KB never mentions, question phrasing
    ("how", "long", "take") aside. One definition for Ring 2 and the evaluation's split."""
    return [term for term in unknown_terms if term not in QUESTION_PHRASING]
