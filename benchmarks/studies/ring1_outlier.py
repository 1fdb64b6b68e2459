"""Ring 1's outlier score at ingest: batch-cut agreement, flood robustness, poison recall.

Compares, in one run and side by side, Ring 1 at ingest as it was at commit 1534c52 (``old``:
``S_out`` against a seeded sample of stored chunks, plus the incoming batch while the KB holds
fewer than 2,000 chunks) with Ring 1 as it is now (``new``: ``S_out`` against the documents
stored by other writers, writer-balanced baseline; ``trishield.rings.outlier``):

(a) batch agreement: the same poisons + clean passages ingested by one writer as one batch
    vs one at a time, into copies of the same base KB: share of documents with the same
    verdict, and the median ``S_out`` of the poisons either way;
(b) flooding: the clean false-positive rate of clean SQuAD paragraphs ingested one at a time by
    neutral writers, before vs after one writer stores 500 near-identical tiny documents;
(c) poison recall at ingest (patterns + repetition + ``S_out``, the full ring) of the published
    PoisonedRAG-NQ poisons ingested as one batch by an untrusted attacker, plus the recall the
    ring would have without ``S_out``.

The base KB (default 1,000 documents) is half wiki5k passages (first the ground-truth passages
of the PoisonedRAG-NQ targets, then NQ-open and SQuADShifts ones), half SQuAD dev paragraphs,
spread over five writers (seeded), written without screening (a KB that existed before). The
old design's failures show most on a small KB (``--base 100``), where a batch or a flood
outweighs the stored sample. Everything runs with the real embedder
in a temporary directory, with the shortcuts of ``ring1_support`` (each text embedded once
per run, no BM25 index; neither is read by a verdict). Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# the helpers these studies share with the benchmarks (wiki5k_questions.py, scale.py,
# ...) are in benchmarks/, one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ring1_support import copy_kb, use_fast_kbs
from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import load_named
from trishield.kb.screening import Neighbourhood
from trishield.rings.ingest_guard import GuardVerdict, IngestGuard
from trishield.rings.outlier import outlier_scores

BASE_WRITERS = 5
OLD_REFERENCE_SIZE = 2000


class Recorder:
    """Wraps a screener and keeps every verdict (an ingest report lists the blocked ones)."""

    def __init__(self, screener) -> None:
        self.screener = screener
        self.verdicts: dict[str, GuardVerdict] = {}

    def screen(self, ids, texts, *, tiers, embeddings, neighbourhood):
        verdicts = self.screener.screen(ids, texts, tiers=tiers, embeddings=embeddings,
                                        neighbourhood=neighbourhood)
        self.verdicts.update((v.subject, v) for v in verdicts)
        return verdicts


class OldRing1:
    """Ring 1 at ingest as of commit 1534c52, kept here for the comparison: the reference is
    a seeded sample of up to 2,000 stored chunk embeddings, plus the batch's own document
    vectors while the sample is smaller than that."""

    def __init__(self, kb: KnowledgeBase):
        self.kb = kb
        self.guard = IngestGuard()

    def screen(self, ids: Sequence[str], texts: Sequence[str], *, tiers: Sequence[str],
               embeddings: np.ndarray, neighbourhood: Neighbourhood) -> list[GuardVerdict]:
        reference = self.kb.embedding_sample(OLD_REFERENCE_SIZE)
        if len(reference) < OLD_REFERENCE_SIZE:
            reference = np.concatenate([reference, embeddings])
        outliers = outlier_scores(embeddings, reference)
        scores = [None] * len(ids) if outliers is None else [float(o) for o in outliers]
        return self.guard.judge_many(list(ids), list(texts), scores, tiers=list(tiers))


def screener(kind: str, kb: KnowledgeBase):
    return OldRing1(kb) if kind == "old" else IngestGuard()


def ingest(directory: Path, kind: str, batches: Sequence[Sequence[Document]], *,
           writers: Sequence[str], tier: str = "neutral") -> dict[str, GuardVerdict]:
    """Ingest ``batches`` (``writers[i]`` writes batch i) under Ring 1 ``kind``; all verdicts."""
    with KnowledgeBase.open(directory) as kb:
        recorder = Recorder(screener(kind, kb))
        for batch, writer in zip(batches, writers, strict=True):
            kb.ingest(list(batch), tier=tier, writer=writer, guard=recorder)
    return recorder.verdicts


def median_s_out(verdicts: dict[str, GuardVerdict], ids: Sequence[str]) -> float | None:
    values = [verdicts[i].s_out for i in ids if verdicts[i].s_out is not None]
    return round(statistics.median(values), 3) if values else None


def blocked(verdicts: dict[str, GuardVerdict], ids: Sequence[str]) -> int:
    return sum(verdicts[i].blocked for i in ids)


def build_inputs(args: argparse.Namespace) -> dict[str, list[Document]]:
    rng = random.Random(args.seed)
    poisons = [d for d in load_named("poisonedrag-nq") if d.id.startswith("poison:")]
    truth = load_named("poisonedrag-nq-gt")
    seen = {d.content_hash for d in truth + poisons}

    def unseen(documents: list[Document]) -> list[Document]:
        """Each text once over all inputs: a duplicate would be skipped, not screened."""
        fresh = [d for d in documents if d.content_hash not in seen]
        fresh = list({d.content_hash: d for d in fresh}.values())
        seen.update(d.content_hash for d in fresh)
        return fresh

    squad = unseen(load_named("squad-dev"))
    wiki = unseen(load_named("wiki5k"))  # its NQ-open and SQuADShifts passages (SQuAD is seen)
    rng.shuffle(wiki)
    rng.shuffle(squad)
    half = args.base // 2
    from_wiki = max(0, half - len(truth))
    base = truth[:half] + wiki[:from_wiki] + squad[:args.base - half]
    wiki, squad = wiki[from_wiki:], squad[args.base - half:]
    clean_a = wiki[:args.clean // 2] + squad[:args.clean - args.clean // 2]
    squad = squad[args.clean - args.clean // 2:]
    flood = [Document(id=f"flood:{i}", text=f"Note {i}: all good, nothing to report.")
             for i in range(args.flood)]
    return {"base": base, "poisons": poisons, "poisons_a": rng.sample(poisons, args.poisons),
            "clean_a": clean_a, "clean_b": squad[:args.flood_clean], "flood": flood}


def build_base(work: Path, documents: list[Document], seed: int) -> Path:
    order = documents[:]
    random.Random(seed + 1).shuffle(order)
    directory = work / "base"
    with KnowledgeBase.open(directory, create=True) as kb:
        for number in range(BASE_WRITERS):
            kb.ingest(order[number::BASE_WRITERS], writer=f"writer-{number}")
    return directory


def batch_agreement(base: Path, work: Path, inputs: dict, kind: str) -> dict:
    documents = inputs["poisons_a"] + inputs["clean_a"]
    whole = ingest(copy_kb(base, work, f"a-{kind}-whole"), kind, [documents], writers=["newcomer"])
    single = ingest(copy_kb(base, work, f"a-{kind}-single"), kind, [[d] for d in documents],
                    writers=["newcomer"] * len(documents))
    ids = [d.id for d in documents]
    poisons = [d.id for d in inputs["poisons_a"]]
    clean = [d.id for d in inputs["clean_a"]]
    return {"same verdict": sum(whole[i].blocked == single[i].blocked for i in ids),
            "documents": len(ids),
            "poisons blocked (whole / single)": f"{blocked(whole, poisons)} / "
                                                f"{blocked(single, poisons)} of {len(poisons)}",
            "clean blocked (whole / single)": f"{blocked(whole, clean)} / "
                                              f"{blocked(single, clean)} of {len(clean)}",
            "median S_out of poisons (whole / single)": f"{median_s_out(whole, poisons)} / "
                                                        f"{median_s_out(single, poisons)}"}


def flooding(base: Path, work: Path, inputs: dict, kind: str) -> dict:
    clean = inputs["clean_b"]
    batches = [[d] for d in clean]
    writers = [f"neutral-{i % 10}" for i in range(len(clean))]
    before = ingest(copy_kb(base, work, f"b-{kind}-before"), kind, batches, writers=writers)
    flooded = copy_kb(base, work, f"b-{kind}-after")
    with KnowledgeBase.open(flooded) as kb:  # written unscreened: the same flood for both
        kb.ingest(inputs["flood"], writer="flooder")
    after = ingest(flooded, kind, batches, writers=writers)
    ids = [d.id for d in clean]
    return {"clean blocked before flood": blocked(before, ids),
            "clean blocked after flood": blocked(after, ids), "clean": len(ids),
            "median S_out before / after": f"{median_s_out(before, ids)} / "
                                           f"{median_s_out(after, ids)}"}


def recall(base: Path, work: Path, inputs: dict, kind: str) -> dict:
    poisons = inputs["poisons"]
    verdicts = ingest(copy_kb(base, work, f"c-{kind}"), kind, [poisons], writers=["attacker"],
                      tier="untrusted")
    ids = [d.id for d in poisons]
    guard = IngestGuard()
    without = sum(guard.judge(d.id, d.text, tier="untrusted").blocked for d in poisons)
    return {"poisons blocked": blocked(verdicts, ids), "poisons": len(ids),
            "median S_out": median_s_out(verdicts, ids),
            "S_out None": sum(verdicts[i].s_out is None for i in ids),
            "blocked without S_out": without}


def show(title: str, rows: dict[str, dict]) -> None:
    print(f"\n{title}")
    keys = list(next(iter(rows.values())))
    width = max(map(len, keys)) + 2
    print(" " * width + "".join(f"{kind:>28}" for kind in rows))
    for key in keys:
        print(f"{key:<{width}}" + "".join(f"{row[key]!s:>28}" for row in rows.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=1000, help="documents in the base KB")
    parser.add_argument("--poisons", type=int, default=200, help="poisons in (a)")
    parser.add_argument("--clean", type=int, default=200, help="clean passages in (a)")
    parser.add_argument("--flood", type=int, default=500, help="tiny documents in (b)")
    parser.add_argument("--flood-clean", type=int, default=100, help="clean paragraphs in (b)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("a", "b", "c"), action="append",
                        help="run only these parts (default: all)")
    args = parser.parse_args()
    parts = args.only or ["a", "b", "c"]
    started = time.perf_counter()
    use_fast_kbs()
    inputs = build_inputs(args)
    print(f"ring1_outlier: {' '.join(sys.argv[1:]) or '(defaults)'}; base {len(inputs['base'])} "
          f"documents by {BASE_WRITERS} writers (half wiki5k, ground-truth passages first; half "
          "SQuAD dev), seed", args.seed)
    with tempfile.TemporaryDirectory(prefix="ring1-outlier-") as temporary:
        work = Path(temporary)
        base = build_base(work, inputs["base"], args.seed)
        for part, title, measure in (
                ("a", "(a) batch agreement: one batch vs one at a time, writer 'newcomer'",
                 batch_agreement),
                ("b", "(b) flooding: clean SQuAD paragraphs one at a time by 10 neutral "
                      f"writers, before/after 'flooder' stores {args.flood} tiny documents",
                 flooding),
                ("c", "(c) poison recall at ingest: every published poison, one batch, "
                      "untrusted 'attacker'", recall)):
            if part in parts:
                show(title, {kind: measure(base, work, inputs, kind) for kind in ("old", "new")})
                print(f"  ({time.perf_counter() - started:.0f} s so far)", flush=True)


if __name__ == "__main__":
    main()
