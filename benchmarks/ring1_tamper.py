"""Ring 1's tampered-copy detector at ingest: tampered copies caught, revisions and clean
near-neighbours left alone.

Everything goes through the real ingest path (``KnowledgeBase.ingest`` with Ring 1 as the
screener) into copies of one base KB, with the real embedder; two shortcuts, neither read by a
verdict: each text is embedded once per run, and the BM25 index is not built.

The base KB holds the ground-truth passages of the split's PoisonedRAG-NQ targets (writer
``wikipedia``, neutral) and half of the split's clean corpora (writers ``corpus-0`` ..
``corpus-4``, seeded). Then, each population as one batch into its own copy of the base:

- tampered copies by ``mallory`` (untrusted): the ``gt-swap`` attack family (the passage with
  the answer swapped, ``trishield.eval.poisonedrag.attacks``), and each passage with one fact
  changed by a seeded generator: a number, a capitalised name (from another passage), a
  negation inserted;
- genuine revisions of the same passages by their own writer ``wikipedia`` (new ids: an id is
  never rewritten): a sentence added or removed, a word misspelt, reworded (function words,
  two sentences swapped), a number updated; and the same revisions by another writer
  ``editor`` (neutral), to show what the classifier alone says of them;
- clean near-neighbours: the other half of the clean corpora by ``newcomer`` (neutral), whose
  nearest stored documents are the same article's other paragraphs (SQuAD), the same
  entity's or template's passages (2WikiMultihopQA, HotpotQA, MuSiQue), by other writers.

Splits, drawn with their own seed :data:`SPLIT_SEED` (1): the 100 targets in two halves
(``poisonedrag_split(1)``), and each of the four clean corpora (HotpotQA, MuSiQue, SQuAD dev,
2WikiMultihopQA) in two halves by a seeded shuffle. ``--split train`` is the training halves
and adds the threshold sweep that chose ``TamperConfig``'s defaults; ``--split eval``
(default) is the held-out halves, read only to report. (The first split, seed 0 with whole
corpora per side, was retired: one rule of the detector, single capital letters as names, was
decided after looking at its held-out half; see docs/design/ring1-ingest-guard.md.) Prints
figures, never pass/fail.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ring1_tamper.py [--split train]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ring1_support import copy_kb, use_fast_kbs
from trishield.eval.calibration import (
    DEFAULT_CAP,
    WRITERS_PER_GENRE,
    ArrayNeighbourhood,
    EmbeddingCache,
    load_corpus,
    poisonedrag_split,
    writer_of,
)
from trishield.eval.calibration import SPLIT_SEED as CALIBRATION_SEED
from trishield.eval.poisonedrag.attacks import FAMILIES, Target, load_targets
from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import load_named
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL
from trishield.rings.ingest_guard import GuardVerdict, IngestGuard
from trishield.rings.tamper import TamperConfig, align, tokens
from trishield.text import sentences

CLEAN = ("hotpotqa", "musique", "squad-dev", "2wikimultihopqa")
SPLIT_SEED = 1
"""Seed of the train/eval split of the targets and of each clean corpus (0 was retired)."""
CORPUS_WRITERS = 5
_NUMBER = re.compile(r"(?<![\w.,])\d+(?![\w.,]\d)")
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?: [A-Z][a-z]+)*")
_VERB = re.compile(r"\b(is|was|are|were|has|had|can|will)\b")
_REWORDING = ((" which ", " that "), (" and ", " as well as "), (" but ", " yet "),
              (" also ", " too "), (" because ", " as "))


@dataclasses.dataclass(frozen=True)
class Pair:
    """One new document aligned with one stored neighbour (for the threshold sweep)."""

    similarity: float
    copied: float
    words: int
    facts: int
    wording: int


class Recorder:
    """Ring 1 at ingest, keeping every verdict and every aligned pair."""

    def __init__(self, depth: int) -> None:
        self.guard = IngestGuard()
        self.depth = depth
        self.verdicts: dict[str, GuardVerdict] = {}
        self.pairs: dict[str, list[Pair]] = {}

    def screen(self, ids, texts, *, tiers, embeddings, neighbourhood):
        verdicts = self.guard.screen(ids, texts, tiers=tiers, embeddings=embeddings,
                                     neighbourhood=neighbourhood)
        self.verdicts.update((v.subject, v) for v in verdicts)
        found = neighbourhood.nearest_documents(embeddings, self.depth)
        for doc_id, text, neighbours in zip(ids, texts, found, strict=True):
            new = tokens(text)
            pairs = []
            for neighbour in neighbours:
                alignment = align(tokens(neighbour.text), new)
                pairs.append(Pair(neighbour.similarity, alignment.copied, alignment.words,
                                  len(alignment.facts), len(alignment.wording)))
            self.pairs[doc_id] = pairs
        return verdicts


# -- the populations -------------------------------------------------------------------------

def _with(document: Document, suffix: str, text: str) -> Document:
    return Document(id=f"{document.id}@{suffix}", text=text)


def _change_number(text: str, rng: random.Random) -> str | None:
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return None
    match = rng.choice(numbers)
    value = int(match.group())
    new = value + rng.choice([-3, -2, -1, 1, 2, 3]) if value > 3 else value + rng.randint(1, 4)
    return text[:match.start()] + str(new) + text[match.end():]


def _change_name(text: str, names: Sequence[str], rng: random.Random) -> str | None:
    found = list(_NAME.finditer(text))
    if not found:
        return None
    match = rng.choice(found)
    other = rng.choice([n for n in names if n.lower() != match.group().lower()])
    return text[:match.start()] + other + text[match.end():]


def _negate(text: str, rng: random.Random) -> str | None:
    found = list(_VERB.finditer(text))
    if not found:
        return None
    match = rng.choice(found)
    return text[:match.end()] + " not" + text[match.end():]


def tampered(targets: Sequence[Target], originals: Sequence[Document],
             seed: int) -> dict[str, list[Document]]:
    rng = random.Random(seed)
    names = sorted({m.group() for d in originals for m in _NAME.finditer(d.text)})
    populations: dict[str, list[Document]] = {
        "gt-swap": [d for t in targets for d in FAMILIES["gt-swap"].poisons(t, seed)]}
    for kind, edit in (("number changed", lambda t: _change_number(t, rng)),
                       ("name changed", lambda t: _change_name(t, names, rng)),
                       ("negation inserted", lambda t: _negate(t, rng))):
        edited = [(d, edit(d.text)) for d in originals]
        populations[kind] = [Document(id=f"atk:{kind.split()[0]}:{d.id}", text=text)
                             for d, text in edited if text]
    return populations


def _misspell(text: str, rng: random.Random) -> str | None:
    long_words = [m for m in re.finditer(r"\b[a-z]{7,}\b", text)]
    if not long_words:
        return None
    match = rng.choice(long_words)
    word = match.group()
    at = rng.randrange(1, len(word) - 2)
    typo = word[:at] + word[at + 1] + word[at] + word[at + 2:]
    return text[:match.start()] + typo + text[match.end():]


def _reword(text: str) -> str | None:
    reworded = text
    for old, new in _REWORDING:
        reworded = reworded.replace(old, new, 1)
    parts = sentences(reworded)
    if len(parts) >= 3:
        parts[1], parts[2] = parts[2], parts[1]
        reworded = " ".join(parts)
    return reworded if reworded != text else None


def revisions(originals: Sequence[Document], seed: int) -> dict[str, list[Document]]:
    rng = random.Random(seed + 1)
    extra = [s for d in originals for s in sentences(d.text) if len(s.split()) >= 8]

    def add(text: str) -> str:
        return f"{text} {rng.choice(extra)}"

    def remove(text: str) -> str | None:
        parts = sentences(text)
        return " ".join(parts[:-1]) if len(parts) >= 2 else None

    edits = (("sentence added", add), ("sentence removed", remove),
             ("misspelt word", lambda t: _misspell(t, rng)), ("reworded", _reword),
             ("number updated", lambda t: _change_number(t, rng)))
    populations = {}
    for kind, edit in edits:
        edited = [(d, edit(d.text)) for d in originals]
        populations[kind] = [_with(d, kind.replace(" ", "-"), text)
                             for d, text in edited if text and text != d.text]
    return populations


def build_inputs(args: argparse.Namespace) -> dict[str, object]:
    train, evaluation = poisonedrag_split(SPLIT_SEED)
    wanted = set(train if args.split == "train" else evaluation)
    every_target = load_targets()
    targets = [t for t in every_target if t.id in wanted]
    originals = list({doc_id: Document(id=doc_id, text=text) for t in targets
                      for doc_id, text in t.gt_passages}.values())
    rng = random.Random(args.seed)
    base: list[Document] = []
    probes: dict[str, list[Document]] = {}
    # every target's passages out of the corpora, so that the two halves are complementary
    seen = {Document(id=doc_id, text=text).content_hash for t in every_target
            for doc_id, text in t.gt_passages}
    for name in CLEAN:
        corpus = [d for d in load_named(name) if d.content_hash not in seen]
        corpus = list({d.content_hash: d for d in corpus}.values())
        seen.update(d.content_hash for d in corpus)
        random.Random(f"{SPLIT_SEED}:{name}").shuffle(corpus)
        corpus = corpus[:len(corpus) // 2] if args.split == "train" else corpus[len(corpus) // 2:]
        rng.shuffle(corpus)
        corpus = corpus[:args.corpus_limit] if args.corpus_limit else corpus
        half = len(corpus) // 2
        base += corpus[:half]
        probes[name] = corpus[half:]
    return {"targets": targets, "originals": originals, "base": base, "probes": probes,
            "tampered": tampered(targets, originals, args.seed),
            "revisions": revisions(originals, args.seed)}


# -- running and counting --------------------------------------------------------------------

def build_base(work: Path, originals: list[Document], clean: list[Document],
               seed: int) -> Path:
    directory = work / "base"
    order = clean[:]
    random.Random(seed + 2).shuffle(order)
    with KnowledgeBase.open(directory, create=True) as kb:
        kb.ingest(originals, writer="wikipedia", tier="neutral")
        for number in range(CORPUS_WRITERS):
            kb.ingest(order[number::CORPUS_WRITERS], writer=f"corpus-{number}", tier="neutral")
    return directory


def ingest(base: Path, work: Path, name: str, documents: list[Document], *, writer: str,
           tier: str, depth: int) -> Recorder:
    directory = copy_kb(base, work, name)
    recorder = Recorder(depth)
    with KnowledgeBase.open(directory) as kb:
        kb.ingest(documents, tier=tier, writer=writer, guard=recorder)
    return recorder


def _hit(verdict: GuardVerdict) -> float:
    return max((h.weight for h in verdict.patterns if h.name == "tampered_copy"), default=0.0)


def count(recorder: Recorder, documents: Sequence[Document]) -> dict[str, object]:
    verdicts = [recorder.verdicts[d.id] for d in documents if d.id in recorder.verdicts]
    weights = [_hit(v) for v in verdicts]
    strong = TamperConfig().weight
    return {"n": len(verdicts),
            "tampered_copy (any)": _share(sum(w > 0 for w in weights), len(verdicts)),
            "  quarantine weight": _share(sum(w >= strong for w in weights), len(verdicts)),
            "  flag weight only": _share(sum(0 < w < strong for w in weights), len(verdicts)),
            "Ring 1 blocked": _share(sum(v.blocked for v in verdicts), len(verdicts)),
            "Ring 1 flagged": _share(sum(v.flagged for v in verdicts), len(verdicts))}


def evidence(recorder: Recorder) -> None:
    """The tampered_copy evidence of every document it fired on (where none should)."""
    for doc_id, verdict in recorder.verdicts.items():
        if _hit(verdict):
            print(f"  {doc_id}: " + "; ".join(r for r in verdict.reasons
                                             if r.startswith("tampered_copy")))


def _share(part: int, whole: int) -> str:
    return f"{part} ({part / whole:.1%})" if whole else "0"


def show(title: str, rows: dict[str, dict]) -> None:
    print(f"\n{title}")
    keys = list(next(iter(rows.values())))
    width = max(map(len, rows)) + 2
    print(" " * width + "".join(f"{key:>22}" for key in keys))
    for name, row in rows.items():
        print(f"{name:<{width}}" + "".join(f"{row[key]!s:>22}" for key in keys))


# -- the threshold sweep (training split) ----------------------------------------------------

def fires(pairs: Sequence[Pair], config: TamperConfig) -> bool:
    """Whether the detector would fire for a document with these aligned pairs."""
    return any(p.copied >= config.min_copied and p.words >= config.min_words
               and p.facts <= config.max_facts and (p.facts > 0 or p.wording > 0)
               for p in pairs)


GRID = {"min_copied": (0.7, 0.75, 0.8, 0.85, 0.9, 0.95),
        "min_words": (10, 20, 25, 30, 35, 40), "max_facts": (1, 2, 3)}


def genre_pairs(cache_dir: Path) -> dict[str, list[list[Pair]]]:
    """Each calibration genre's *training* windows (``trishield.eval.calibration``: the same
    windows, writers and simulated KB, embeddings from its cache in ``cache_dir``), each
    aligned with its stored neighbours by other writers as at ingest: template siblings
    (CMake's pages per language, licence variants) are the clean copies the Wikipedia corpora
    lack."""
    corpus = load_corpus(DEFAULT_CAP)
    cache = EmbeddingCache(DEFAULT_EMBEDDING_MODEL,
                           cache_dir / f"embeddings-{DEFAULT_EMBEDDING_MODEL}.npz")
    texts: list[str] = []
    writers: list[str] = []
    genres: list[str] = []
    for genre in corpus.genres:
        texts += [p.text for p in genre.train]
        writers += [writer_of(p.unit, genre.name, CALIBRATION_SEED) for p in genre.train]
        genres += [genre.name] * len(genre.train)
    stored = texts + corpus.truth
    stored_writers = writers + [f"wiki-{i % WRITERS_PER_GENRE}"
                                for i in range(len(corpus.truth))]
    vectors = cache.encode(stored)
    floor = min(GRID["min_copied"])
    found: dict[str, list[list[Pair]]] = {genre.name: [] for genre in corpus.genres}
    for writer in sorted(set(writers)):
        rows = [row for row, name in enumerate(writers) if name == writer]
        neighbourhood = ArrayNeighbourhood(vectors, stored_writers, writer, texts=stored)
        nearest = neighbourhood.nearest_documents(vectors[rows], TamperConfig().neighbours)
        for row, neighbours in zip(rows, nearest, strict=True):
            new = tokens(texts[row])
            pairs = []
            for neighbour in neighbours:
                old = tokens(neighbour.text)
                vocabulary = {t.word for t in old}
                if sum(t.word in vocabulary for t in new) < floor * len(new):
                    continue  # no setting of the grid could call it a copy
                alignment = align(old, new)
                pairs.append(Pair(neighbour.similarity, alignment.copied, alignment.words,
                                  len(alignment.facts), len(alignment.wording)))
            found[genres[row]].append(pairs)
    return found


def sweep(tampered_pairs: list[list[Pair]], clean_pairs: list[list[Pair]],
          genres: dict[str, list[list[Pair]]]) -> None:
    """Training recall and clean false-positive rates over the grid, and the rule's choice:
    at most 0.5% (the budget ``theta`` was chosen under) of the clean near-neighbours *and* of
    every calibration genre's training windows fired on; then the highest recall; then the
    most distinct facts (an attacker may change more than one); then the lowest
    ``min_copied`` (the loosest under the budget, as for ``theta``); then the highest
    ``min_words`` (the most cautious about short template sentences)."""
    copies = [max(pairs, key=lambda p: p.copied) for pairs in tampered_pairs if pairs]
    print("\nThreshold sweep on the training split: tampered copies caught / clean "
          "near-neighbours flagged (any weight) / worst genre's training windows flagged")
    print(f"  each tampered copy's best pair: copied share >= "
          f"{min(p.copied for p in copies):.3f}, copied words >= "
          f"{min(p.words for p in copies)}, distinct facts <= {max(p.facts for p in copies)}, "
          f"embedding similarity >= {min(p.similarity for p in copies):.3f}")
    print("  genre training windows: " + ", ".join(f"{name} {len(rows)}"
                                                   for name, rows in genres.items()))
    best = None
    for max_facts in GRID["max_facts"]:
        print(f"  max_facts={max_facts}; rows min_copied, columns min_words")
        print(" " * 8 + "".join(f"{w:>24}" for w in GRID["min_words"]))
        for min_copied in GRID["min_copied"]:
            cells = []
            for min_words in GRID["min_words"]:
                config = TamperConfig(min_copied=min_copied, min_words=min_words,
                                      max_facts=max_facts)
                recall = float(np.mean([fires(p, config) for p in tampered_pairs]))
                clean = float(np.mean([fires(p, config) for p in clean_pairs]))
                rates = {name: float(np.mean([fires(p, config) for p in rows]))
                         for name, rows in genres.items()}
                worst = max(rates.values())
                cells.append(f"{recall:.3f}/{clean:.2%}/{worst:.2%}")
                key = (clean <= 0.005 and worst <= 0.005, recall, max_facts, -min_copied,
                       min_words)
                if best is None or key > best[0]:
                    best = (key, config, recall, clean, rates)
            print(f"{min_copied:>8}" + "".join(f"{c:>24}" for c in cells))
    _, config, recall, clean, rates = best
    print(f"  chosen: min_copied={config.min_copied}, min_words={config.min_words}, "
          f"max_facts={config.max_facts} (training recall {recall:.3f}, clean {clean:.2%}; "
          + ", ".join(f"{name} {rate:.2%}" for name, rate in rates.items()) + ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("train", "eval"), default="eval")
    parser.add_argument("--corpus-limit", type=int, default=0,
                        help="documents read per clean corpus (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calibration-cache", type=Path, default=Path(".trishield/calibration"),
                        help="--split train: the calibration's --out (its embedding cache; "
                             "missing embeddings are computed and added)")
    args = parser.parse_args()
    started = time.perf_counter()
    use_fast_kbs()
    inputs = build_inputs(args)
    depth = TamperConfig().neighbours
    print(f"ring1_tamper: {' '.join(sys.argv[1:]) or '(defaults)'}; split {args.split}: "
          f"{len(inputs['targets'])} targets, {len(inputs['originals'])} ground-truth "
          f"passages; clean: the {args.split} half of {', '.join(CLEAN)}; split seed "
          f"{SPLIT_SEED}; TamperConfig {TamperConfig()}")
    with tempfile.TemporaryDirectory(prefix="ring1-tamper-") as temporary:
        work = Path(temporary)
        base = build_base(work, inputs["originals"], inputs["base"], args.seed)
        print(f"  base KB built ({time.perf_counter() - started:.0f} s)", flush=True)
        attacks = [d for docs in inputs["tampered"].values() for d in docs]
        attacked = ingest(base, work, "tampered", attacks, writer="mallory", tier="untrusted",
                          depth=depth)
        show("Tampered copies by 'mallory' (untrusted) of passages by 'wikipedia' (neutral)",
             {kind: count(attacked, docs) for kind, docs in inputs["tampered"].items()})
        edits = [d for docs in inputs["revisions"].values() for d in docs]
        results = {}
        for writer in ("wikipedia", "editor"):
            results[writer] = ingest(base, work, f"revised-{writer}", edits, writer=writer,
                                     tier="neutral", depth=depth)
            show(f"Revisions by {writer!r} (neutral)"
                 + (" - the same writer" if writer == "wikipedia" else
                    " - ANOTHER writer: the classifier alone"),
                 {kind: count(results[writer], docs)
                  for kind, docs in inputs["revisions"].items()}
                 | {"all": count(results[writer], edits)})
            if writer == "wikipedia":
                evidence(results[writer])
        probes = [d for docs in inputs["probes"].values() for d in docs]
        clean = ingest(base, work, "clean", probes, writer="newcomer", tier="neutral",
                       depth=depth)
        show("Clean near-neighbours by 'newcomer' (neutral), other writers' documents stored",
             {name: count(clean, docs) for name, docs in inputs["probes"].items()}
             | {"all": count(clean, probes)})
        evidence(clean)
        if args.split == "train":
            sweep([attacked.pairs[d.id] for d in attacks],
                  [clean.pairs[d.id] for d in probes if d.id in clean.pairs],
                  genre_pairs(args.calibration_cache))
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
