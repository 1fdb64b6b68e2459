"""The defense configuration: validated pydantic dataclasses, and the TOML file that sets them.

Every configuration class validates itself on construction (in code, through
``dataclasses.replace`` and from the file alike): an unknown key, a wrong type or a value out of
range is an error that names it, because a typo in a security tool's configuration must not
silently fall back to a default. ``trishield config show`` prints the effective configuration
and ``trishield config check FILE`` validates a file.

Example (every key optional)::

    [retrieval]
    backend = "hybrid"        # dense | bm25 | hybrid
    pool = 20                 # K candidates
    context = 5               # k passages sent to the readers
    [ring1]
    theta = 0.24
    [ring2]
    w_prov = { trusted = 0.2, neutral = 0.5, untrusted = 0.8 }
    [ring3]
    tau = 0.667
    gate = "gated"            # always | gated | never
    [panel]
    members = ["qwen2.5-1.5b", "gemma3-270m", "extractive"]   # fast: "qwen2.5-0.5b" first
    [[panel.remote]]          # appended members: OpenAI-compatible, Anthropic or Ollama
    kind = "ollama"
    model = "llama3.2"
    [service]                 # `trishield serve` only (docs/service.md, "Limits")
    max_connections = 8192
    header_timeout_s = 10.0
    asks_per_key = 4
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, fields, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, Field, ValidationError, field_validator
from pydantic.dataclasses import dataclass as config_dataclass

from trishield.errors import InputError
from trishield.llm.factory import LLMConfigError, check_backend_config
from trishield.llm.panel import DEFAULT_PANEL, DEFAULT_SECOND_READER, NO_SECOND_READER, MemberSpec
from trishield.rings.config_types import CONFIG, Backend, list_to_tuple
from trishield.rings.consensus import ConsensusConfig
from trishield.rings.ingest_guard import GuardConfig
from trishield.rings.retrieval_scorer import ScorerConfig

SECTIONS = ("retrieval", "ring1", "ring2", "ring3", "panel", "service")
RETRIEVAL_KEYS = ("pool", "context")
"""Ring 2's keys shown under ``[retrieval]``; the others are shown under ``[ring2]``. Either
section accepts any of them, as it always has."""
NOT_IN_FILE = frozenset({"patterns", "tamper"})
"""Fields that the file cannot set (Ring 1's per-detector weights and the tampered-copy
thresholds are calibrated in code)."""

_Config = TypeVar("_Config")


@config_dataclass(frozen=True, config=CONFIG)
class PipelineConfig:
    """Everything the pipeline runs with: the retrieval backend and each ring's settings."""

    backend: Backend = "hybrid"
    """Reciprocal-rank fusion of dense and BM25: on documentation, identifiers and options
    are found by their exact terms, which embeddings blur (docs/answers.md); the PoisonedRAG
    matrix pins ``dense``, what its committed figures were measured on."""
    guard: GuardConfig = field(default_factory=GuardConfig)
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    consensus: ConsensusConfig = field(default_factory=ConsensusConfig)

    def with_overrides(self, *, backend: str | None = None,
                       gate: str | None = None) -> PipelineConfig:
        """This configuration with the per-request choices (``None`` keeps the configured
        value); raises :class:`InputError` naming the bad value."""
        return _validated(lambda: self._overridden(backend, gate), "")

    def _overridden(self, backend: str | None, gate: str | None) -> PipelineConfig:
        config = self
        if backend is not None:
            config = replace(config, backend=backend)
        if gate is not None:
            config = replace(config, consensus=replace(config.consensus, gate=gate))
        return config


@config_dataclass(frozen=True, config=CONFIG)
class ServiceLimits:
    """What one client may hold of a ``trishield serve`` process (``[service]``; each also a
    ``serve`` flag). Why each exists is in docs/service.md, "Limits": a connection that sends
    nothing, or its request a byte at a time, holds a file descriptor, and one key's queue of
    asks must not become everyone's wait."""

    max_connections: Annotated[int, Field(ge=16, le=100_000)] = 8192
    """Open connections at most; lowered at start to what the process's file descriptor limit
    leaves. At the bound the connection that has waited longest for its request head is
    closed to make room; if every connection is busy with a request, the new one gets 503."""
    header_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0
    """Seconds a connection has to send a complete request head (from its opening, or from
    the end of its previous response); then it is closed."""
    body_timeout_s: Annotated[float, Field(gt=0, le=86400)] = 60.0
    """Seconds a request has to send its whole body after its head; then it is closed."""
    keep_alive_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    """Seconds an idle connection is kept open between requests."""
    asks_per_key: Annotated[int, Field(ge=1, le=1000)] = 4
    """Asks one API key may have admitted at once (running or waiting for a slot); more get
    429 with ``Retry-After``."""
    searches_per_key: Annotated[int, Field(ge=1, le=1000)] = 16
    """Searches one API key may have in progress at once; more get 429 at once."""
    ask_queue: Annotated[int, Field(ge=0, le=10_000)] = 32
    """Asks that may wait for a slot, all keys together; more get 503 with ``Retry-After``.
    Waiting asks take their turns key by key (round robin), not first come first served."""


