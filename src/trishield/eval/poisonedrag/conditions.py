"""Attack conditions: which poisons are in the KB, who the KB says wrote them, and (for the
poison-fraction sweep) how much of the context the attacker controls.

Provenance settings are separate rows, never mixed (docs/design/evaluation.md, "Evaluation
definitions"):

* ``neutral``         the paper's setting: every document neutral, so Ring 2 gets no
                      provenance signal. The headline rows, comparable with peers;
* ``untrusted``       clean passages neutral, poisons from an untrusted writer (as stored);
* ``trusted-clean``   clean passages carry a trusted publisher's signature, poisons untrusted;
* ``forged``          clean passages signed; every poison carries a *forged* trusted tag
                      (a signature by a key that is not the registered publisher's). The tag is
                      decided by the service's own `decide_provenance` (Ed25519); a failed
                      check makes the poison untrusted;
* ``forged-unchecked`` the counterfactual: the same forged tags believed without a check, which
                      shows what the signature verification is worth.

Writer settings say who ingested the poisons (:mod:`.knowledge_bases` builds one KB per
family and writer setting):

* ``attacker``  one untrusted writer ingests every poison of the family in one batch; a
                provenance setting then re-labels tiers on the *retrieved candidates* only, so
                one KB per family serves every provenance setting and the retrieval itself is
                identical across those rows;
* ``sybil``     every poison is ingested by its own neutral writer in its own batch, and every
                document is neutral: neither provenance nor writer identity tells the defense
                anything, at ingest (Ring 1) or at retrieval. Only with ``neutral`` provenance
                (a sybil that is also untrusted would be a different condition).
* ``sleeper``   five neutral writers that first each store benign documents (an established
                track record), then write poison *i* of every target as writer *i*, each in
                its own batch: the sybil attack against the evidence design's track record.
                Not in the matrix's plan; the evidence probe runs it. Neutral provenance only.
* ``patient``   the sleepers' campaign over simulated days (the KB's clock): records a day
                after the base, sleeper *i*'s posts a week and *i* days later, so no two
                post within a day (no burst) and each has a week's tenure. Probe only.

Every setting writes a year after the base KB (the KB's clock, :mod:`.schedules`), and the
timed settings test time itself (``trishield eval poisonedrag --time-conditions``):

* ``attacker-first``       the targets' true passages are taken out of the base and written
                           again by a new neutral writer ten minutes *after* the poisons,
                           each poison by its own neutral writer;
* ``attacker-first-week``  the same, the truth a week after the poisons;
* ``farming``              each poison's own writer first stores 200 filler documents;
* ``insider``              one writer with a year of tenure and 1,000 documents posts every
                           poison; with ``trusted-clean`` provenance the clean passages are
                           signed (the defense there is a trusted source);
* ``newcomer-truth``       no poisons: the targets' true passages are taken out of the base
                           and written again by a new neutral writer, a year after the base
                           (is a new writer's fact answered as often as the undefended
                           pipeline answers it?).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trishield.defenses.retrievers import KBRetriever
from trishield.errors import InputError
from trishield.eval.poisonedrag.attacks import is_poison, poison_target
from trishield.eval.poisonedrag.provenance import Provenance
from trishield.kb import KnowledgeBase
from trishield.kb.indexes.retrieval import Candidate

PROVENANCE_SETTINGS = ("neutral", "untrusted", "trusted-clean", "forged", "forged-unchecked")
WRITER_SETTINGS = ("attacker", "sybil", "sleeper", "patient", "attacker-first",
                   "attacker-first-week", "farming", "insider", "newcomer-truth")
SWEEP_FRACTIONS = (0.2, 0.4, 0.5, 0.6, 0.8)
SWEEP_SEARCH_DEPTH = 400
"""How deep the sweep looks for a target's poisons in the poisoned KB (dense search is cheap)."""


