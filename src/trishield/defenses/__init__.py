"""Every named defense is a composition of stages, registered here by name.

``build_defense(name, source, panel, config)`` returns a :class:`~trishield.pipeline.Pipeline`
whose ``ask(question)`` answers with a trace. TriShield's settings are registered in
:mod:`trishield.defenses.trishield`; the baselines the benchmark compares (PoisonedRAG's
defenses, RAGDefender, RobustRAG) register themselves from :mod:`trishield.eval.baselines`,
loaded on first use. A third-party defense registers a builder with
``@DEFENSES.register("name", suite="...", options=frozenset({...}))`` in a module named by an
entry point of the group ``trishield.defenses``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trishield.defenses.retrievers import KBRetriever
from trishield.errors import InputError
from trishield.kb import KnowledgeBase
from trishield.llm.base import Reader
from trishield.pipeline import Pipeline
from trishield.registry import Registry
from trishield.settings import PipelineConfig
from trishield.stages import Retriever


@dataclass(frozen=True)
class DefenseSpec:
    """What a defense builder is given: where candidates come from, who reads, the settings
    and the defense's own options (checked against the names it registered)."""

    retriever: Retriever
    panel: Sequence[Reader]
    config: PipelineConfig = field(default_factory=PipelineConfig)
    options: Mapping[str, Any] = field(default_factory=dict)
    second_reader: Reader | None = None
    """Ring 3's second reader, asked only when the panel's answer is in no passage."""


DefenseBuilder = Callable[[str, DefenseSpec], Pipeline]
DEFENSES: Registry[DefenseBuilder] = Registry(
    "defense", group="trishield.defenses",
    builtin_modules=("trishield.defenses.trishield", "trishield.eval.baselines"))


def as_retriever(source: KnowledgeBase | Retriever, backend: str) -> Retriever:
    """A knowledge base searched with ``backend``, or a retriever used as it is."""
    return KBRetriever(source, backend) if isinstance(source, KnowledgeBase) else source


def build_defense(name: str, source: KnowledgeBase | Retriever, panel: Sequence[Reader], *,
                  config: PipelineConfig | None = None,
                  options: Mapping[str, Any] | None = None,
                  second_reader: Reader | None = None) -> Pipeline:
    """The defense called ``name`` over ``source`` (a KB, searched with ``config.backend``,
    or any :class:`~trishield.stages.Retriever`), answering with ``panel`` (and, in Ring 3,
    ``second_reader`` where the panel's answer is in no passage)."""
    entry = DEFENSES.entry(name)
    if not panel:
        raise InputError("the pipeline needs at least one reader")
    config = config or PipelineConfig()
    options = dict(options or {})
    allowed = entry.meta.get("options", frozenset())
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InputError(f"unknown config key(s) for {name}: {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(allowed)) or 'none'}")
    spec = DefenseSpec(as_retriever(source, config.backend), list(panel), config, options,
                       second_reader)
    return entry.value(name, spec)


__all__ = ["DEFENSES", "DefenseBuilder", "DefenseSpec", "as_retriever", "build_defense"]
