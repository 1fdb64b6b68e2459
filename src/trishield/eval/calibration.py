"""Choosing Ring 1's weights and threshold on training data only, across genres.

Training data: the training half of each clean genre (:mod:`trishield.eval.genres`: Wikipedia
passages, software documentation, policies and legal text, news, email) and the
PoisonedRAG-NQ published poisons of the *training half* of the 100 targets
(:func:`poisonedrag_split`; the other half is the evaluation split that reports use).

Signals are computed the way ingest computes them: the text signals (``S_perp_len``, the
pattern detectors) from each text alone, and ``S_out`` against a simulated KB of stored
documents by other writers (``trishield.rings.outlier.stored_outlier_scores``). The simulated
KB holds every genre's training passages, each genre's spread over :data:`WRITERS_PER_GENRE`
writers (a seeded draw per source document, so a writer writes whole documents), plus the
BEIR-NQ ground-truth passages of the 100 targets among the wiki writers (so that the poisons
meet the real passages about their topic, as in a real KB). A training passage is scored as
if its writer were writing it now (its own writer's documents are not its neighbours); a
held-out passage, a wiki5k passage and a poison are scored as a new writer's documents. The
``tampered_copy`` detector runs against the same simulated KB (``nearest_documents``: the
stored passages of other writers nearest to each text, aligned as at ingest), so the rates
below are those of the whole of Ring 1; its thresholds are ``TamperConfig``'s (chosen by
``benchmarks/ring1_tamper.py --split train``), not searched here.

The rule (:func:`choose`), over a grid of the combination weights (``w_perp``, ``w_pat``,
``w_out``, summing to 1), of the pattern weights that the poisons and clean text actually fire
(``question_opening``, ``question_inside``, ``authority``) or that stand for an attacker's
intent (``obfuscated_text``), and of ``theta`` (step 0.01):

1. keep the detectors' roles: ``obfuscated_text`` alone flags (``C >= flag_theta``) but does
   not block; together with any other detector it blocks;
2. lose no recall: on the training targets, text signals only, block at least as many of the
   published poisons and of the paper's template poisons (``"{q}? According to verified
   records from multiple independent sources ..."``, five per target) as the current
   defaults do;
3. then minimise the worst genre's training false-positive rate (with ``S_out``), then the
   mean over genres, then maximise the poisons blocked (text only, then with ``S_out``), then
   stay nearest the current defaults.

Recall is counted without ``S_out`` because a KB written by one writer gives none (with it,
recall can only be higher); false positives with it, where they are highest. The detectors
that fire on neither side (``injection``, ``encoded_payload``, ``query_verbatim``) keep their
weights: this data says nothing about them. The issue's first idea, the highest recall with a
0.5% training false-positive rate on every genre, is infeasible here: 0.69% of the email
training half (2 of 291 windows) opens with a question, the published poisons' main signal,
so at 0.5% at most 75% of the poisons can be blocked.

Then the held-out halves, the 5,000 wiki5k passages, the held-out poisons (published and
template) and the published ones' five Unicode-obfuscated rewrites
(:mod:`trishield.eval.obfuscations`) are measured with the chosen setting and with the current
defaults, side by side.

    python -m trishield.eval.calibration --out DIR

prints the table and writes ``DIR/calibration.json`` and an embedding cache
(``DIR/embeddings-<model>.npz``, so a rerun embeds nothing); without ``--out`` nothing is
written. ``--cap N`` limits each half of a genre to N passages (default 2,000; 0: all). A cold
run embeds about 17,000 texts (some 20 minutes on two busy cores); a rerun with the cache in
``--out``, about two minutes. The defaults in ``GuardConfig`` were this rule's fixed point
until the detector changes that followed (``authority_once``, the title and *have* question
rules, ``tampered_copy`` in the calibration): run from them now, it picks ``w_pat`` 0.7,
``w_out`` 0.1, ``theta`` 0.33, ``question_inside`` 0.15, ``obfuscated_text`` 0.4 (email's
training false positives 5 -> 3 of 291, the same training recall). The defaults stay until
that setting is measured on the other attack families (docs/design/ring1-ingest-guard.md).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from trishield.eval.genres import GENRES, Genre, load_genre
from trishield.eval.obfuscations import OBFUSCATIONS
from trishield.kb.datasets import DATASETS, load_named
from trishield.kb.screening import ReferenceSample, StoredNeighbour
from trishield.kb.screening.reference_draw import share_per_writer, writer_sample
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, load_embedder
from trishield.rings.ingest_guard import GuardConfig, perplexity_score
from trishield.rings.outlier import stored_outlier_scores
from trishield.rings.patterns import PatternWeights, detect_patterns
from trishield.rings.tamper import TamperConfig, tampered_copies

SPLIT_SEED = 0
WRITERS_PER_GENRE = 5
TARGET_FPR = 0.01
POISON_SETS = ("poisons", "template")
"""The training poisons: the published PoisonedRAG-NQ texts and the paper's template."""
DEFAULT_CAP = 2000
DETECTORS = tuple(PatternWeights.__dataclass_fields__)
TUNED = ("question_opening", "question_inside", "authority", "obfuscated_text")
GRID = {
    "w_perp": (0.0, 0.1, 0.2, 0.3),
    "w_out": (0.0, 0.1, 0.2, 0.3),
    "question_opening": (0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    "question_inside": (0.1, 0.15, 0.2, 0.25, 0.3, 0.4),
    "authority": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7),
    "obfuscated_text": (0.2, 0.25, 0.3, 0.35, 0.4, 0.45),
}
THETAS = np.round(np.arange(0.05, 1.0001, 0.01), 2)


