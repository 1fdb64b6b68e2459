"""From a library's retrieved passage to TriShield's provenance, and back to its metadata.

Every integration does the same three things, so they live here, free of any third-party
import: read the provenance from the passage's metadata (:class:`MetadataKeys`, with the
defaults below), run :func:`trishield.screen` (Rings 1 and 2), and say per passage what the
rings decided (:func:`decisions`), which the integration writes into the metadata of what it
returns under :data:`TRISHIELD_KEY`.

Defaults when a key is missing, and why:

* ``tier`` -> ``default_tier`` (``neutral`` unless you say otherwise): TriShield's guarantees
  rest on tiers that come from who wrote a passage, and a retriever that says nothing knows
  nothing either way. Set ``default_tier="untrusted"`` for a store anyone can write to.
* ``writer`` -> the passage's source (``source``, ``file_path``, ``file_name``: what
  LangChain's, LlamaIndex's and Haystack's loaders record), else its document id. Ring 2 caps
  the context per writer and counts one writer as one witness, so the best stand-in for "who
  wrote it" is "where it came from": the chunks of one file are one origin, two files are two.
* ``doc_id`` -> the library's parent document (LlamaIndex's ``ref_doc_id``, Haystack's
  ``source_id``), else the source, else the passage's own id.
* ``title`` -> the source's file name; ``ingested_at`` -> unknown (no precedence);
* ``score`` (read only where the library's passage has no score of its own: LangChain) ->
  when *no* passage has a score, the cosine similarity of the question and the passage with
  the embedding model the rings use anyway (:func:`with_relevance`). Ring 2 min-max
  normalises relevance over the pool, so the retriever's order alone (scored ``1/rank``) would
  make the seventh of eight passages look irrelevant, however close it was.
* ``embedding`` (read only where the library's passage has no embedding of its own:
  LangChain) -> embedded by TriShield. The libraries' own embeddings (LlamaIndex's
  ``node.embedding``, Haystack's ``Document.embedding``) are used when present. Either must
  come from the model the rings use (``embedding_model``; the dimension is checked): what is
  given is not embedded again, and what is missing is embedded in one batch (with the
  question, when relevance has to be computed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from trishield.api import Screening, screen
from trishield.defenses.retrievers import Passage
from trishield.errors import InputError
from trishield.kb.documents import TIERS
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder
from trishield.settings import Settings

TRISHIELD_KEY = "trishield"
"""The metadata entry every integration writes: the rings' decisions for that passage."""


@dataclass(frozen=True)
class MetadataKeys:
    """Which metadata keys hold each part of the provenance (rename them to match your store).

    ``sources`` are tried in order for the passage's origin (see the module docstring).
    """

    tier: str = "tier"
    writer: str = "writer"
    doc_id: str = "doc_id"
    title: str = "title"
    ingested_at: str = "ingested_at"
    score: str = "score"
    """Read only where the library's passages carry no score of their own (LangChain)."""
    embedding: str = "embedding"
    """Read only where the library's passages carry no embedding of their own (LangChain)."""
    sources: tuple[str, ...] = ("source", "file_path", "file_name")

    def __post_init__(self) -> None:
        for name in ("tier", "writer", "doc_id", "title", "ingested_at", "score", "embedding"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"metadata key for {name} must be a non-empty string, "
                                 f"got {value!r}")
        if isinstance(self.sources, str) or not all(
                isinstance(k, str) and k.strip() for k in self.sources):
            raise InputError(f"metadata keys for the source must be a tuple of non-empty "
                             f"strings, got {self.sources!r}")
        object.__setattr__(self, "sources", tuple(self.sources))


@dataclass(frozen=True)
class Found:
    """One passage as a library's retriever returned it: what :func:`to_passage` reads."""

    id: str
    text: str
    metadata: Mapping[str, Any]
    score: float | None = None
    parent_id: str | None = None
    """The library's own id for the document the passage was cut from, if it keeps one."""
    embedding: Any = None
    """The library's own embedding of the passage, if its retriever returned one."""


@dataclass(frozen=True)
class ScreenOptions:
    """What every integration takes: context size, provenance defaults, ring settings.

    ``k`` (default: the configured context size, 5) is how many passages to keep;
    ``settings`` the rings' configuration (default: ``trishield config show``);
    ``embedding_model`` embeds the passages for Ring 1's outlier score and Ring 2's
    near-duplicate clusters.
    """

    k: int | None = None
    default_tier: str = "neutral"
    keys: MetadataKeys = field(default_factory=MetadataKeys)
    settings: Settings | None = None
    embedding_model: str = DEFAULT_EMBEDDING_MODEL

    def __post_init__(self) -> None:
        if self.k is not None and (isinstance(self.k, bool) or not isinstance(self.k, int)
                                   or self.k < 1):
            raise InputError(f"k must be a positive integer, got {self.k!r}")
        if self.default_tier not in TIERS:
            raise InputError(f"default_tier must be one of {', '.join(TIERS)}, "
                             f"got {self.default_tier!r}")
        if not isinstance(self.keys, MetadataKeys):
            raise InputError(f"keys must be a MetadataKeys, got {type(self.keys).__name__}")
        if self.settings is not None and not isinstance(self.settings, Settings):
            raise InputError(f"settings must be a trishield Settings, got "
                             f"{type(self.settings).__name__}")
        if not isinstance(self.embedding_model, str) or not self.embedding_model.strip():
            raise InputError("embedding_model must be a model name")


