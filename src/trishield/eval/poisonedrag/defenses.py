"""Every defense the benchmark compares, behind one call: ``ask(question) -> Answer``.

TriShield's settings run the real :class:`~trishield.pipeline.Pipeline`; PoisonedRAG's own
defenses and the peers run from :mod:`trishield.eval.baselines`. All read the same
(conditioned) knowledge base and answer with the same first panel member, so the only thing
that differs between two rows is the defense.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from trishield.errors import InputError
from trishield.pipeline import Answer, Pipeline, PipelineConfig

TRISHIELD: dict[str, tuple[str, str]] = {
    # name: (pipeline defense, Ring 3 gate mode)
    "none": ("none", "gated"),
    "ring1": ("ring1", "gated"),
    "ring2": ("ring2", "gated"),
    "ring3": ("ring3", "always"),
    "ring12": ("ring12", "gated"),
    "full-gated": ("full", "gated"),
    "full-always": ("full", "always"),
}
BASELINES = ("perplexity-filter", "paraphrase", "expansion-k50", "ragdefender-top5",
             "ragdefender-pool20", "robustrag-keyword")
DEFENSES = (*TRISHIELD, *BASELINES)
PROVENANCE_AWARE = ("ring2", "ring3", "ring12", "full-gated", "full-always")
"""The defenses whose outcome can depend on a document's tier (the rest ignore provenance)."""


@dataclass(frozen=True)
class DefenseInfo:
    name: str
    family: str  # "none", "trishield", "poisonedrag", "peer"
    uses_ring1_kb: bool


def info(name: str) -> DefenseInfo:
    if name not in DEFENSES:
        raise InputError(f"unknown defense {name!r}; choose from {', '.join(DEFENSES)}")
    if name in TRISHIELD:
        rings = TRISHIELD[name][0]
        family = "none" if name == "none" else "trishield"
        return DefenseInfo(name, family, rings in ("ring1", "ring12", "full"))
    family = "peer" if name.startswith(("ragdefender", "robustrag")) else "poisonedrag"
    return DefenseInfo(name, family, False)


def validate(names: Sequence[str]) -> tuple[str, ...]:
    for name in names:
        info(name)
    return tuple(names)


def make_asker(name: str, kb: Any, panel: Sequence[Any], config: PipelineConfig,
               baseline_config: dict[str, Any] | None = None) -> Callable[[str], Answer]:
    """``ask(question)`` for defense ``name`` over ``kb`` (a KB or a conditioned view)."""
    info(name)
    if name in TRISHIELD:
        defense, gate = TRISHIELD[name]
        config = replace(config, consensus=replace(config.consensus, gate=gate))
        pipeline = Pipeline(kb, panel, config)
        return lambda question: pipeline.ask(question, defense=defense)
    from trishield.eval.baselines import build_baseline

    baseline = build_baseline(name, kb, panel[0], backend=config.backend,
                              k=config.scorer.context,
                              config=(baseline_config or {}).get(name))
    return baseline.ask