def poisonedrag_split(seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(training target ids, evaluation target ids): a seeded half/half split of the 100."""
    path = DATASETS["poisonedrag-nq"].verified_path()
    targets = sorted(json.loads(path.read_text()), key=lambda t: int(t.removeprefix("test")))
    shuffled = targets[:]
    random.Random(seed).shuffle(shuffled)
    half = len(shuffled) // 2
    return sorted(shuffled[:half], key=targets.index), sorted(shuffled[half:], key=targets.index)


# -- signals ---------------------------------------------------------------------------------


@dataclass
class Signals:
    """Ring 1's inputs for a set of texts: everything but the weights."""

    s_perp_len: np.ndarray
    fired: np.ndarray
    """(n, detectors) booleans, columns in :data:`DETECTORS` order."""
    s_out: np.ndarray
    """0 where no ``S_out`` could be measured."""
    tamper: np.ndarray | None = None
    """The ``tampered_copy`` hit's weight (0: none) as ingest finds it against the simulated
    KB; its weights are ``TamperConfig``'s, not searched, so it is kept as a weight."""

    def __len__(self) -> int:
        return len(self.s_perp_len)

    def combined(self, setting: Setting, *, with_out: bool = True) -> np.ndarray:
        weights = np.array([setting.patterns.get(name, getattr(PatternWeights(), name))
                            for name in DETECTORS])
        remaining = np.prod(np.where(self.fired, 1.0 - weights, 1.0), axis=1)
        if self.tamper is not None:
            remaining = remaining * (1.0 - self.tamper)
        c = setting.w_perp * self.s_perp_len + setting.w_pat * (1.0 - remaining)
        return c + setting.w_out * self.s_out if with_out else c


def text_signals(texts: Sequence[str], s_out: np.ndarray | None = None,
                 tamper: np.ndarray | None = None) -> Signals:
    """``S_perp_len`` and the fired detectors (no query: as at ingest); ``S_out`` and the
    ``tampered_copy`` weights, where given, come from the neighbourhood."""
    fired = np.zeros((len(texts), len(DETECTORS)), dtype=bool)
    for row, text in enumerate(texts):
        for hit in detect_patterns(text):
            fired[row, DETECTORS.index(hit.name)] = True
    perp = np.array([perplexity_score(text)["s_perp_len"] for text in texts])
    return Signals(perp, fired, np.zeros(len(texts)) if s_out is None else s_out, tamper)


@dataclass(frozen=True)
class Setting:
    """Weights and threshold of Ring 1, as the calibration searches them."""

    w_perp: float
    w_pat: float
    w_out: float
    theta: float
    patterns: dict[str, float]

    @classmethod
    def of(cls, config: GuardConfig) -> Setting:
        return cls(config.w_perp, config.w_pat, config.w_out, config.theta,
                   asdict(config.patterns))

    def config(self) -> GuardConfig:
        return GuardConfig(w_perp=self.w_perp, w_pat=self.w_pat, w_out=self.w_out,
                           theta=self.theta,
                           patterns=PatternWeights(**{**asdict(PatternWeights()),
                                                      **self.patterns}))

    def as_dict(self) -> dict[str, object]:
        return {"w_perp": self.w_perp, "w_pat": self.w_pat, "w_out": self.w_out,
                "theta": self.theta, "patterns": dict(self.patterns)}


# -- a KB of stored documents, in memory -----------------------------------------------------


class ArrayNeighbourhood:
    """:class:`~trishield.kb.screening.Neighbourhood` over vectors in memory, built the way
    ``trishield.kb.screening.neighbourhood.StoredNeighbourhood`` is (same per-writer cap and sample
    size; one vector per document, as each passage here is one chunk).

    With ``texts`` it also answers :meth:`nearest_documents`, so the ``tampered_copy``
    detector runs as at ingest; each stored passage is document ``stored:<row>`` of tier
    ``tiers[row]`` (``neutral`` by default)."""

    def __init__(self, vectors: np.ndarray, writers: Sequence[str], writer: str, *,
                 seed: int = 0, texts: Sequence[str] | None = None,
                 tiers: Sequence[str] | None = None):
        if texts is not None and len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts for {len(vectors)} stored vectors")
        if tiers is not None and len(tiers) != len(vectors):
            raise ValueError(f"{len(tiers)} tiers for {len(vectors)} stored vectors")
        if len(writers) != len(vectors):
            raise ValueError(f"{len(writers)} writers for {len(vectors)} stored vectors")
        self.vectors = vectors
        self.writers = np.asarray(writers, dtype=object)
        self.texts = texts
        self.tiers = tiers
        self._writer = writer
        self._seed = seed

    @property
    def writer(self) -> str:
        return self._writer

    def _mask(self, also_excluding: str | None) -> np.ndarray:
        mask = self.writers != self._writer
        return mask & (self.writers != also_excluding) if also_excluding else mask

    def document_count(self, *, also_excluding: str | None = None) -> int:
        return int(self._mask(also_excluding).sum())

    def nearest(self, vectors: np.ndarray, k: int, *,
                also_excluding: str | None = None) -> np.ndarray:
        stored = self.vectors[self._mask(also_excluding)]
        result = np.full((len(vectors), k), np.nan, dtype=np.float32)
        depth = min(k, len(stored))
        for start in range(0, len(vectors), 1024):
            similarity = vectors[start:start + 1024] @ stored.T
            top = -np.sort(-similarity, axis=1)[:, :depth]
            result[start:start + 1024, :depth] = top
        return result

    def reference(self) -> ReferenceSample:
        names = sorted(set(self.writers) - {self._writer})
        if not names:
            return ReferenceSample(np.zeros((0, self.vectors.shape[1]), np.float32), ())
        per_writer = share_per_writer(len(names))
        rows: list[int] = []
        writers: list[str] = []
        for name in names:
            # the KB's draw (kb/screening/reference_draw.py), a row standing for a document's row id
            indices = writer_sample(np.flatnonzero(self.writers == name), name, per_writer,
                                    self._seed)
            rows += indices.tolist()
            writers += [name] * len(indices)
        return ReferenceSample(self.vectors[rows], tuple(writers))

    def nearest_documents(self, vectors: np.ndarray, k: int) -> list[list[StoredNeighbour]]:
        """The stored passages by other writers nearest to each row, best first (one chunk
        per document here, so each of the ``k`` nearest chunks is its own document)."""
        if self.texts is None:
            raise ValueError("this neighbourhood was built without the stored texts")
        rows = np.flatnonzero(self._mask(None))
        found: list[list[StoredNeighbour]] = []
        for start in range(0, len(vectors), 1024):
            similarity = vectors[start:start + 1024] @ self.vectors[rows].T
            depth = min(k, len(rows))
            top = np.argsort(-similarity, axis=1, kind="stable")[:, :depth]
            for line, picks in zip(similarity, top, strict=True):
                found.append([StoredNeighbour(
                    doc_id=f"stored:{rows[p]}", chunk_id=f"stored:{rows[p]}#0",
                    writer=str(self.writers[rows[p]]),
                    tier="neutral" if self.tiers is None else self.tiers[rows[p]],
                    text=self.texts[rows[p]], similarity=float(line[p])) for p in picks])
        return found


def writer_of(unit: str, genre: str, seed: int) -> str:
    """The simulated KB's writer of a unit (one of :data:`WRITERS_PER_GENRE` per genre, a
    seeded draw per unit, so that a writer writes whole documents)."""
    digest = hashlib.sha256(f"{seed}:{unit}".encode()).digest()
    return f"{genre}-{digest[0] % WRITERS_PER_GENRE}"


class EmbeddingCache:
    """Embeddings by sha256 of the text, kept in one ``.npz`` file when a path is given."""

    def __init__(self, model: str, path: Path | None):
        self.model = model
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        self.embedder = None
        if path is not None and path.is_file():
            with np.load(path) as stored:
                self.vectors = dict(zip(stored["keys"].tolist(), stored["vectors"],
                                        strict=True))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if self.key(t) not in self.vectors))
        if missing:
            if self.embedder is None:
                self.embedder = load_embedder(self.model)
            for start in range(0, len(missing), 512):
                part = missing[start:start + 512]
                encoded = self.embedder.encode(part)
                self.vectors.update(zip(map(self.key, part), encoded, strict=True))
                self.save()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.vectors[self.key(t)] for t in texts]).astype(np.float32)

    def save(self) -> None:
        if self.path is None:
            return
        keys = sorted(self.vectors)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp.npz")
        np.savez(temporary, keys=np.array(keys), vectors=np.stack([self.vectors[k]
                                                                   for k in keys]))
        temporary.replace(self.path)


