"""What the benchmark asks: blocks of questions, each under one condition, for some defenses.

The full matrix is sized for 2 CPU cores with the default local panel (see README): the
headline family on all 100 targets, the adaptive families on a nested seeded subset, the
poison-fraction sweep and the forged-tag rows on smaller nested subsets, and benign accuracy
on the 100 target questions without poisons plus 200 SQuAD / NQ-open questions. Knowledge
expansion (50 passages per prompt, about 100 s per answer here) runs on its own smaller subset.
Every subset is the first n of one seeded permutation, so a smaller subset is always inside a
larger one and rows can be compared on the targets they share.
"""

from __future__ import annotations

from dataclasses import dataclass

from trishield.errors import InputError
from trishield.eval.poisonedrag.conditions import SWEEP_FRACTIONS, Condition
from trishield.eval.poisonedrag.defenses import DEFENSES, PROVENANCE_AWARE, validate

ADAPTIVE_FAMILIES = ("template", "question-moved", "claim-only", "gt-swap", "split-claim",
                     "single")
BENIGN_SETS = ("benign-targets", "benign-squad", "benign-nq")
SWEEP_DEFENSES = ("none", "ring1", "ring2", "ring12", "full-gated", "ragdefender-pool20")
FORGED_DEFENSES = ("none", "ring2", "ring12", "full-gated", "full-always")


@dataclass(frozen=True)
class Sizes:
    headline: int = 100
    adaptive: int = 30
    sweep: int = 20
    forged: int = 30
    benign_targets: int = 100
    benign_squad: int = 100
    benign_nq: int = 100
    expansion: int = 20
    """Cap for ``expansion-k50`` in every block (its prompt is ten times longer)."""


QUICK_SIZES = Sizes(headline=2, adaptive=2, sweep=2, forged=2, benign_targets=2,
                    benign_squad=2, benign_nq=2, expansion=1)


@dataclass(frozen=True)
class Block:
    """``size`` questions of ``questions`` under ``condition`` (None: the clean KB)."""

    name: str
    questions: str  # "targets" or one of BENIGN_SETS
    condition: Condition | None
    defenses: tuple[str, ...]
    size: int

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "questions": self.questions,
                "condition": None if self.condition is None else self.condition.as_dict(),
                "defenses": list(self.defenses), "size": self.size}


def full_plan(defenses: tuple[str, ...] = DEFENSES, sizes: Sizes = Sizes(), *,
              quick: bool = False) -> list[Block]:
    validate(defenses)
    if not defenses:
        raise InputError("no defense selected")
    pick = lambda wanted: tuple(d for d in defenses if d in wanted)  # noqa: E731
    blocks = [Block("published", "targets", Condition("published", "published"), defenses,
                    sizes.headline)]
    families = ("gt-swap", "split-claim") if quick else ADAPTIVE_FAMILIES
    blocks += [Block(family, "targets", Condition(family, family), defenses, sizes.adaptive)
               for family in families]
    if pick(PROVENANCE_AWARE):
        blocks.append(Block("published/untrusted", "targets",
                            Condition("published/untrusted", "published", "untrusted"),
                            pick(PROVENANCE_AWARE), sizes.headline))
    fractions = (0.5,) if quick else SWEEP_FRACTIONS
    for fraction in fractions:
        for provenance in ("neutral", "trusted-clean"):
            name = f"fraction-{fraction}/{provenance}"
            if pick(SWEEP_DEFENSES):
                blocks.append(Block(name, "targets",
                                    Condition(name, "mixed", provenance, fraction),
                                    pick(SWEEP_DEFENSES), sizes.sweep))
    for provenance in ("forged", "forged-unchecked"):
        if pick(FORGED_DEFENSES):
            name = f"mixed/{provenance}"
            blocks.append(Block(name, "targets", Condition(name, "mixed", provenance),
                                pick(FORGED_DEFENSES), sizes.forged))
    benign_sizes = {"benign-targets": sizes.benign_targets, "benign-squad": sizes.benign_squad,
                    "benign-nq": sizes.benign_nq}
    blocks += [Block(name, name, None, defenses, size) for name, size in benign_sizes.items()]
    return blocks


def families_of(blocks: list[Block]) -> list[str]:
    return sorted({b.condition.family for b in blocks if b.condition is not None})
