"""PoisonedRAG's perplexity filter: retrieved passages a real language model finds too
surprising are removed before the reader sees them.

The paper (Zou et al., 2024, section 7) argues that an attacker's text may read less naturally
than real Wikipedia prose, so it computes each text's perplexity with a language model and drops
texts above a threshold. Here, as in the paper's deployment, the top ``k`` are retrieved, the
ones above the threshold removed, and the reader answers from what is left (fewer than ``k``
passages when something was removed; ``pool`` > ``k`` optionally retrieves more and keeps the
top ``k`` survivors).

The language model is a real causal LM from TriShield's GGUF registry (SmolLM2-135M by
default), loaded with Hugging Face ``transformers`` (``from_pretrained(dir, gguf_file=...)``,
which dequantizes the weights to float32 through the ``gguf`` package, offline) after the file
passed its sha256 pin. Perplexity is ``exp`` of the mean next-token negative log-likelihood,
computed with torch over the first ``max_tokens`` tokens of the text, conditioned on the model's
document-separator token so that the first word is scored too.

Scores are cached on disk per (model sha256, max_tokens, text), because the same passages come
back for thousands of questions and a score costs about a second on two shared CPU cores.

The threshold is calibrated on clean passages only (a seeded sample of HotpotQA and MuSiQue
passages, which are in no evaluation KB): a fixed percentile of their perplexities, i.e. a fixed
clean false-positive rate. Poisons never take part in choosing it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import random
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from trishield.config import cache_dir, enforce_offline
from trishield.errors import InputError, ModelError, require_extra
from trishield.kb.chunking import ChunkingConfig, chunk_document
from trishield.kb.datasets import load_named
from trishield.kb.indexes.retrieval import Candidate
from trishield.models.gguf import GGUF_MODELS, resolve_gguf, verify_resolved
from trishield.stages import Run

NAME = "perplexity-filter"
DEFAULT_PERPLEXITY_MODEL = "smollm2-135m"
DEFAULT_MAX_TOKENS = 256
"""Wiki chunks are at most 120 words (~160 tokens); longer texts are scored on their start."""
PERPLEXITY_CACHE_ENV = "TRISHIELD_PERPLEXITY_CACHE"
CALIBRATION_CORPORA = ("hotpotqa", "musique")
_FORMAT = 1
_SEPARATORS = ("<|endoftext|>", "</s>", "<eos>")


def default_perplexity_cache_dir() -> Path:
    """``$TRISHIELD_PERPLEXITY_CACHE``, else ``<trishield cache>/perplexity``."""
    configured = os.environ.get(PERPLEXITY_CACHE_ENV)
    return Path(configured).expanduser() if configured else cache_dir() / "perplexity"


@dataclass(frozen=True)
class LoadedLM:
    """A causal LM ready to score text: tokenizer, float32 model, and where it came from."""

    name: str
    sha256: str
    tokenizer: Any
    model: Any
    prefix_id: int | None
    seconds: float


@cache
def load_causal_lm(model: str) -> LoadedLM:
    """Load a GGUF model (registry name or path) into ``transformers``, once per process."""
    resolved = resolve_gguf(model)
    verify_resolved(resolved)
    started = time.perf_counter()
    enforce_offline()
    # transformers reads a GGUF file through the gguf package and places the weights with
    # accelerate; both come with the eval extra, not with TriShield's runtime
    require_extra("the perplexity filter", "eval", ["gguf", "accelerate"])
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, file = str(resolved.path.parent), resolved.path.name
    captured = io.StringIO()  # transformers draws a progress bar while dequantizing
    try:
        with contextlib.redirect_stderr(captured):
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file,
                                                      local_files_only=True)
            lm = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file,
                                                      dtype=torch.float32,
                                                      local_files_only=True)
    except Exception as error:  # transformers raises many kinds; say which file and why
        raise ModelError(f"transformers could not load {resolved.path} as a causal LM: "
                         f"{error}\n{captured.getvalue()[-500:]}") from error
    lm.eval()
    prefix = None
    vocabulary = tokenizer.get_vocab()
    for token in _SEPARATORS:
        if token in vocabulary:
            prefix = vocabulary[token]
            break
    if prefix is None and tokenizer.bos_token_id is not None:
        prefix = int(tokenizer.bos_token_id)
    return LoadedLM(resolved.name, resolved.sha256, tokenizer, lm, prefix,
                    time.perf_counter() - started)


class PerplexityCache:
    """One small JSON file per scored text, written atomically (temporary file + rename)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory is not None \
            else default_perplexity_cache_dir()

    @staticmethod
    def key(model_sha256: str, max_tokens: int, text: str) -> str:
        payload = json.dumps({"format": _FORMAT, "model": model_sha256,
                              "max_tokens": max_tokens, "text": text},
                             sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> float | None:
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
            value = float(entry["perplexity"]) if entry.get("key") == key else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return value if value is not None and math.isfinite(value) and value > 0 else None

    def put(self, key: str, perplexity: float, tokens: int) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"key": key, "perplexity": perplexity, "tokens": tokens}, out)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