# -- the data --------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Every set the calibration scores, as texts, with their signals once computed."""

    genres: list[Genre]
    train_poisons: list[str]
    held_poisons: list[str]
    train_templates: list[str]
    held_templates: list[str]
    truth: list[str]
    wiki5k: list[str]


def load_corpus(cap: int | None, genres: Sequence[str] = GENRES) -> Corpus:
    # imported here: the benchmark's scoring imports this module
    from trishield.eval.poisonedrag.attacks import FAMILIES, load_targets

    train_targets, held_targets = poisonedrag_split()
    poisons = [d for d in load_named("poisonedrag-nq") if d.id.startswith("poison:")]
    targets = {target.id: target for target in load_targets()}

    def templates(ids: Sequence[str]) -> list[str]:
        return [d.text for i in ids for d in FAMILIES["template"].poisons(targets[i], 0)]

    return Corpus(
        genres=[load_genre(name, cap=cap) for name in genres],
        train_poisons=[d.text for d in poisons if d.id.split(":")[1] in set(train_targets)],
        held_poisons=[d.text for d in poisons if d.id.split(":")[1] in set(held_targets)],
        train_templates=templates(train_targets),
        held_templates=templates(held_targets),
        truth=[d.text for d in load_named("poisonedrag-nq-gt")],
        wiki5k=[d.text for d in load_named("wiki5k")],
    )


