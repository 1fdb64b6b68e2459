"""What the benchmark asks: blocks of questions, each under one condition, for some defenses.

The full matrix is sized for 2 CPU cores with the default local panel (about 8 s per
Qwen2.5-0.5B answer over five Wikipedia passages, several hours in all): the headline family on
all 100 targets, every adaptive family on a nested seeded subset of 10, the untrusted-writer
rows on 20, the poison-fraction sweep on 5 per fraction and provenance setting, the forged tags
on 10, and benign accuracy on the 100 target questions without poisons plus 100 SQuAD dev and
100 NQ-open questions. The defenses that cost several LLM calls per question (RobustRAG's
isolated answers, paraphrasing, knowledge expansion's 50-passage prompt of ~5,000 tokens)
answer a capped subset of every attack family and of the benign target questions, so each
family has a row for each defense. Every subset is the first n of one seeded permutation, so a
smaller subset is always inside a larger one and rows can be compared on the targets they share.

Blocks run in the order of the headline table's importance (published poisons, the same
questions without poisons, the adaptive families, then SQuAD/NQ, provenance, sweep and forged
tags), so an interrupted run has its most important rows first."""

from __future__ import annotations

from dataclasses import dataclass

from trishield.errors import InputError
from trishield.eval.poisonedrag.conditions import SWEEP_FRACTIONS, Condition
from trishield.eval.poisonedrag.defenses import DEFENSES, PROVENANCE_AWARE, validate

ADAPTIVE_FAMILIES = ("template", "question-moved", "claim-only", "gt-swap", "split-claim",
                     "single")
BENIGN_SETS = ("benign-targets", "benign-squad", "benign-nq")
SWEEP_DEFENSES = ("none", "ring2", "ring12", "full-gated", "ragdefender-pool20")
FORGED_DEFENSES = ("none", "ring2", "ring12", "full-gated", "full-always")


COSTLY = ("expansion-k50", "robustrag-keyword", "paraphrase")
"""Defenses that cost several LLM calls (or a 50-passage prompt) per question: they run on a
capped, nested subset of each attack family and of the benign target questions."""


@dataclass(frozen=True)
class Sizes:
    headline: int = 100
    adaptive: int = 10
    untrusted: int = 20
    sweep: int = 5
    forged: int = 10
    benign_targets: int = 100
    benign_squad: int = 100
    benign_nq: int = 100
    caps: tuple[tuple[str, int], ...] = (("expansion-k50", 5), ("robustrag-keyword", 10),
                                         ("paraphrase", 20))


QUICK_SIZES = Sizes(headline=2, adaptive=1, untrusted=1, sweep=1, forged=1, benign_targets=2,
                    benign_squad=1, benign_nq=1,
                    caps=(("expansion-k50", 1), ("robustrag-keyword", 1), ("paraphrase", 1)))
QUICK_DEFENSES = ("none", "ring1", "ring2", "full-gated", "perplexity-filter",
                  "ragdefender-pool20")
"""``--quick`` without ``--defense``: one of each kind, and none of the defenses that cost
several LLM calls per question, so the smoke run stays under five minutes on 2 cores."""


@dataclass(frozen=True)
class Block:
    """``size`` questions of ``questions`` under ``condition`` (None: the clean KB)."""

    name: str
    questions: str  # "targets" or one of BENIGN_SETS
    condition: Condition | None
    defenses: tuple[str, ...]
    size: int
    caps: tuple[tuple[str, int], ...] = ()

    def limit(self, defense: str) -> int:
        """How many of the block's questions ``defense`` answers (the first n: nested)."""
        return min(self.size, dict(self.caps).get(defense, self.size))

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "questions": self.questions,
                "condition": None if self.condition is None else self.condition.as_dict(),
                "defenses": list(self.defenses), "size": self.size,
                "answered_per_defense": {d: self.limit(d) for d in self.defenses}}


def full_plan(defenses: tuple[str, ...] = DEFENSES, sizes: Sizes = Sizes(), *,
              quick: bool = False) -> list[Block]:
    validate(defenses)
    if not defenses:
        raise InputError("no defense selected")

    def pick(wanted: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(d for d in defenses if d in wanted)

    cheap = tuple(d for d in defenses if d not in COSTLY)

    def block(name: str, questions: str, condition: Condition | None, chosen: tuple[str, ...],
              size: int) -> Block:
        return Block(name, questions, condition, chosen, size, sizes.caps)

    blocks = [block("published", "targets", Condition("published", "published"), defenses,
                    sizes.headline),
              block("benign-targets", "benign-targets", None, defenses, sizes.benign_targets)]
    families = ("gt-swap",) if quick else ADAPTIVE_FAMILIES
    blocks += [block(family, "targets", Condition(family, family), defenses, sizes.adaptive)
               for family in families]
    blocks.append(block("benign-squad", "benign-squad", None, cheap, sizes.benign_squad))
    if not quick:
        blocks.append(block("benign-nq", "benign-nq", None, cheap, sizes.benign_nq))
    if pick(PROVENANCE_AWARE) and not quick:
        blocks.append(block("published/untrusted", "targets",
                            Condition("published/untrusted", "published", "untrusted"),
                            pick(PROVENANCE_AWARE), sizes.untrusted))
    fractions = (0.5,) if quick else SWEEP_FRACTIONS
    for fraction in fractions:
        for provenance in ("trusted-clean",) if quick else ("neutral", "trusted-clean"):
            name = f"fraction-{fraction}/{provenance}"
            if pick(SWEEP_DEFENSES):
                blocks.append(block(name, "targets",
                                    Condition(name, "mixed", provenance, fraction),
                                    pick(SWEEP_DEFENSES), sizes.sweep))
    for provenance in ("forged",) if quick else ("forged", "forged-unchecked"):
        if pick(FORGED_DEFENSES):
            name = f"mixed/{provenance}"
            blocks.append(block(name, "targets", Condition(name, "mixed", provenance),
                                pick(FORGED_DEFENSES), sizes.forged))
    return [b for b in blocks if b.defenses]


def families_of(blocks: list[Block]) -> list[str]:
    return sorted({b.condition.family for b in blocks if b.condition is not None})