@dataclass
class ScoringStats:
    """What scoring cost: texts computed (and their seconds) versus served from the cache."""

    computed: int = 0
    cached: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"computed": self.computed, "cached": self.cached,
                "seconds": round(self.seconds, 3),
                "passages_per_s": round(self.computed / self.seconds, 3)
                if self.computed and self.seconds else None}


class PerplexityScorer:
    """Perplexity of texts under one causal LM, with the on-disk cache in front of it.

    The model is loaded on the first text the cache cannot answer, so a run whose passages
    were all scored before never loads it. ``threads`` sets torch's CPU threads while scoring
    (on a machine shared with other jobs, 1 thread is faster than 2).
    """

    def __init__(self, model: str = DEFAULT_PERPLEXITY_MODEL, *,
                 cache: PerplexityCache | None = None, use_cache: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, batch_size: int = 8,
                 threads: int | None = None):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
            raise InputError(f"max_tokens must be an integer >= 2, got {max_tokens!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise InputError(f"threads must be a positive integer, got {threads!r}")
        entry = GGUF_MODELS.get(model)
        # a registry model's pin identifies it without hashing (or even installing) the file
        self.sha256 = entry.sha256 if entry is not None else resolve_gguf(model).sha256
        self.model = model
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.threads = threads
        self.cache = (cache or PerplexityCache()) if use_cache else None
        self.stats = ScoringStats()

    def __repr__(self) -> str:
        return f"PerplexityScorer({self.model!r}, sha256={self.sha256[:12]})"

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "sha256": self.sha256, "max_tokens": self.max_tokens,
                "runtime": "transformers (GGUF dequantized to float32), torch on CPU"}

    def score(self, texts: Sequence[str]) -> list[float]:
        """Perplexity of each text (same order); cached texts cost nothing."""
        for position, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"text {position} to score is empty or not a string")
        results: list[float | None] = [None] * len(texts)
        keys = [PerplexityCache.key(self.sha256, self.max_tokens, t) for t in texts]
        missing: dict[str, list[int]] = {}
        for position, key in enumerate(keys):
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is None:
                missing.setdefault(key, []).append(position)
            else:
                results[position] = hit
                self.stats.cached += 1
        if missing:
            load_causal_lm(self.model)  # loading is not scoring: keep it out of the speed
            entries = list(missing.items())
            unique = [texts[positions[0]] for _, positions in entries]
            started = time.perf_counter()
            # each batch is cached as soon as it is scored: an interrupted run keeps its work
            for index, perplexity, tokens in self._compute(unique):
                key, positions = entries[index]
                if self.cache is not None:
                    self.cache.put(key, perplexity, tokens)
                for position in positions:
                    results[position] = perplexity
                self.stats.computed += 1
            self.stats.seconds += time.perf_counter() - started
        return [float(r) for r in results if r is not None]

    def _compute(self, texts: list[str]) -> Iterator[tuple[int, float, int]]:
        """(index, perplexity, scored tokens) per text, batched by similar length."""
        import torch

        lm = load_causal_lm(self.model)
        encoded = [lm.tokenizer(" ".join(t.split()), add_special_tokens=False,
                                truncation=True, max_length=self.max_tokens)["input_ids"]
                   for t in texts]
        if lm.prefix_id is not None:
            encoded = [[lm.prefix_id, *ids] for ids in encoded]
        for position, ids in enumerate(encoded):
            if len(ids) < 2:
                raise InputError(f"text {position} has too few tokens to have a perplexity")
        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
        previous = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                width = max(len(encoded[i]) for i in batch)
                ids = torch.zeros((len(batch), width), dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, index in enumerate(batch):
                    tokens = encoded[index]
                    ids[row, :len(tokens)] = torch.tensor(tokens)
                    mask[row, :len(tokens)] = 1
                with torch.inference_mode():
                    logits = lm.model(input_ids=ids, attention_mask=mask).logits.float()
                nll = torch.nn.functional.cross_entropy(
                    logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
                scored = mask[:, 1:].float()
                mean = (nll * scored).sum(dim=1) / scored.sum(dim=1)
                for row, index in enumerate(batch):
                    # rounded so that batch composition (padding) cannot change a cached score
                    yield index, round(float(torch.exp(mean[row])), 4), int(scored[row].sum())
        finally:
            if self.threads is not None:
                torch.set_num_threads(previous)


# -- calibration ----------------------------------------------------------------------------
def clean_passages(count: int, *, seed: int = 0, skip: int = 0,
                   corpora: Sequence[str] = CALIBRATION_CORPORA) -> list[tuple[str, str]]:
    """``count`` clean ``(chunk id, text)`` pairs: a seeded shuffle of the corpora's first
    chunks (chunked as the KB chunks them), from position ``skip`` on.

    ``skip`` gives disjoint samples from one shuffle: calibration takes the first ``count``,
    a held-out check the next ones.
    """
    pool: list[tuple[str, str]] = []
    chunking = ChunkingConfig(strategy="window")
    for corpus in corpora:
        for document in load_named(corpus):
            first = chunk_document(document, chunking)[0]
            pool.append((f"{document.id}#0", first.text))
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    if skip + count > len(pool):
        raise InputError(f"asked for passages {skip}..{skip + count} of {len(pool)} clean ones")
    return [pool[i] for i in order[skip:skip + count]]


@dataclass(frozen=True)
class PerplexityCalibration:
    """A threshold chosen on clean passages only, and how it was chosen."""

    threshold: float
    percentile: float
    sample: int
    seed: int
    corpora: tuple[str, ...]
    model: str
    model_sha256: str
    max_tokens: int
    train_fpr: float
    clean_quantiles: dict[str, float]
    scoring: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["corpora"] = list(self.corpora)
        return payload


def calibrate_perplexity(scorer: PerplexityScorer | None = None, *, sample: int = 300,
                         seed: int = 0, percentile: float = 99.0,
                         corpora: Sequence[str] = CALIBRATION_CORPORA) -> PerplexityCalibration:
    """The ``percentile``-th perplexity of ``sample`` seeded clean passages (99 -> ~1% clean
    false positives). Reproducible: same data, seed and model give the same threshold."""
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 10:
        raise InputError(f"the calibration sample must be an integer >= 10, got {sample!r}")
    if not isinstance(percentile, int | float) or not math.isfinite(percentile) \
            or not 50.0 <= percentile < 100.0:
        raise InputError(f"percentile must be in [50, 100), got {percentile!r}")
    scorer = scorer or PerplexityScorer()
    passages = clean_passages(sample, seed=seed, corpora=corpora)
    before = ScoringStats(scorer.stats.computed, scorer.stats.cached, scorer.stats.seconds)
    scores = np.array(scorer.score([text for _, text in passages]))
    threshold = round(float(np.percentile(scores, percentile)), 4)
    spent = ScoringStats(scorer.stats.computed - before.computed,
                         scorer.stats.cached - before.cached,
                         scorer.stats.seconds - before.seconds)
    quantiles = {f"p{q}": round(float(np.percentile(scores, q)), 4)
                 for q in (0, 10, 50, 90, 99, 100)}
    return PerplexityCalibration(threshold, float(percentile), sample, seed, tuple(corpora),
                                 scorer.model, scorer.sha256, scorer.max_tokens,
                                 round(float(np.mean(scores > threshold)), 4), quantiles,
                                 spent.as_dict())


# -- the defense ----------------------------------------------------------------------------
class PerplexityFilter:
    """A candidate filter: drop passages whose perplexity is above the threshold (the
    composition reads ``pool`` candidates, default ``k``, and answers from the top ``k``
    survivors)."""

    name = "perplexity"

    def __init__(self, threshold: float | PerplexityCalibration, *,
                 scorer: PerplexityScorer | None = None):
        self.calibration = threshold if isinstance(threshold, PerplexityCalibration) else None
        value = threshold.threshold if self.calibration is not None else threshold
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value <= 0:
            raise InputError(f"the perplexity threshold must be a finite number > 0, "
                             f"got {value!r}")
        self.threshold = float(value)
        self.scorer = scorer or PerplexityScorer()
        if self.calibration is not None and self.calibration.model_sha256 != self.scorer.sha256:
            raise InputError("the calibration was made with a different language model "
                             f"({self.calibration.model}) than the scorer ({self.scorer.model})")

    def screen(self, run: Run, question: str, candidates: list[Candidate]) -> list[Candidate]:
        before = (self.scorer.stats.computed, self.scorer.stats.cached)
        scores = self.scorer.score([c.chunk.text for c in candidates])
        survivors = []
        for candidate, score in zip(candidates, scores, strict=True):
            if score > self.threshold:
                run.removed(candidate, f"perplexity {score:.2f} > threshold "
                                       f"{self.threshold:.2f}")
            else:
                survivors.append(candidate)
        run.trace.details[self.name] = {
            **self.scorer.describe(),
            "threshold": self.threshold,
            "calibration": self.calibration.as_dict() if self.calibration else None,
            "scores": [{"id": c.chunk_id, "perplexity": s, "removed": s > self.threshold}
                       for c, s in zip(candidates, scores, strict=True)],
            "computed": self.scorer.stats.computed - before[0],
            "cached": self.scorer.stats.cached - before[1],
        }
        return survivors