def measure(corpus: Corpus, cache: EmbeddingCache) -> dict[str, Signals]:
    """Every set's signals; ``S_out`` from the simulated KB (see the module docstring)."""
    stored_texts: list[str] = []
    stored_writers: list[str] = []
    for genre in corpus.genres:
        stored_texts += [p.text for p in genre.train]
        stored_writers += [writer_of(p.unit, genre.name, SPLIT_SEED) for p in genre.train]
    wiki_writers = [f"wiki-{i % WRITERS_PER_GENRE}" for i in range(len(corpus.truth))]
    vectors = cache.encode(stored_texts + corpus.truth)
    writers = stored_writers + wiki_writers
    every_text = stored_texts + corpus.truth
    # a training passage, as if its writer were writing it now
    train_out = np.zeros(len(stored_texts))
    train_tamper = np.zeros(len(stored_texts))
    for writer in sorted(set(stored_writers)):
        rows = np.flatnonzero(np.asarray(stored_writers, dtype=object) == writer)
        neighbourhood = ArrayNeighbourhood(vectors, writers, writer, texts=every_text)
        scores = stored_outlier_scores(vectors[rows], neighbourhood)
        if scores.scores is not None:
            train_out[rows] = scores.scores
        train_tamper[rows] = _tamper_weights([f"stored:{row}" for row in rows],
                                             [stored_texts[row] for row in rows],
                                             vectors[rows], neighbourhood)
    # everything else as a new writer's documents
    newcomer: dict[str, list[str]] = {f"held:{g.name}": [p.text for p in g.held_out]
                                      for g in corpus.genres}
    newcomer["poisons:train"] = corpus.train_poisons
    newcomer["poisons:held"] = corpus.held_poisons
    newcomer["template:train"] = corpus.train_templates
    newcomer["template:held"] = corpus.held_templates
    for name, rewrite in OBFUSCATIONS.items():
        newcomer[f"poisons:held:{name}"] = [rewrite(t) for t in corpus.held_poisons]
    newcomer["wiki5k"] = corpus.wiki5k
    texts = [t for group in newcomer.values() for t in group]
    new_vectors = cache.encode(texts)
    neighbourhood = ArrayNeighbourhood(vectors, writers, "calibration-newcomer",
                                       texts=every_text)
    outliers = stored_outlier_scores(new_vectors, neighbourhood)
    new_out = np.zeros(len(texts)) if outliers.scores is None else outliers.scores
    new_tamper = _tamper_weights([f"new:{i}" for i in range(len(texts))], texts, new_vectors,
                                 neighbourhood)
    signals: dict[str, Signals] = {}
    start = 0
    for genre in corpus.genres:
        n = len(genre.train)
        signals[f"train:{genre.name}"] = text_signals([p.text for p in genre.train],
                                                      train_out[start:start + n],
                                                      train_tamper[start:start + n])
        start += n
    start = 0
    for name, group in newcomer.items():
        end = start + len(group)
        signals[name] = text_signals(group, new_out[start:end], new_tamper[start:end])
        start = end
    return signals