def to_passage(found: Found, keys: MetadataKeys, default_tier: str) -> Passage:
    """``found`` with the provenance its metadata records (defaults: module docstring)."""
    label = f"passage {found.id!r}"
    meta = found.metadata
    if not isinstance(meta, Mapping):
        raise InputError(f"{label}: metadata must be a mapping, got {type(meta).__name__}")
    tier = meta.get(keys.tier)
    if tier is None:
        tier = default_tier
    elif tier not in TIERS:
        raise InputError(f"{label}: metadata {keys.tier!r} must be one of "
                         f"{', '.join(TIERS)}, got {tier!r}")
    source = next((s for s in (_text(meta, key, label) for key in keys.sources) if s), None)
    doc_id = _text(meta, keys.doc_id, label, numbers=True) or found.parent_id or source \
        or found.id
    writer = _text(meta, keys.writer, label) or source or doc_id
    title = _text(meta, keys.title, label) or (PurePosixPath(source).name if source else "")
    score = found.score if found.score is not None else meta.get(keys.score)
    embedding = found.embedding if found.embedding is not None else meta.get(keys.embedding)
    return Passage(id=found.id, text=found.text, tier=tier, doc_id=doc_id, title=title,
                   writer=writer, score=score,
                   ingested_at=_seconds(meta.get(keys.ingested_at), label, keys.ingested_at),
                   embedding=embedding)


def _text(meta: Mapping[str, Any], key: str, label: str, *, numbers: bool = False) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"{label}: metadata {key!r} must be a string, got "
                         f"{type(value).__name__} {value!r}")
    return value.strip() or None


def _seconds(value: Any, label: str, key: str) -> float | None:
    """Unix seconds from a number, a ``datetime`` or an ISO 8601 string (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InputError(f"{label}: metadata {key!r} is not an ISO 8601 time: "
                             f"{value!r}") from None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise InputError(f"{label}: metadata {key!r} must be Unix seconds, a datetime or an "
                         f"ISO 8601 string, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Screened:
    """A screening of found passages: the kept ids in trust order, and per passage id what
    the rings decided (:func:`decisions`)."""

    screening: Screening
    decisions: dict[str, dict[str, Any]]

    @property
    def kept(self) -> list[str]:
        return [p.id for p in self.screening.kept]

    @property
    def removed(self) -> list[str]:
        return list(self.screening.removed)


def with_relevance(question: str, passages: Sequence[Passage],
                   embedding_model: str) -> list[Passage]:
    """``passages``, scored by cosine similarity to ``question`` when none has a score (see
    the module docstring); as they are when any has one. The question and the passages that
    came without an embedding are embedded in one batch, and those passages keep their new
    embedding, so the rings do not embed them again."""
    if not passages or any(p.score is not None for p in passages):
        return list(passages)
    missing = [p for p in passages if p.embedding is None]
    encoder = load_embedder(embedding_model)
    encoded = np.asarray(encoder.encode([question, *(p.text for p in missing)]),
                         dtype=np.float32)
    computed = dict(zip((p.id for p in missing), encoded[1:], strict=True))
    scored = []
    for passage in passages:
        vector = passage.embedding if passage.embedding is not None else computed[passage.id]
        if len(vector) != len(encoded[0]):
            raise InputError(f"passage {passage.id!r}: its embedding has {len(vector)} "
                             f"dimensions, {embedding_model} gives {len(encoded[0])}: give "
                             "vectors of the model the rings use (embedding_model), or none")
        scored.append(replace(passage, score=float(vector @ encoded[0]), embedding=vector))
    return scored


def screen_found(question: str, found: Sequence[Found], options: ScreenOptions) -> Screened:
    """Rings 1 and 2 over ``found`` with the provenance their metadata records."""
    passages = with_relevance(question,
                              [to_passage(f, options.keys, options.default_tier)
                               for f in found], options.embedding_model)
    screening = screen(question, passages, k=options.k, settings=options.settings,
                       embedding_model=options.embedding_model)
    return Screened(screening, decisions(screening, passages))


def decisions(screening: Screening, passages: Sequence[Passage]) -> dict[str, dict[str, Any]]:
    """Per passage id, JSON-ready: the provenance used, Ring 1's verdict, Ring 2's trust and
    the outcome (``kept``, ``blocked`` by Ring 1, ``not in context`` (Ring 2 kept another of
    its near-duplicates or writer, or it ranked below ``k``), or ``refused`` when Ring 2 found
    nothing to answer from)."""
    trace = screening.trace
    verdicts = {v.id: v for v in trace.ring1.verdicts} if trace.ring1 else {}
    ranked = {r.chunk_id: r for r in trace.ring2.ranked} if trace.ring2 else {}
    kept = {p.id for p in screening.kept}
    out: dict[str, dict[str, Any]] = {}
    for passage in passages:
        trace_id = screening.trace_ids[passage.id]
        verdict, row = verdicts.get(trace_id), ranked.get(trace_id)
        outcome = ("kept" if passage.id in kept else "blocked" if verdict and verdict.blocked
                   else "refused" if screening.refusal else "not in context")
        entry: dict[str, Any] = {
            "outcome": outcome, "trust": row.trust if row else None, "trace_id": trace_id,
            "tier": passage.tier, "writer": passage.writer, "doc_id": passage.doc_id}
        if verdict is not None:
            entry["ring1"] = {"score": verdict.c, "blocked": verdict.blocked,
                              "flagged": verdict.flagged, "reasons": list(verdict.reasons)}
        if row is not None:
            entry["ring2"] = {"trust_rank": row.trust_rank, "relevance": row.s_rel,
                              "corroboration": row.s_con, "provenance_weight": row.w_prov}
        if outcome == "refused":
            entry["refusal"] = screening.refusal
        out[passage.id] = entry
    return out
