"""The benchmark's rows: every defense it compares, built through the defense registry.

TriShield's rows are registered defenses with Ring 3's gate fixed per row (``full-gated`` and
``full-always`` are the same composition under two gate modes; the ``ring3`` ablation always
opens the gate); the baselines' rows are the registered baselines. All read the same
(conditioned) knowledge base and answer with the same first panel member, so the only thing
that differs between two rows is the defense.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trishield.defenses import DEFENSES as REGISTERED
from trishield.defenses import build_defense
from trishield.errors import InputError
from trishield.llm.base import Reader
from trishield.pipeline import Answer
from trishield.settings import PipelineConfig
from trishield.stages import Retriever

TRISHIELD: dict[str, tuple[str, str]] = {
    # row: (registered defense, Ring 3 gate mode)
    "none": ("none", "gated"),
    "ring1": ("ring1", "gated"),
    "ring2": ("ring2", "gated"),
    "ring3": ("ring3", "always"),
    "ring12": ("ring12", "gated"),
    "full-gated": ("full", "gated"),
    "full-always": ("full", "always"),
}
BASELINES: tuple[str, ...] = REGISTERED.names(suite="baseline")
DEFENSES = (*TRISHIELD, *BASELINES)
PROVENANCE_AWARE = tuple(row for row, (name, _) in TRISHIELD.items()
                         if REGISTERED.entry(name).meta["rings"] & {2, 3})
"""The defenses whose outcome can depend on a document's tier (Rings 2 and 3 read it)."""


@dataclass(frozen=True)
class DefenseInfo:
    name: str
    family: str  # "none", "trishield", "poisonedrag", "peer"
    uses_ring1_kb: bool


def info(name: str) -> DefenseInfo:
    if name not in DEFENSES:
        raise InputError(f"unknown defense {name!r}; choose from {', '.join(DEFENSES)}")
    if name in TRISHIELD:
        rings = REGISTERED.entry(TRISHIELD[name][0]).meta["rings"]
        family = "none" if name == "none" else "trishield"
        return DefenseInfo(name, family, 1 in rings)
    return DefenseInfo(name, REGISTERED.entry(name).meta["family"], False)


def validate(names: Sequence[str]) -> tuple[str, ...]:
    for name in names:
        info(name)
    return tuple(names)


def make_asker(name: str, retriever: Retriever, panel: Sequence[Reader],
               config: PipelineConfig,
               baseline_config: dict[str, Any] | None = None, *,
               second_reader: Reader | None = None) -> Callable[[str], Answer]:
    """``ask(question)`` for the row ``name`` over ``retriever`` (a KB or a conditioned
    view); baselines answer with the first panel member, TriShield's Ring 3 may ask
    ``second_reader`` where the panel's answer is in no passage."""
    info(name)
    if name in TRISHIELD:
        defense, gate = TRISHIELD[name]
        return build_defense(defense, retriever, panel, config=config,
                             options={"gate": gate}, second_reader=second_reader).ask
    return build_defense(name, retriever, panel[:1], config=config,
                         options=(baseline_config or {}).get(name)).ask