def _tamper_weights(ids: list[str], texts: list[str], vectors: np.ndarray,
                    neighbourhood: ArrayNeighbourhood) -> np.ndarray:
    """The ``tampered_copy`` weight of each text as ingest computes it (every writer
    ``neutral``: equal tiers, so a fact changed in a copy weighs the full ``weight``)."""
    copies = tampered_copies(ids, texts, ["neutral"] * len(ids), vectors, neighbourhood,
                             TamperConfig())
    return np.array([0.0 if copy is None else copy.weight for copy in copies])


# -- the choice ------------------------------------------------------------------------------


def _paired_obfuscation(setting: Setting) -> float:
    """The lowest ``C`` of ``obfuscated_text`` together with one other detector."""
    weights = setting.patterns
    other = min(weights[name] for name in DETECTORS if name != "obfuscated_text")
    return setting.w_pat * (1.0 - (1.0 - weights["obfuscated_text"]) * (1.0 - other))


def _blocked_counts(combined: np.ndarray) -> np.ndarray:
    """How many of ``combined`` are at or over each of :data:`THETAS`."""
    ordered = np.sort(combined)
    return len(ordered) - np.searchsorted(ordered, THETAS - 1e-9, side="left")


def choose(signals: dict[str, Signals], genres: Sequence[str], current: Setting | None = None
           ) -> tuple[Setting, list[dict[str, object]]]:
    """The rule of the module docstring, from ``current`` (by default ``GuardConfig()``'s
    setting); returns the winner and the best few candidates."""
    clean = [signals[f"train:{g}"] for g in genres]
    families = [signals[f"{family}:train"] for family in POISON_SETS]
    current = current or Setting.of(GuardConfig())
    floors = [int(np.sum(f.combined(current, with_out=False) >= current.theta))
              for f in families]
    flag_theta = GuardConfig().flag_theta
    candidates = []
    for w_perp, w_out, *tuned in itertools.product(
            GRID["w_perp"], GRID["w_out"], *(GRID[name] for name in TUNED)):
        w_pat = round(1.0 - w_perp - w_out, 2)
        patterns = {**current.patterns, **dict(zip(TUNED, tuned, strict=True))}
        trial = Setting(w_perp, w_pat, w_out, current.theta, patterns)
        alone = w_pat * patterns["obfuscated_text"]
        if alone < flag_theta:
            continue  # obfuscated text alone must flag ...
        # ... and not block, but block together with any other detector
        allowed = (alone + 1e-9 < THETAS) & (_paired_obfuscation(trial) + 1e-9 >= THETAS)
        caught = [_blocked_counts(f.combined(trial, with_out=False)) for f in families]
        for count, floor in zip(caught, floors, strict=True):
            allowed &= count >= floor
        if not allowed.any():
            continue
        false = np.array([_blocked_counts(c.combined(trial)) / len(c) for c in clean])
        worst, mean = false.max(axis=0), false.mean(axis=0)
        recall = sum(caught)
        with_out = sum(_blocked_counts(f.combined(trial)) for f in families)
        for index in np.flatnonzero(allowed):
            theta = float(THETAS[index])
            distance = (abs(w_perp - current.w_perp) + abs(w_out - current.w_out)
                        + abs(theta - current.theta)
                        + sum(abs(patterns[n] - current.patterns[n]) for n in TUNED))
            candidates.append((float(worst[index]), round(float(mean[index]), 6),
                               -int(recall[index]), -int(with_out[index]), round(distance, 4),
                               Setting(w_perp, w_pat, w_out, theta, patterns)))
    if not candidates:
        raise ValueError("no setting keeps the detectors' roles and the current recall")
    candidates.sort(key=lambda row: row[:5])
    table = [{"worst_genre_fpr": row[0], "mean_genre_fpr": row[1],
              "poisons_blocked_text_only": -row[2], "poisons_blocked_with_s_out": -row[3],
              "distance_from_defaults": row[4], **row[5].as_dict()} for row in candidates[:10]]
    return candidates[0][5], table


