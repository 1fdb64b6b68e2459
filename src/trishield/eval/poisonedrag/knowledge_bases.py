"""The benchmark's knowledge bases, built once and reused while their inputs are unchanged.

* ``base``: the clean profile (wiki5k: 5,000 Wikipedia passages incl. the targets' ground
  truth; ``mini``: the ground truth plus a seeded sample, for ``--quick``), one neutral writer.
* per attack family, two copies of the base with that family's poisons written by the
  untrusted attacker through the normal ingest path: ``plain`` (no Ring 1 at ingest) and
  ``guarded`` (Ring 1 at ingest, blocked poisons go to quarantine).

Embedding the clean passages dominates (about five minutes for wiki5k on 2 cores), so the
family KBs are copies of the base plus one small ingest each. A KB directory is complete
only when its ``built.json`` matches the inputs; anything else is rebuilt from scratch in a
temporary directory and renamed into place, so an interrupted build never leaves a KB that a
later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from trishield.errors import InputError
from trishield.eval.poisonedrag.attacks import Target, get_family
from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import wiki5k_documents
from trishield.rings.ingest_guard import GuardConfig, IngestGuard

PROFILES = ("wiki5k", "mini")
MINI_EXTRA = 150
CLEAN_WRITER = "wikipedia"
ATTACKER = "attacker"
MARKER = "built.json"


def profile_documents(profile: str, targets: Sequence[Target], seed: int) -> list[Document]:
    """The clean passages of a profile, in a fixed order."""
    if profile not in PROFILES:
        raise InputError(f"unknown KB profile {profile!r}; choose from {', '.join(PROFILES)}")
    documents = wiki5k_documents()
    if profile == "wiki5k":
        return documents
    truth = {doc_id for target in targets for doc_id, _ in target.gt_passages}
    keep = [d for d in documents if d.id in truth]
    others = [d for d in documents if d.id not in truth]
    keep += random.Random(seed).sample(others, MINI_EXTRA)
    return keep


def _fingerprint(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _ready(directory: Path, fingerprint: str) -> bool:
    marker = directory / MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text())["fingerprint"] == fingerprint
    except (ValueError, KeyError):
        return False


def _build(directory: Path, fingerprint: str, make: Callable[[Path], dict]) -> Path:
    """Run ``make`` in a temporary sibling and rename it into place when it succeeded."""
    if _ready(directory, fingerprint):
        return directory
    staging = directory.with_name(directory.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    facts = make(staging)
    (staging / MARKER).write_text(json.dumps({"fingerprint": fingerprint, **facts},
                                             sort_keys=True, indent=1))
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    return directory


def build_base(work_dir: Path, profile: str, documents: Sequence[Document],
               progress: bool = False) -> Path:
    fingerprint = _fingerprint({"profile": profile,
                                "documents": [d.content_hash for d in documents]})

    def make(staging: Path) -> dict:
        with KnowledgeBase.open(staging, create=True) as kb:
            report = kb.ingest(documents, tier="neutral", writer=CLEAN_WRITER,
                               source=f"benchmark profile {profile}", progress=progress)
        return {"documents": len(documents), "chunks": report.chunks_added,
                "embed_seconds": round(report.embed_seconds, 1)}

    return _build(work_dir / f"base-{profile}", fingerprint, make)


def build_family(work_dir: Path, base: Path, family: str, targets: Sequence[Target],
                 seed: int, *, guarded: bool, guard: GuardConfig | None = None) -> Path:
    """``base`` + the family's poisons for ``targets``, by the untrusted attacker."""
    guard = guard or GuardConfig()
    poisons = [doc for target in targets for doc in get_family(family).poisons(target, seed)]
    base_marker = json.loads((base / MARKER).read_text())["fingerprint"]
    fingerprint = _fingerprint({"base": base_marker, "family": family, "guarded": guarded,
                                "guard": asdict(guard) if guarded else None,
                                "poisons": [[d.id, d.content_hash] for d in poisons]})
    name = f"{base.name.removeprefix('base-')}-{family}-{'guarded' if guarded else 'plain'}"

    def make(staging: Path) -> dict:
        shutil.copytree(base, staging, ignore=shutil.ignore_patterns(MARKER, "kb.lock"))
        with KnowledgeBase.open(staging) as kb:
            report = kb.ingest(poisons, tier="untrusted", writer=ATTACKER,
                               source=f"attack family {family}",
                               guard=IngestGuard(guard) if guarded else None)
        return {"poisons": len(poisons), "quarantined": sorted(
            q["id"] for q in report.quarantined)}

    return _build(work_dir / name, fingerprint, make)


def quarantined(directory: Path) -> list[str]:
    """Poison ids Ring 1 held at ingest (recorded when the family KB was built)."""
    return json.loads((directory / MARKER).read_text()).get("quarantined", [])


def screen_clean(base: Path, guard: GuardConfig | None = None) -> dict:
    """Ring 1's ingest verdict on every clean passage of the base, as if each were written
    now: the false-positive side of detection at ingest (the benchmark writes the clean
    passages unscreened, as a KB that existed before the attack). Cached next to the base."""
    import numpy as np

    from trishield.rings.ingest_guard import outlier_scores

    guard = guard or GuardConfig()
    cache_path = base / f"screening-{_fingerprint(asdict(guard))[:12]}.json"
    if cache_path.is_file():
        return json.loads(cache_path.read_text())
    with KnowledgeBase.open(base) as kb:
        stored = kb.documents_with_embeddings()
        reference = kb.embedding_sample()
    ids = [doc_id for doc_id, _, _ in stored]
    means = np.stack([np.mean(chunks, axis=0) for _, _, chunks in stored])
    means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
    outliers = outlier_scores(means.astype(np.float32), reference)
    scores = [None] * len(ids) if outliers is None else [float(o) for o in outliers]
    verdicts = IngestGuard(guard).judge_many(ids, [text for _, text, _ in stored], scores,
                                             tiers=["neutral"] * len(ids))
    result = {"screened": len(ids),
              "would_quarantine": sorted(v.subject for v in verdicts if v.blocked)}
    cache_path.write_text(json.dumps(result, sort_keys=True, indent=1))
    return result