@dataclass(frozen=True)
class Condition:
    """One row group of the report: a family's poisons under one provenance setting."""

    name: str
    family: str
    provenance: str = "neutral"
    fraction: float | None = None
    writers: str = "attacker"

    def __post_init__(self) -> None:
        if self.provenance not in PROVENANCE_SETTINGS:
            raise InputError(f"unknown provenance setting {self.provenance!r}; choose from "
                             f"{', '.join(PROVENANCE_SETTINGS)}")
        if self.fraction is not None and not 0 < self.fraction < 1:
            raise InputError(f"poison fraction {self.fraction} is not in (0, 1)")
        if self.writers not in WRITER_SETTINGS:
            raise InputError(f"unknown writer setting {self.writers!r}; choose from "
                             f"{', '.join(WRITER_SETTINGS)}")
        signed_truth = self.writers == "insider" and self.provenance == "trusted-clean"
        if self.writers != "attacker" and ((self.provenance != "neutral" and not signed_truth)
                                           or self.fraction is not None):
            raise InputError(f"condition {self.name!r}: the {self.writers} writer setting is "
                             "defined for neutral provenance without a poison fraction only")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "provenance": self.provenance,
                "fraction": self.fraction, "writers": self.writers}


def poisons_in_context(fraction: float, k: int, target_number: int) -> int:
    """How many of the k context slots the attacker gets: ``fraction * k``, and where that is
    not a whole number (0.5 of 5), floor and ceiling alternate by target so the mean is exact."""
    exact = fraction * k
    low = int(exact)
    if exact == low:
        return low
    return low + (target_number % 2)


class ConditionedKB:
    """A knowledge base seen through one condition: same retrieval, re-labelled tiers, and
    for the sweep a fixed number of the target's poisons in the top-k.

    A :class:`~trishield.stages.Retriever` over the KB searched with ``backend``, so every
    defense, TriShield's and the baselines', reads exactly the same candidates.
    """

    def __init__(self, kb: KnowledgeBase, condition: Condition, provenance: Provenance, *,
                 backend: str = "dense", target: str | None = None, target_number: int = 0,
                 k: int = 5):
        self._kb = kb
        self._plain = KBRetriever(kb, backend)
        self.name = backend
        self.embedding_model = self._plain.embedding_model
        self.condition = condition
        self.provenance = provenance
        self.target = target
        self.target_number = target_number
        self.k = k
        self.realised_poisons: int | None = None

    def retrieve(self, query: str, k: int) -> list[Candidate]:
        if self.condition.fraction is None:
            found = self._kb.search(query, backend=self.name, k=k)
        else:
            found = self._composed(query, self.name, k)
        return [self._relabel(c) for c in found]

    def embeddings(self, candidates: Sequence[Candidate]) -> np.ndarray | None:
        return self._plain.embeddings(candidates)

    def unknown_terms(self, query: str) -> list[str]:
        return self._plain.unknown_terms(query)

    def writer_records(self) -> tuple[dict[str, int], dict[str, float]]:
        return self._plain.writer_records()

    def _composed(self, query: str, backend: str, k: int) -> list[Candidate]:
        """Top-k holds exactly n of this target's poisons and k-n clean passages (each in
        score order); the pool beyond the top-k is clean. Other targets' poisons are left out."""
        assert self.condition.fraction is not None
        deep = self._kb.search(query, backend=backend, k=max(SWEEP_SEARCH_DEPTH, k))
        own = [c for c in deep if is_poison(c.doc_id) and poison_target(c.doc_id) == self.target]
        clean = [c for c in deep if not is_poison(c.doc_id)]
        wanted = poisons_in_context(self.condition.fraction, self.k, self.target_number)
        top = sorted(own[:wanted] + clean[:self.k - min(wanted, len(own))],
                     key=lambda c: -c.score)
        self.realised_poisons = min(wanted, len(own))
        rest = clean[self.k - self.realised_poisons:]
        ranked = (top + rest)[:k]
        return [replace(c, rank=rank) for rank, c in enumerate(ranked, start=1)]

    def _content_hash(self, doc_id: str) -> str:
        """Signatures cover the whole document's content hash, not the retrieved chunk."""
        stored = self._kb.content_hash_of(doc_id)
        if stored is None:
            raise InputError(f"retrieved document {doc_id!r} is not in the KB's documents")
        return stored

    def _relabel(self, candidate: Candidate) -> Candidate:
        tier = self.provenance.tier_of(candidate.chunk.doc_id,
                                       self._content_hash(candidate.chunk.doc_id),
                                       stored=candidate.chunk.tier,
                                       setting=self.condition.provenance)
        if tier == candidate.chunk.tier:
            return candidate
        return replace(candidate, chunk=replace(candidate.chunk, tier=tier))


def standard_conditions(families: Sequence[str]) -> list[Condition]:
    return [Condition(family, family) for family in families]