# -- the report ------------------------------------------------------------------------------


def _row(signals: Signals, setting: Setting) -> dict[str, object]:
    n = len(signals)
    text_only = int(np.sum(signals.combined(setting, with_out=False) >= setting.theta))
    with_out = int(np.sum(signals.combined(setting) >= setting.theta))
    tampered = 0 if signals.tamper is None else int(np.sum(signals.tamper > 0))
    return {"n": n, "text_only": text_only, "with_s_out": with_out,
            "text_only_rate": text_only / max(1, n), "with_s_out_rate": with_out / max(1, n),
            "tampered_copy_fired": tampered}


def blocked_detail(texts: Sequence[str], signals: Signals, setting: Setting,
                   limit: int = 40) -> list[dict[str, object]]:
    """What blocked each blocked text (with ``S_out``): the fired detectors, the scores and
    the text's opening; reported for the *training* halves, the only ones a fix may read."""
    combined = signals.combined(setting)
    found = []
    for row in np.flatnonzero(combined >= setting.theta)[:limit]:
        fired = [name for name, on in zip(DETECTORS, signals.fired[row], strict=True) if on]
        if signals.tamper is not None and signals.tamper[row] > 0:
            fired.append(f"tampered_copy({signals.tamper[row]})")
        found.append({"c": round(float(combined[row]), 4), "fired": fired,
                      "s_out": round(float(signals.s_out[row]), 4),
                      "s_perp_len": round(float(signals.s_perp_len[row]), 4),
                      "opening": texts[row][:160]})
    return found


def evaluate(signals: dict[str, Signals], genres: Sequence[str],
             setting: Setting) -> dict[str, object]:
    return {
        "setting": setting.as_dict(),
        "train_fp": {g: _row(signals[f"train:{g}"], setting) for g in genres},
        "train_recall": {"published": _row(signals["poisons:train"], setting),
                         "template": _row(signals["template:train"], setting)},
        "held_out_fp": {g: _row(signals[f"held:{g}"], setting) for g in genres},
        "wiki5k_fp": _row(signals["wiki5k"], setting),
        "held_out_recall": {"plain": _row(signals["poisons:held"], setting)} | {
            name: _row(signals[f"poisons:held:{name}"], setting) for name in OBFUSCATIONS},
        "held_out_template_recall": _row(signals["template:held"], setting),
    }


