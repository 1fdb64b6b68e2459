"""What every baseline defense shares: argument checks and the single reader they answer with.

Each baseline is a composition of stages (:mod:`trishield.stages`) registered as a defense
(:mod:`trishield.eval.baselines`), so the benchmark compares TriShield and its peers through
one ``Pipeline.ask`` and one trace schema. Baselines report what their filters removed in the
trace's ``removed`` rows (what detection precision and recall are measured on).

Readers see the context in retrieval order, as the undefended pipeline (``--defense none``)
does: these defenses have no notion of trust to order by.
"""

from __future__ import annotations

import math

from trishield.defenses.answerers import SingleReader
from trishield.errors import InputError
from trishield.kb.indexes.retrieval import BACKENDS
from trishield.kb.reading import MAX_K
from trishield.llm.base import Reader


def check_k(k: object, what: str = "k") -> int:
    """``k`` as a positive int within the KB's limit, or an InputError that says why."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"{what} must be an integer between 1 and {MAX_K}, got {k!r}")
    return k


def check_pool(pool: object, k: int) -> int:
    """How many candidates a filter screens: ``k`` when not given, never fewer than ``k``."""
    value = k if pool is None else check_k(pool, "pool")
    if value < k:
        raise InputError(f"pool ({value}) must be at least k ({k})")
    return value


def check_backend(backend: object) -> str:
    if backend not in BACKENDS:
        raise InputError(f"unknown retrieval backend {backend!r}; choose from "
                         f"{', '.join(BACKENDS)}")
    return str(backend)


def check_reader(reader: object) -> Reader:
    """The one reader protocol (:class:`trishield.llm.base.Reader`), or a clear error."""
    if not isinstance(reader, Reader):
        raise InputError(f"{reader!r} is not a reader: it needs answer(), name, vendor and "
                         "uses_llm (an LLMReader or the ExtractiveReader)")
    return reader


def check_fraction(value: object, what: str, *, low: float = 0.0, high: float = 1.0) -> float:
    """A finite number in ``[low, high]`` (NaN and infinities are refused, not compared)."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not low <= value <= high:
        raise InputError(f"{what} must be a finite number in [{low}, {high}], got {value!r}")
    return float(value)


def check_question(question: object) -> str:
    if not isinstance(question, str) or not question.strip():
        raise InputError("the question is empty")
    return question


def baseline_reader(reader: Reader) -> SingleReader:
    """The baselines' answerer: one reader, retrieval order, the baselines' wording."""
    return SingleReader(check_reader(reader), order="retrieval")