@config_dataclass(frozen=True, config=CONFIG)
class Settings:
    """The pipeline's configuration and the Ring 3 panel (members in order)."""

    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    panel: Annotated[tuple[MemberSpec, ...], BeforeValidator(list_to_tuple)] = DEFAULT_PANEL
    second_reader: str | None = DEFAULT_SECOND_READER
    """Ring 3's second reader (``[panel] second_reader``, ``"none"`` for none), asked only when
    the panel's answer is in no passage (docs/design/ring3-consensus.md, "The second reader")."""
    service: ServiceLimits = field(default_factory=ServiceLimits)

    @field_validator("panel")
    @classmethod
    def _named_members(cls, panel: tuple[MemberSpec, ...]) -> tuple[MemberSpec, ...]:
        if not panel:
            raise ValueError("the panel has no members")
        if any(isinstance(member, str) and not member for member in panel):
            raise ValueError("a member name is empty")
        return panel

    def as_dict(self) -> dict[str, Any]:
        return {"pipeline": dataclasses.asdict(self.pipeline),
                "panel": [m if isinstance(m, str) else dict(m) for m in self.panel],
                "second_reader": self.second_reader or NO_SECOND_READER,
                "service": dataclasses.asdict(self.service)}

    def with_overrides(self, *, backend: str | None = None, gate: str | None = None,
                       panel: Sequence[MemberSpec] | None = None) -> Settings:
        """These settings with command-line or request choices applied (``None`` keeps the
        configured value), validated like the file: the one place such overrides are made."""
        pipeline = self.pipeline.with_overrides(backend=backend, gate=gate)
        if panel is None:
            return replace(self, pipeline=pipeline)
        return _validated(lambda: replace(self, pipeline=pipeline, panel=tuple(panel)), "")

    def with_service(self, **limits: Any) -> Settings:
        """These settings with ``[service]`` limits replaced (``trishield serve`` flags),
        validated like the file."""
        return _validated(lambda: replace(self, service=replace(self.service, **limits)),
                          "service", ServiceLimits)


# -- validation errors, told in the file's terms ------------------------------------------------

Where = Callable[[str], str] | str
"""The file section a key belongs to (a name, or a function of the key); ``""`` for none."""


def _range_of(owner: type | None, name: str) -> str | None:
    """``between 0 and 1`` for a field with both bounds, so one message shows the range."""
    info = getattr(owner, "__pydantic_fields__", {}).get(name)
    if info is None:
        return None
    found: dict[str, float] = {}
    for constraint in info.metadata:
        for key in ("ge", "gt", "le", "lt"):
            if getattr(constraint, key, None) is not None:
                found[key] = getattr(constraint, key)
    if "ge" in found and "le" in found:
        return f"between {found['ge']:g} and {found['le']:g}"
    if "gt" in found and "le" in found:
        return f"above {found['gt']:g} and at most {found['le']:g}"
    return None


def _bounds(context: Mapping[str, Any]) -> str:
    limits = {"ge": "at least", "gt": "above", "le": "at most", "lt": "below"}
    return " and ".join(f"{limits[k]} {v:g}" for k, v in context.items() if k in limits)


_PLAIN = {
    "bool_type": "must be true or false",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "dict_type": "must be a table",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
}


def _what_is_wrong(error: Mapping[str, Any], owner: type | None) -> str:
    kind, value, loc = error["type"], error.get("input"), error["loc"]
    if kind in _PLAIN:
        return f"{_PLAIN[kind]}, got {value!r}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bounds = _range_of(owner, str(loc[0])) if len(loc) == 1 else None
        return f"must be {bounds or _bounds(error.get('ctx', {}))}, got {value!r}"
    if kind == "literal_error":
        return f"must be one of {error['ctx']['expected']}, got {value!r}"
    if kind in ("value_error", "assertion_error"):
        return str(error["ctx"]["error"])
    return str(error["msg"])


def _prefix(where: Where, key: str) -> str:
    section = where if isinstance(where, str) else where(key)
    return f"[{section}] " if section else ""


def _unknown_key(where: Where, key: str, owner: type | None) -> str:
    message = f"{_prefix(where, key)}unknown key {key!r}"
    if owner is None:
        return message
    allowed = {f.name for f in fields(owner)} - NOT_IN_FILE
    if owner is ScorerConfig and _prefix(where, key) == "[retrieval] ":
        allowed.add("backend")
    return f"{message}; allowed: {', '.join(sorted(allowed))}"


