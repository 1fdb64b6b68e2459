"""What the benchmark asks: blocks of questions, each under one condition, for some defenses.

The full matrix is sized for 2 CPU cores with the default local panel (about 8 s per
Qwen2.5-0.5B answer over five Wikipedia passages): the published poisons on all 100 targets
under the all-neutral and the sybil condition; every adaptive family (template,
question-moved, claim-only, gt-swap, split-claim, single, diverse, refute) under both
conditions on a nested seeded subset of 50 targets (gt-swap on all 100, so every target it
can attack is there) for the core defenses (``CORE_DEFENSES``: none, ring1, ring12, full-gated,
ragdefender-pool20), every other selected defense on the first 10 of them; the
untrusted-writer rows on 20, the poison-fraction sweep on 5 per fraction and provenance
setting, the forged tags on 10, and benign accuracy on the 100 target questions without
poisons plus 100 SQuAD dev and 100 NQ-open questions. The defenses that cost several LLM calls
per question (RobustRAG's isolated answers, paraphrasing, knowledge expansion's 50-passage
prompt of ~5,000 tokens) answer a smaller capped subset. Every subset is the first n of one
seeded permutation, so a smaller subset is always inside a larger one and rows can be compared
on the targets they share. The matrix takes more than one sitting: the run is resumable.

Blocks run in the order of the headline table's importance (published poisons, the same
questions without poisons, published under sybil, then each adaptive family under the
all-neutral and then the sybil condition, then SQuAD/NQ, provenance, sweep and forged tags),
so an interrupted run has its most important rows first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trishield.errors import InputError
from trishield.eval.poisonedrag.conditions import SWEEP_FRACTIONS, Condition
from trishield.eval.poisonedrag.defenses import DEFENSES, PROVENANCE_AWARE, validate

ADAPTIVE_FAMILIES = ("template", "question-moved", "claim-only", "gt-swap", "split-claim",
                     "single", "diverse", "refute")
ALL_TARGET_FAMILIES = ("gt-swap",)
"""Families that can attack only some targets: their blocks ask every target, so every
applicable one is in the row (the others are listed as not applicable)."""
CORE_DEFENSES = ("none", "ring1", "ring12", "full-gated", "ragdefender-pool20")
"""The defenses every adaptive block answers at full size (issue 16); the other selected
defenses answer the first ``Sizes.adaptive_others`` questions of the block."""
CONDITIONS = ("neutral", "sybil")
"""The two headline conditions: all-neutral (the paper's setting) and sybil."""
BENIGN_SETS = ("benign-targets", "benign-squad", "benign-nq")
SWEEP_DEFENSES = ("none", "ring2", "ring12", "full-gated", "ragdefender-pool20")
FORGED_DEFENSES = ("none", "ring2", "ring12", "full-gated", "full-always", "ragdefender-pool20")
UNTRUSTED_DEFENSES = ("none", "ring2", "ring3", "ring12", "full-gated", "full-always",
                      "ragdefender-pool20")
"""The provenance-aware rows plus the undefended and RAGDefender rows side by side (those two
read no tier, so their cells repeat the all-neutral ones on the same targets, from cache)."""


COSTLY = ("expansion-k50", "robustrag-keyword", "paraphrase")
"""Defenses that cost several LLM calls (or a 50-passage prompt) per question: they run on a
capped, nested subset of each attack family and of the benign target questions."""


@dataclass(frozen=True)
class Sizes:
    headline: int = 100
    adaptive: int = 50
    adaptive_others: int = 10
    untrusted: int = 20
    sweep: int = 5
    forged: int = 10
    benign_targets: int = 100
    benign_squad: int = 100
    benign_nq: int = 100
    caps: tuple[tuple[str, int], ...] = (("expansion-k50", 5), ("robustrag-keyword", 10),
                                         ("paraphrase", 20))


QUICK_SIZES = Sizes(headline=2, adaptive=1, adaptive_others=1, untrusted=1, sweep=1,
                    forged=1, benign_targets=2, benign_squad=1, benign_nq=1,
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


def condition_for(family: str, setting: str) -> Condition:
    """The block condition of ``family`` under a headline condition (``neutral``: named by the
    family alone, as the report's columns are; ``sybil``: ``<family>/sybil``)."""
    if setting == "neutral":
        return Condition(family, family)
    if setting == "sybil":
        return Condition(f"{family}/sybil", family, writers="sybil")
    raise InputError(f"unknown headline condition {setting!r}; choose from "
                     f"{', '.join(CONDITIONS)}")


def _merged_caps(*groups: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Caps from several sources; where two cap one defense, the smaller wins."""
    merged: dict[str, int] = {}
    for group in groups:
        for defense, cap in group:
            merged[defense] = min(cap, merged.get(defense, cap))
    return tuple(sorted(merged.items()))


def full_plan(defenses: tuple[str, ...] = DEFENSES, sizes: Sizes = Sizes(), *,
              quick: bool = False) -> list[Block]:
    validate(defenses)
    if not defenses:
        raise InputError("no defense selected")

    def pick(wanted: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(d for d in defenses if d in wanted)

    cheap = tuple(d for d in defenses if d not in COSTLY)

    def block(name: str, questions: str, condition: Condition | None, chosen: tuple[str, ...],
              size: int, extra_caps: tuple[tuple[str, int], ...] = ()) -> Block:
        return Block(name, questions, condition, chosen, size,
                     _merged_caps(sizes.caps, extra_caps))

    # non-core defenses answer the first adaptive_others questions of a large block
    others = tuple((d, sizes.adaptive_others) for d in defenses if d not in CORE_DEFENSES)
    blocks = [block("published", "targets", condition_for("published", "neutral"), defenses,
                    sizes.headline),
              block("benign-targets", "benign-targets", None, defenses, sizes.benign_targets)]
    if not quick:
        blocks.append(block("published/sybil", "targets", condition_for("published", "sybil"),
                            defenses, sizes.headline, others))
    adaptive = (("gt-swap", "neutral"), ("diverse", "sybil")) if quick else tuple(
        (family, setting) for family in ADAPTIVE_FAMILIES for setting in CONDITIONS)
    for family, setting in adaptive:
        condition = condition_for(family, setting)
        size = sizes.headline if family in ALL_TARGET_FAMILIES else sizes.adaptive
        blocks.append(block(condition.name, "targets", condition, defenses, size, others))
    blocks.append(block("benign-squad", "benign-squad", None, cheap, sizes.benign_squad))
    if not quick:
        blocks.append(block("benign-nq", "benign-nq", None, cheap, sizes.benign_nq))
    if pick(PROVENANCE_AWARE) and not quick:
        blocks.append(block("published/untrusted", "targets",
                            Condition("published/untrusted", "published", "untrusted"),
                            pick(UNTRUSTED_DEFENSES), sizes.untrusted))
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


TIME_DEFENSES = ("none", "ring12", "full-gated", "ragdefender-pool20")
"""The defenses the timed conditions are asked of (issue 50)."""
TIME_FAMILY = "diverse"
"""The poisons of the timed conditions: five styles by five writers, not near-duplicates
(the held-out run that showed order deciding used four genres by four writers)."""
SILENCING_FAMILY = "refute"
"""Silencing: poisons that name the right answer as the error ("Many people believe the
answer is X, but ..."): they contradict a truth that stood a year, to make it refused."""


def time_conditions() -> list[Condition]:
    """The timed conditions (docs/benchmarks.md, "Time stood"): who writes first and when,
    volume bought in an afternoon, an insider with a year of tenure (and the same with the
    truth signed), silencing, and the control without poisons: the truth by a new writer."""
    return [Condition("attacker-first/minutes", TIME_FAMILY, writers="attacker-first"),
            Condition("attacker-first/week", TIME_FAMILY, writers="attacker-first-week"),
            Condition("farming", TIME_FAMILY, writers="farming"),
            Condition("insider", TIME_FAMILY, writers="insider"),
            Condition("insider/trusted-truth", TIME_FAMILY, "trusted-clean", writers="insider"),
            Condition("silencing", SILENCING_FAMILY, writers="sybil"),
            Condition("newcomer-truth", TIME_FAMILY, writers="newcomer-truth")]


def time_plan(defenses: tuple[str, ...] = TIME_DEFENSES, sizes: Sizes = Sizes(),
              only: Sequence[str] | None = None) -> list[Block]:
    """``--time-conditions``: the clean target questions (the floor each block's clean
    accuracy is read against) and every timed condition on ``sizes.adaptive`` targets, or
    the conditions named in ``only`` (``--time-block``: farming's KBs alone embed 50,000
    filler paragraphs, so a run may leave it for another day)."""
    validate(defenses)
    if not defenses:
        raise InputError("no defense selected")
    conditions = time_conditions()
    if only is not None:
        known = [c.name for c in conditions]
        unknown = sorted(set(only) - set(known))
        if unknown or not only:
            raise InputError(f"unknown timed condition {', '.join(unknown) or '(none given)'};"
                             f" choose from {', '.join(known)}")
        conditions = [c for c in conditions if c.name in only]
    blocks = [Block("benign-targets", "benign-targets", None, defenses, sizes.adaptive,
                    sizes.caps)]
    for condition in conditions:
        chosen = (defenses if condition.provenance == "neutral"
                  else tuple(d for d in defenses if d in PROVENANCE_AWARE or d == "none"))
        blocks.append(Block(condition.name, "targets", condition, chosen, sizes.adaptive,
                            sizes.caps))
    return [b for b in blocks if b.defenses]


def families_of(blocks: list[Block]) -> list[tuple[str, str]]:
    """The (family, writer setting) pairs the blocks need a poisoned KB for."""
    return sorted({(b.condition.family, b.condition.writers) for b in blocks
                   if b.condition is not None})
