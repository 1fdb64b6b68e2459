"""Ring 1's recall per attack family, as written and hidden with invisible or look-alike
characters, and its false positives on clean text.

1. Every PoisonedRAG-NQ attack family (``trishield.eval.poisonedrag.attacks``; ``mixed`` is
   only the pool of published + template) for all 100 targets, seed 0, as generated and under
   each of the five Unicode rewrites of ``trishield.eval.obfuscations`` (a zero-width space, a
   zero-width joiner or a soft hyphen inside words; Cyrillic look-alikes; fullwidth forms),
   each applied two ways: to the *triggers* only (the question sentences, the authority and
   injection phrases: what a white-box attacker would hide) and to the whole text. Ring 1 as
   at ingest, the poison written by an untrusted writer into a KB whose only other writer is
   ``wikipedia`` (as the PoisonedRAG benchmark's wiki5k): the text signals, no ``S_out`` (a
   one-writer KB gives none), and the ``tampered_copy`` detector against the target's
   ground-truth passages as stored documents (``find_tampered_copy``; at ingest they are what
   the dense search returns for a copy of them, which ``--ann`` checks). Printed: the share
   blocked per family and variant, and per variant over all families.
2. With ``--ann DIR``: for the ``gt-swap`` family, the real dense search instead of that
   shortcut: the poisons and the 5,000 wiki5k passages embedded with MiniLM (cached in
   ``DIR/embeddings-<model>.npz``, the calibration's cache, so a calibration run's ``--out``
   can be reused), the 5 stored passages nearest to each poison aligned as at ingest
   (``ArrayNeighbourhood.nearest_documents``): how many the detector and Ring 1 catch.
3. Clean text: the share Ring 1 blocks (text signals only) of the HotpotQA, MuSiQue,
   2WikiMultihopQA and SQuAD dev passages, and, where installed on this machine, of npm's and
   CMake's command docs (whole files, as ingested), the share it flags (``C >= flag_theta``),
   and how often the question detectors fire.

Prints tables; writes nothing. About 2 minutes on two busy cores (plus the embedding for
``--ann``: about 1,000 texts, and wiki5k's 5,000 unless cached).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ring1_obfuscation.py [--ann DIR] [--skip-clean]
"""

from __future__ import annotations

import argparse
import glob
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import trishield
from trishield.eval.calibration import ArrayNeighbourhood, EmbeddingCache, poisonedrag_split
from trishield.eval.obfuscations import OBFUSCATIONS, TARGETED
from trishield.eval.poisonedrag.attacks import FAMILIES, Target, load_targets
from trishield.kb.datasets import load_named
from trishield.kb.screening import StoredNeighbour
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL
from trishield.rings.ingest_guard import GuardVerdict, IngestGuard
from trishield.rings.tamper import TamperConfig, find_tampered_copy, tampered_copies

CLEAN = ("hotpotqa", "musique", "2wikimultihopqa", "squad-dev")
DOCS = {
    "npm command docs": "/usr/lib/node_modules/npm/docs/content/commands/*.md",
    "CMake command docs": "/usr/share/cmake-*/Help/command/*.rst",
}
SKIPPED_FAMILIES = ("mixed",)
"""Not a family of its own: the published and template poisons pooled for the sweeps."""
STORED_WRITER = "wikipedia"
ATTACKER_TIER = "untrusted"


def variants() -> dict[str, Callable[[str], str]]:
    """``plain``, then each rewrite on the triggers, then each on the whole text."""
    found: dict[str, Callable[[str], str]] = {"plain": lambda text: text}
    found |= {f"{name} @ triggers": rewrite for name, rewrite in TARGETED.items()}
    found |= {f"{name} @ all": rewrite for name, rewrite in OBFUSCATIONS.items()}
    return found


def originals(target: Target) -> list[StoredNeighbour]:
    """The target's ground-truth passages as stored documents of :data:`STORED_WRITER`."""
    return [StoredNeighbour(doc_id=doc_id, chunk_id=f"{doc_id}#0", writer=STORED_WRITER,
                            tier="neutral", text=text, similarity=float("nan"))
            for doc_id, text in target.gt_passages]


def judge(guard: IngestGuard, doc_id: str, text: str,
          neighbours: list[StoredNeighbour]) -> GuardVerdict:
    """Ring 1 at ingest for one poison by an untrusted writer, ``S_out`` absent."""
    copy = find_tampered_copy(doc_id, text, ATTACKER_TIER, neighbours, guard.config.tamper)
    return guard.judge(doc_id, text, tier=ATTACKER_TIER,
                       extra=() if copy is None else (copy.hit(),))