def explain(error: ValidationError, where: Where, owner: type | None = None) -> str:
    """Each problem as ``[section] key: what is wrong``, in the file's vocabulary."""
    lines = []
    for problem in error.errors(include_url=False):
        loc = problem["loc"]
        key = str(loc[0]) if loc else ""
        if problem["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            lines.append(_unknown_key(where, key, owner))
        else:
            what = _what_is_wrong(problem, owner)
            lines.append(f"{_prefix(where, key)}{_key(loc)}: {what}" if loc
                         else f"{_prefix(where, key)}{what}")
    return "; ".join(lines)


def _key(loc: Sequence[Any]) -> str:
    """``('w_prov', 'trusty', '[key]')`` -> ``w_prov.trusty``."""
    return ".".join(str(part) for part in loc if part != "[key]")


def _validated(build: Callable[[], _Config], where: Where, owner: type | None = None) -> _Config:
    """``build()``, its validation errors raised as one :class:`InputError`."""
    try:
        return build()
    except ValidationError as error:
        raise InputError(explain(error, where, owner)) from None


# -- the file -----------------------------------------------------------------------------------

def _build(owner: type[_Config], values: Mapping[str, Any], where: Where) -> _Config:
    for key in values:
        if key in NOT_IN_FILE:  # a real field, but not one the file may set
            raise InputError(_unknown_key(where, key, owner))
    return _validated(lambda: owner(**values), where, owner)


def _second_reader(values: dict[str, Any]) -> str | None:
    """``[panel] second_reader``: a model name, ``"none"``, or absent for the default."""
    second = values.get("second_reader", DEFAULT_SECOND_READER)
    if second is None:
        return None
    if not (isinstance(second, str) and second.strip()):
        raise InputError(f"[panel] second_reader: must be a model name or "
                         f"{NO_SECOND_READER!r}")
    return None if second.strip() == NO_SECOND_READER else second.strip()


def _panel(values: dict[str, Any]) -> tuple[MemberSpec, ...]:
    unknown = set(values) - {"members", "remote", "second_reader"}
    if unknown:
        raise InputError(f"[panel] unknown key(s) {', '.join(sorted(unknown))}; "
                         "allowed: members, remote, second_reader")
    members = values.get("members", list(DEFAULT_PANEL))
    # a member is a model name (a registry model, a .gguf path, "extractive") or an inline
    # backend table, so that any model can be the reader (the first member) in one line:
    # members = [{ kind = "ollama", model = "qwen2.5:7b" }, "gemma3-270m", "extractive"]
    if not isinstance(members, list) or not all(
            (isinstance(m, str) and m) or isinstance(m, dict) for m in members):
        raise InputError("[panel] members: must be a list of model names or backend tables "
                         "({ kind = ..., model = ... })")
    remote = values.get("remote", [])
    if not isinstance(remote, list) or not all(isinstance(r, dict) for r in remote):
        raise InputError("[panel] remote: must be an array of tables ([[panel.remote]])")
    if not members and not remote:
        raise InputError("[panel] the panel has no members")
    for table in (*[m for m in members if isinstance(m, dict)], *remote):
        try:
            check_backend_config(table)
        except LLMConfigError as error:
            raise InputError(f"[panel] {error}") from None
    return (*members, *remote)


def settings_from_dict(raw: Mapping[str, Any]) -> Settings:
    """Defaults overridden by the parsed TOML document ``raw``; :class:`InputError` names the
    section and key at fault."""
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise InputError(f"unknown section(s) {', '.join(sorted(unknown))}; allowed: "
                         f"{', '.join(sorted(SECTIONS))}")
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise InputError(f"[{name}] must be a table")
    retrieval = dict(raw.get("retrieval", {}))
    backend = retrieval.pop("backend", PipelineConfig.backend)
    ring2 = raw.get("ring2", {})
    scorer = _build(ScorerConfig, retrieval | ring2,
                    lambda key: "ring2" if key in ring2 else "retrieval")
    guard = _build(GuardConfig, raw.get("ring1", {}), "ring1")
    consensus = _build(ConsensusConfig, raw.get("ring3", {}), "ring3")
    pipeline = _validated(lambda: PipelineConfig(
        backend=backend, guard=guard, scorer=scorer, consensus=consensus), "retrieval")
    panel = _panel(raw.get("panel", {}))
    second = _second_reader(raw.get("panel", {}))
    service = _build(ServiceLimits, raw.get("service", {}), "service")
    return _validated(lambda: Settings(pipeline=pipeline, panel=panel, second_reader=second,
                                       service=service), "panel")


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
    try:
        return settings_from_dict(raw)
    except InputError as error:
        raise InputError(error.message, path=str(path)) from None
