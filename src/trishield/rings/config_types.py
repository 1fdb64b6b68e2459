"""Field types shared by the rings' configuration classes.

The configuration classes are pydantic dataclasses built with :data:`CONFIG`, so a value out of
range is refused where it is set (in code, through ``dataclasses.replace`` or from the TOML file
via :mod:`trishield.settings`), not far away by hand-written checks. ``strict`` keeps TOML's
types honest: ``retry = 1`` is not a boolean and ``pool = "20"`` is not a number (an integer is
still a valid float).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, ConfigDict, Field

from trishield.kb.documents import TIERS
from trishield.kb.indexes.retrieval import BACKENDS

CONFIG = ConfigDict(extra="forbid", strict=True)
"""Unknown keys are errors and values are not coerced from other types."""

Unit = Annotated[float, Field(ge=0.0, le=1.0)]
"""A weight, probability or fraction in [0, 1]."""

AtLeastOne = Annotated[int, Field(ge=1)]

Tier = Literal[TIERS]  # type: ignore[valid-type]
TIERS: tuple[str, ...] = get_args(Tier)

GateMode = Literal["always", "gated", "never"]

Backend = Literal[BACKENDS]  # type: ignore[valid-type]  # the one list of retrieval backends


def list_to_tuple(value: Any) -> Any:
    """TOML has arrays, not tuples: accept a list where a tuple is kept."""
    return tuple(value) if isinstance(value, list) else value


TierTuple = Annotated[tuple[Tier, ...], BeforeValidator(list_to_tuple)]
