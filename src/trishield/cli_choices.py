"""Choices of the CLI's options whose names live in registries, read when an option is used.

The defenses, retrieval backends and gate modes are registries (defenses and backends take
third-party entry points) whose modules pull in the whole pipeline: numpy, the store, the
settings. Building them to declare ``click.Choice`` options made every command, ``--help``
included, pay seconds of imports. :class:`LazyChoice` reads its names the first time click
asks for them (validating a value, printing that command's help), so ``trishield --help``,
``documents``, ``quarantine``, ``keys`` and ``config`` never import them (docs/speed.md,
"Start-up"); tests/test_cli_startup.py checks which modules a command loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import click


class LazyChoice(click.Choice):
    """A :class:`click.Choice` whose choices come from ``names()`` on first use."""

    def __init__(self, names: Callable[[], Sequence[str]], case_sensitive: bool = True):
        self._names = cache(names)
        self.case_sensitive = case_sensitive

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return tuple(self._names())


def defense_names() -> tuple[str, ...]:
    """``--defense``: TriShield's settings (the baselines need the benchmark's calibration)."""
    from trishield.defenses import DEFENSES

    return tuple(DEFENSES.names(suite="trishield"))


def backend_names() -> tuple[str, ...]:
    """The registered retrieval backends (dense, bm25, hybrid and any plug-in)."""
    from trishield.kb.indexes.retrieval import BACKENDS

    return BACKENDS


def gate_modes() -> tuple[str, ...]:
    """When Ring 3 convenes the whole panel."""
    from trishield.rings.consensus import GATE_MODES

    return GATE_MODES


def benchmark_rows() -> tuple[str, ...]:
    """``eval poisonedrag --defense``: the matrix's rows (TriShield's settings and the
    baselines it compares)."""
    from trishield.eval.poisonedrag.defenses import DEFENSES

    return DEFENSES


DEFENSE_CHOICE = LazyChoice(defense_names)
BENCHMARK_ROW_CHOICE = LazyChoice(benchmark_rows)
BACKEND_CHOICE = LazyChoice(backend_names)
GATE_CHOICE = LazyChoice(gate_modes)