def calibrate(*, cap: int | None = DEFAULT_CAP, out: Path | None = None,
              genres: Sequence[str] = GENRES) -> dict[str, object]:
    corpus = load_corpus(cap, genres)
    cache = EmbeddingCache(DEFAULT_EMBEDDING_MODEL,
                           out / f"embeddings-{DEFAULT_EMBEDDING_MODEL}.npz" if out else None)
    signals = measure(corpus, cache)
    names = [g.name for g in corpus.genres]
    chosen, candidates = choose(signals, names)
    current = Setting.of(GuardConfig())
    return {
        "rule": "keep obfuscated_text's role (alone: flag, not block; with any other "
                "detector: block) and the current defaults' training recall (text only) on "
                "the published and the template poisons; then the lowest worst-genre training "
                "FP rate (with S_out), the lowest mean genre FP rate, the most poisons blocked "
                "(text only, then with S_out), the setting nearest the defaults",
        "target_fpr": TARGET_FPR,
        "cap_per_half": cap,
        "embedding_model": DEFAULT_EMBEDDING_MODEL,
        "genres": {g.name: g.summary() for g in corpus.genres},
        "corpus_sha256": hashlib.sha256("".join(f"{g.name}\t{g.digest}\n"
                                                for g in corpus.genres).encode()).hexdigest(),
        "poisons": {"train": len(corpus.train_poisons), "held_out": len(corpus.held_poisons)},
        "wiki5k": len(corpus.wiki5k),
        "chosen": evaluate(signals, names, chosen),
        "current": evaluate(signals, names, current),
        "train_blocked_by_chosen": {
            g.name: blocked_detail([p.text for p in g.train], signals[f"train:{g.name}"],
                                   chosen) for g in corpus.genres},
        "candidates": candidates,
    }


def _cell(row: dict[str, object]) -> str:
    tampered = f" [t{row['tampered_copy_fired']}]" if row.get("tampered_copy_fired") else ""
    return f"{row['text_only']}/{row['with_s_out']} of {row['n']}{tampered}"


def table(report: dict[str, object]) -> str:
    """The report as text: one column per setting (current defaults, chosen)."""
    chosen, current = report["chosen"], report["current"]
    lines = [f"rule: {report['rule']}", "",
             f"clean corpus sha256 {report['corpus_sha256']} (windows per half, capped at "
             f"{report['cap_per_half']}):"]
    for name, genre in report["genres"].items():
        found = ", ".join(source for source, row in genre["sources"].items() if row["found"])
        lines.append(f"  {name:<14} train {genre['train']:>5}  held-out {genre['held_out']:>5}"
                     f"  sha256 {genre['sha256'][:16]}  ({found})")
    lines.append("")
    for name, result in (("current", current), ("chosen", chosen)):
        setting = result["setting"]
        patterns = ", ".join(f"{k}={setting['patterns'][k]}" for k in TUNED)
        lines.append(f"{name:<8} w_perp={setting['w_perp']} w_pat={setting['w_pat']} "
                     f"w_out={setting['w_out']} theta={setting['theta']}; {patterns}")
    lines += ["", "blocked, text only / with S_out (C >= theta); [tN]: tampered_copy fired on "
              "N (both columns include it)",
              f"{'set':<36}{'current':>24}{'chosen':>24}"]

    def add(label: str, left: dict, right: dict) -> None:
        lines.append(f"{label:<36}{_cell(left):>24}{_cell(right):>24}")

    for genre in report["genres"]:
        add(f"train FP {genre}", current["train_fp"][genre], chosen["train_fp"][genre])
    for family in current["train_recall"]:
        add(f"train recall {family}", current["train_recall"][family],
            chosen["train_recall"][family])
    for genre in report["genres"]:
        add(f"held-out FP {genre}", current["held_out_fp"][genre],
            chosen["held_out_fp"][genre])
    add("wiki5k FP", current["wiki5k_fp"], chosen["wiki5k_fp"])
    for variant in current["held_out_recall"]:
        add(f"held-out recall {variant}", current["held_out_recall"][variant],
            chosen["held_out_recall"][variant])
    add("held-out recall template", current["held_out_template_recall"],
        chosen["held_out_template_recall"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=DEFAULT_CAP,
                        help="passages per half of a genre at most (0: all)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write calibration.json and the embedding cache here")
    parser.add_argument("--genres", nargs="+", default=list(GENRES), choices=GENRES)
    arguments = parser.parse_args(argv)
    report = calibrate(cap=arguments.cap or None, out=arguments.out, genres=arguments.genres)
    print(table(report))
    if arguments.out:
        (arguments.out / "calibration.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
