"""The defense configuration file (TOML), validated strictly.

Every section and key is checked: an unknown key, a wrong type or a value out of range is an
error that names it, because a typo in a security tool's configuration must not silently fall
back to a default. ``trishield config show`` prints the effective configuration.

Example (every key optional)::

    [retrieval]
    backend = "hybrid"        # dense | bm25 | hybrid
    pool = 20                 # K candidates
    context = 5               # k passages sent to the readers
    [ring1]
    theta = 0.19
    [ring2]
    w_prov = { trusted = 0.2, neutral = 0.5, untrusted = 0.8 }
    [ring3]
    tau = 0.667
    gate = "gated"            # always | gated | never
    [panel]
    members = ["qwen2.5-0.5b", "gemma3-270m", "extractive"]
    [[panel.remote]]          # appended members: OpenAI-compatible, Anthropic or Ollama
    kind = "ollama"
    model = "llama3.2"
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from trishield.errors import InputError
from trishield.kb.retrieval import BACKENDS
from trishield.llm.panel import DEFAULT_PANEL, MemberSpec
from trishield.rings.consensus import GATE_MODES, ConsensusConfig
from trishield.rings.ingest_guard import GuardConfig
from trishield.rings.retrieval_scorer import ScorerConfig


@dataclass(frozen=True)
class PipelineConfig:
    """Everything a defense is built with, apart from its readers."""

    backend: str = "dense"
    guard: GuardConfig = field(default_factory=GuardConfig)
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    consensus: ConsensusConfig = field(default_factory=ConsensusConfig)


_UNIT = {"w_perp", "w_pat", "w_out", "theta", "flag_theta", "tau", "drop_fraction",
         "trust_margin"}


@dataclass(frozen=True)
class Settings:
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    panel: tuple[MemberSpec, ...] = DEFAULT_PANEL

    def as_dict(self) -> dict[str, Any]:
        return {"pipeline": dataclasses.asdict(self.pipeline),
                "panel": [m if isinstance(m, str) else dict(m) for m in self.panel]}


def _fail(where: str, message: str) -> InputError:
    return InputError(f"[{where}] {message}")


def _apply(section: str, values: dict[str, Any], target: Any) -> Any:
    known = {f.name: f for f in fields(target)}
    updates: dict[str, Any] = {}
    for key, value in values.items():
        name = key
        if name not in known or name == "patterns":
            allowed = sorted(k for k in known if k != "patterns")
            raise _fail(section, f"unknown key {key!r}; allowed: {', '.join(allowed)}")
        current = getattr(target, name)
        if isinstance(current, bool):
            if not isinstance(value, bool):
                raise _fail(section, f"{key} must be true or false, got {value!r}")
        elif isinstance(current, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _fail(section, f"{key} must be a number, got {value!r}")
            if isinstance(current, int) and not isinstance(value, int):
                raise _fail(section, f"{key} must be an integer, got {value!r}")
            if name in _UNIT and not 0.0 <= value <= 1.0:
                raise _fail(section, f"{key} must be between 0 and 1, got {value}")
            if name in ("pool", "context") and value < 1:
                raise _fail(section, f"{key} must be at least 1, got {value}")
        elif name == "min_relevance":
            if not isinstance(value, dict) or not set(value) <= set(BACKENDS) or any(
                    isinstance(v, bool) or not isinstance(v, (int, float)) for v in value.values()):
                raise _fail(section, f"{key} must be a table of numbers keyed by backend "
                                     f"({', '.join(BACKENDS)})")
            value = {backend: float(v) for backend, v in value.items()}
        elif isinstance(current, dict):
            if not isinstance(value, dict) or set(value) != set(current):
                raise _fail(section, f"{key} must be a table with keys "
                                     f"{', '.join(sorted(current))}")
            for tier, weight in value.items():
                if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                        or not 0 <= weight <= 1:
                    raise _fail(section, f"{key}.{tier} must be between 0 and 1")
        elif isinstance(current, tuple):
            tiers = ("trusted", "neutral", "untrusted")
            if not isinstance(value, list) or not all(v in tiers for v in value):
                raise _fail(section, f"{key} must be a list of tiers ({', '.join(tiers)})")
            value = tuple(value)
        elif isinstance(current, str) and not isinstance(value, str):
            raise _fail(section, f"{key} must be a string, got {value!r}")
        updates[name] = value
    return replace(target, **updates)


def _panel(values: dict[str, Any]) -> tuple[MemberSpec, ...]:
    unknown = set(values) - {"members", "remote"}
    if unknown:
        raise _fail("panel", f"unknown key(s) {', '.join(sorted(unknown))}; "
                             "allowed: members, remote")
    members = values.get("members", list(DEFAULT_PANEL))
    if not isinstance(members, list) or not all(isinstance(m, str) and m for m in members):
        raise _fail("panel", "members must be a list of model names")
    remote = values.get("remote", [])
    if not isinstance(remote, list) or not all(isinstance(r, dict) for r in remote):
        raise _fail("panel", "remote must be an array of tables ([[panel.remote]])")
    if not members and not remote:
        raise _fail("panel", "the panel has no members")
    return (*members, *remote)


def load_settings(path: str | Path | None) -> Settings:
    """Defaults, overridden by the TOML file at ``path`` when one is given."""
    if path is None:
        return Settings()
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("configuration file not found", path=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("configuration file is not UTF-8", path=str(path)) from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"invalid TOML: {error}", path=str(path)) from None
    sections = {"retrieval", "ring1", "ring2", "ring3", "panel"}
    unknown = set(raw) - sections
    if unknown:
        raise InputError(f"unknown section(s) {', '.join(sorted(unknown))}; allowed: "
                         f"{', '.join(sorted(sections))}", path=str(path))
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise InputError(f"[{name}] must be a table", path=str(path))
    try:
        retrieval = dict(raw.get("retrieval", {}))
        backend = retrieval.pop("backend", "dense")
        if backend not in BACKENDS:
            raise _fail("retrieval", f"backend must be one of {', '.join(BACKENDS)}")
        scorer = _apply("retrieval", retrieval, ScorerConfig())
        scorer = _apply("ring2", raw.get("ring2", {}), scorer)
        guard = _apply("ring1", raw.get("ring1", {}), GuardConfig())
        consensus = _apply("ring3", raw.get("ring3", {}), ConsensusConfig())
        if consensus.gate not in GATE_MODES:
            raise _fail("ring3", f"gate must be one of {', '.join(GATE_MODES)}")
        if consensus.tau <= 0:
            raise _fail("ring3", "tau must be above 0")
        if scorer.context > scorer.pool:
            raise _fail("retrieval", "context must not exceed pool")
        panel = _panel(raw.get("panel", {}))
    except InputError as error:
        raise InputError(error.message, path=str(path)) from None
    return Settings(PipelineConfig(backend, guard, scorer, consensus), panel)