def family_table(guard: IngestGuard, targets: Sequence[Target]) -> None:
    rewrites = variants()
    _, held_out = poisonedrag_split()
    held = set(held_out)
    names = [name for name in FAMILIES if name not in SKIPPED_FAMILIES]
    print("\nRing 1 at ingest, blocked share per attack family (all 100 targets; in brackets the "
          "50 held-out targets of poisonedrag_split), untrusted writer, no S_out, "
          "tampered_copy against the target's ground-truth passages")
    print(f"{'variant':<34}" + "".join(f"{name:>22}" for name in names) + f"{'all':>16}")
    totals: dict[str, list[int]] = {}
    for variant, rewrite in rewrites.items():
        cells = []
        blocked_all = n_all = 0
        for name in names:
            family = FAMILIES[name]
            blocked = n = held_blocked = held_n = 0
            for target in targets:
                neighbours = originals(target)
                for document in family.poisons(target, 0):
                    verdict = judge(guard, document.id, rewrite(document.text), neighbours)
                    blocked += verdict.blocked
                    n += 1
                    if target.id in held:
                        held_blocked += verdict.blocked
                        held_n += 1
            cells.append(f"{blocked / max(1, n):.3f} ({held_blocked / max(1, held_n):.3f})")
            blocked_all += blocked
            n_all += n
            totals.setdefault(name, []).append(n)
        print(f"{variant:<34}" + "".join(f"{cell:>22}" for cell in cells)
              + f"{blocked_all / max(1, n_all):>16.3f}", flush=True)
    print("  n per family: " + ", ".join(f"{name} {counts[0]}" for name, counts in
                                         totals.items()))


def ann_check(guard: IngestGuard, targets: Sequence[Target], cache_dir: Path) -> None:
    """gt-swap through the real dense search over wiki5k (see the module docstring)."""
    cache = EmbeddingCache(DEFAULT_EMBEDDING_MODEL,
                           cache_dir / f"embeddings-{DEFAULT_EMBEDDING_MODEL}.npz")
    stored = [d.text for d in load_named("wiki5k")]
    neighbourhood = ArrayNeighbourhood(cache.encode(stored), [STORED_WRITER] * len(stored),
                                       "attacker", texts=stored)
    truth = {text for t in targets for _, text in t.gt_passages}
    poisons = [d for t in targets for d in FAMILIES["gt-swap"].poisons(t, 0)]
    config: TamperConfig = guard.config.tamper
    print(f"\ngt-swap through the dense search over the {len(stored)} wiki5k passages "
          f"(MiniLM, the {config.neighbours} nearest aligned as at ingest); n={len(poisons)}")
    print(f"{'variant':<34}{'original found':>16}{'tampered_copy':>15}{'Ring 1 blocked':>16}")
    for variant, rewrite in variants().items():
        texts = [rewrite(d.text) for d in poisons]
        vectors = cache.encode(texts)
        found = neighbourhood.nearest_documents(vectors, config.neighbours)
        has_original = sum(any(n.text in truth for n in row) for row in found)
        copies = tampered_copies([d.id for d in poisons], texts, [ATTACKER_TIER] * len(texts),
                                 vectors, neighbourhood, config)
        verdicts = [guard.judge(d.id, text, tier=ATTACKER_TIER,
                                extra=() if copy is None else (copy.hit(),))
                    for d, text, copy in zip(poisons, texts, copies, strict=True)]
        print(f"{variant:<34}{has_original:>16}{sum(c is not None for c in copies):>15}"
              f"{sum(v.blocked for v in verdicts):>16}", flush=True)


def measure(guard: IngestGuard, texts: Sequence[str]) -> dict[str, object]:
    verdicts = [guard.judge(f"t{i}", text, s_out=None) for i, text in enumerate(texts)]
    fired = Counter(hit.name for v in verdicts for hit in v.patterns)
    return {
        "n": len(verdicts),
        "blocked": sum(v.blocked for v in verdicts),
        "flagged": sum(v.flagged for v in verdicts),
        "fired": {name: count / max(1, len(verdicts)) for name, count in fired.items()},
    }


def _docs(pattern: str) -> list[str]:
    return [Path(path).read_text(encoding="utf-8") for path in sorted(glob.glob(pattern))]


def clean_table(guard: IngestGuard) -> None:
    print("\nClean text blocked (false positives), text signals only")
    print(f"{'corpus':<22}{'n':>7}{'blocked':>9}{'rate':>9}{'flagged':>9}  question_opening"
          "  question_inside  obfuscated_text")
    corpora = {name: [d.text for d in load_named(name)] for name in CLEAN}
    corpora |= {name: texts for name, pattern in DOCS.items() if (texts := _docs(pattern))}
    for name, texts in corpora.items():
        row = measure(guard, texts)
        fired = row["fired"]
        print(f"{name:<22}{row['n']:>7}{row['blocked']:>9}{row['blocked'] / row['n']:>9.4f}"
              f"{row['flagged']:>9}  {fired.get('question_opening', 0.0):>16.4f}"
              f"  {fired.get('question_inside', 0.0):>15.4f}"
              f"  {fired.get('obfuscated_text', 0.0):>15.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-clean", action="store_true", help="poisons only")
    parser.add_argument("--ann", type=Path, default=None, metavar="DIR",
                        help="also run gt-swap through the dense search (embedding cache DIR)")
    arguments = parser.parse_args()
    guard = IngestGuard()
    print(f"trishield from {Path(trishield.__file__).parent}; theta={guard.config.theta}")
    targets = load_targets()
    family_table(guard, targets)
    if arguments.ann is not None:
        ann_check(guard, targets, arguments.ann)
    if not arguments.skip_clean:
        clean_table(guard)


if __name__ == "__main__":
    main()
