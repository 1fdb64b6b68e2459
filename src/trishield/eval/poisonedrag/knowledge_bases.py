"""The benchmark's knowledge bases, built once and reused while their inputs are unchanged.

* ``base``: the clean profile (wiki5k: 5,000 Wikipedia passages incl. the targets' ground
  truth; ``mini``: the ground truth plus a seeded sample, for ``--quick``), one neutral writer.
* per attack family and writer setting, two copies of the base with that family's poisons
  written through the normal ingest path: ``plain`` (no Ring 1 at ingest) and ``guarded``
  (Ring 1 at ingest, blocked poisons go to quarantine). Writer settings:

  - ``attacker``: one untrusted writer ingests every poison in one batch;
  - ``sybil``: every poison is ingested alone, in its own batch, by its own neutral writer
    (a name derived from the poison id, saying nothing about the attack), and the batches
    go round-robin over the targets (poison 0 of every target, then poison 1, ...) so one
    target's poisons are not consecutive batches. Ring 1's outlier and tampered-copy checks
    exclude only the *same writer's* documents, so each sybil poison is screened against
    the base and every poison ingested before it, exactly as a real sybil attack would be.
    Sybil KBs have their own directories and fingerprints and never mix with the others.

Embedding the clean passages dominates (about five minutes for wiki5k on 2 cores), so the
family KBs are copies of the base plus one small ingest each. A KB directory is complete
only when its ``built.json`` matches the inputs; anything else is rebuilt from scratch in a
temporary directory and renamed into place, so an interrupted build never leaves a KB that a
later run would trust.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from trishield.errors import InputError
from trishield.eval.poisonedrag.attacks import Target, get_family
from trishield.eval.poisonedrag.conditions import WRITER_SETTINGS
from trishield.eval.poisonedrag.schedules import (
    BASE_AGE_DAYS,
    FARMING_DOCUMENTS,
    INSIDER_DOCUMENTS,
    TIMED_SETTINGS,
    KBClock,
    attack_time,
    write_timed,
)
from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import DATASETS, wiki5k_documents
from trishield.rings.analysis import DEFAULT_ANALYSER
from trishield.rings.evidence import DAY_S
from trishield.rings.ingest_guard import GuardConfig, IngestGuard

PROFILES = ("wiki5k", "mini")
MINI_EXTRA = 150
CLEAN_WRITER = "wikipedia"
ATTACKER = "attacker"
MARKER = "built.json"
RESUME = "resume.json"
"""In a staging directory that an interrupted sybil build may continue: its fingerprint."""
SAY_EVERY = 250
"""A sybil build reports its progress every this many batches."""
SLEEPERS = 5
"""Writers of the ``sleeper`` setting: poison *i* of a target is written by sleeper *i*."""
SLEEPER_DOCUMENTS = 250
"""Benign documents each sleeper stores before its poisons: a track record of about 0.8 by
the evidence design's default (``log(1+n)/log(1+1000)``), where five sleepers' independent
poisons weigh as much as twice an established source (docs/design/weaknesses.md)."""
SLEEPER_CORPUS = "squadshifts-new-wiki"
PATIENT_LEAD_DAYS = 7
"""The ``patient`` setting: the sleepers store their records a day after the base KB's last
document, and sleeper *i* posts its poisons ``PATIENT_LEAD_DAYS + i`` days after that: a
day apart (no burst), each after a week of writing (docs/design/ring3-consensus.md, "Tenure")."""


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


def _ready(directory: Path, fingerprint: str, name: str = MARKER) -> bool:
    marker = directory / name
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text())["fingerprint"] == fingerprint
    except (ValueError, KeyError):
        return False


def _build(directory: Path, fingerprint: str, make: Callable[[Path], dict], *,
           resumable: bool = False) -> Path:
    """Run ``make`` in a temporary sibling and rename it into place when it succeeded.

    ``resumable``: a staging directory left by an interrupted build of the *same* inputs
    (its ``resume.json`` holds this fingerprint) is kept, and ``make`` continues it."""
    if _ready(directory, fingerprint):
        return directory
    staging = directory.with_name(directory.name + ".building")
    if not (resumable and _ready(staging, fingerprint, RESUME)):
        shutil.rmtree(staging, ignore_errors=True)
    facts = make(staging)
    (staging / RESUME).unlink(missing_ok=True)
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
        with KnowledgeBase.open(staging, create=True, analyser=DEFAULT_ANALYSER) as kb:
            report = kb.ingest(documents, tier="neutral", writer=CLEAN_WRITER,
                               source=f"benchmark profile {profile}", progress=progress)
        return {"documents": len(documents), "chunks": report.chunks_added,
                "embed_seconds": round(report.embed_seconds, 1)}

    return _build(work_dir / f"base-{profile}", fingerprint, make)


def sybil_writer(doc_id: str) -> str:
    """The sybil writer of one poison: distinct per poison id, neutral-sounding (a writer
    name that said "attacker" would hand the defense the identity the condition withholds)."""
    return "contributor-" + hashlib.sha256(f"sybil:{doc_id}".encode()).hexdigest()[:12]


def sybil_batches(poisons_per_target: Sequence[Sequence[Document]]) -> list[Document]:
    """Ingest order of a sybil KB: round-robin over the targets, one poison per batch."""
    return [doc for layer in itertools.zip_longest(*poisons_per_target) for doc in layer
            if doc is not None]


def sleeper_writer(number: int) -> str:
    """The name of sleeper ``number`` (neutral-sounding, like the sybil writers')."""
    return "member-" + hashlib.sha256(f"sleeper:{number}".encode()).hexdigest()[:12]


def sleeper_record(base: Path, documents: int) -> list[list[Document]]:
    """Each sleeper's benign documents: the first ``SLEEPERS * documents`` paragraphs of
    :data:`SLEEPER_CORPUS` whose text ``base`` does not hold (by content hash, so the KB's
    dedupe never shrinks a record), in file order, dealt out in turns. Refuses when the corpus
    has too few."""
    corpus = list(DATASETS[SLEEPER_CORPUS].documents())
    with KnowledgeBase.open(base, read_only=True) as kb:
        _, stored = kb.store.existing((), {d.content_hash for d in corpus})
    pool = [d for d in corpus if d.content_hash not in stored]
    wanted = SLEEPERS * documents
    if len(pool) < wanted:
        raise InputError(f"the sleeper setting needs {wanted} paragraphs of "
                         f"{SLEEPER_CORPUS} outside the base KB, found {len(pool)}")
    chosen = [Document(id=f"sleeper:{d.id}", text=d.text, title=d.title,
                       source=f"sleeper record ({SLEEPER_CORPUS})") for d in pool[:wanted]]
    return [chosen[n::SLEEPERS] for n in range(SLEEPERS)]


class SimulatedDay:
    """The KB clock of the ``patient`` setting: whole days after the attack's time (the base
    KB's last document and :data:`BASE_AGE_DAYS`), plus the wall clock's seconds since this
    build began, so that writes keep their order. Counted from the base, which a build never
    changes, so a resumed build sets the same days again."""

    def __init__(self, base: Path):
        self.clock = KBClock.of_base(base)
        self.origin = self.clock.origin
        self.set(0)  # the attack's day: a year after the base

    def set(self, day: int) -> None:
        self.day = day
        self.clock.at(attack_time() + day * DAY_S)

    def now(self) -> float:
        return self.clock.now()


def build_family(work_dir: Path, base: Path, family: str, targets: Sequence[Target],
                 seed: int, *, guarded: bool, guard: GuardConfig | None = None,
                 writers: str = "attacker", sleeper_documents: int = SLEEPER_DOCUMENTS,
                 filler_documents: int | None = None,
                 say: Callable[[str], None] | None = None) -> Path:
    """``base`` + the family's poisons for ``targets``: by the untrusted attacker in one batch,
    or (``writers="sybil"``) each by its own neutral writer in its own batch, or
    (``writers="sleeper"``) by :data:`SLEEPERS` neutral writers that first store
    ``sleeper_documents`` benign documents each (:func:`sleeper_record`), poison *i* of every
    target by sleeper *i*, each poison in its own batch. ``writers="patient"`` is the same
    campaign spread over simulated days (the KB's clock, :data:`PATIENT_LEAD_DAYS`): records
    a day after the base's last document, sleeper *i*'s posts a week and *i* days later.
    Every setting writes a year (:data:`BASE_AGE_DAYS`) after the base's last document (the
    KB's clock, :mod:`.schedules`); the timed settings (``attacker-first``,
    ``attacker-first-week``, ``farming``, ``insider``, ``newcomer-truth``) are written by
    :func:`~.schedules.write_timed`, with ``filler_documents`` per writer (default
    :data:`FARMING_DOCUMENTS` or :data:`INSIDER_DOCUMENTS`).

    A sybil KB takes one ingest per poison (thousands on wiki5k), so its build resumes after
    an interruption: every ingest is atomic, and a poison already stored or quarantined in
    the staging copy is skipped by the KB's own content-hash dedupe."""
    if writers not in WRITER_SETTINGS:
        raise InputError(f"unknown writer setting {writers!r}; choose from "
                         f"{', '.join(WRITER_SETTINGS)}")
    if isinstance(sleeper_documents, bool) or not isinstance(sleeper_documents, int) \
            or sleeper_documents < 0:
        raise InputError(f"sleeper documents must be a whole number >= 0, got "
                         f"{sleeper_documents!r}")
    if filler_documents is not None and (isinstance(filler_documents, bool) or not isinstance(
            filler_documents, int) or filler_documents < 0):
        raise InputError(f"filler documents must be a whole number >= 0, got "
                         f"{filler_documents!r}")
    guard = guard or GuardConfig()
    per_target = [[] if writers == "newcomer-truth" else get_family(family).poisons(target, seed)
                  for target in targets]  # the control writes the truths alone
    poisons = [doc for docs in per_target for doc in docs]
    base_marker = json.loads((base / MARKER).read_text())["fingerprint"]
    parts = {"base": base_marker, "family": family, "guarded": guarded,
             "guard": asdict(guard) if guarded else None,
             "poisons": [[d.id, d.content_hash] for d in poisons]}
    if writers != "attacker":  # the single-attacker fingerprints stay as they were
        parts["writers"] = writers
    parts["base_age_days"] = BASE_AGE_DAYS  # the poisons are written a year after the base
    sleepers = writers in ("sleeper", "patient")
    timed = writers in TIMED_SETTINGS
    if sleepers:
        parts["sleeper_documents"] = sleeper_documents
    if timed:
        sleeper_documents = {"farming": FARMING_DOCUMENTS, "insider": INSIDER_DOCUMENTS}.get(
            writers, 0) if filler_documents is None else filler_documents
        parts["filler_documents"] = sleeper_documents
    if writers == "patient":
        parts["patient_lead_days"] = PATIENT_LEAD_DAYS
    fingerprint = _fingerprint(parts)
    setting = {"attacker": "", "sybil": "sybil-", "attacker-first": "attacker-first-",
               "attacker-first-week": "attacker-first-week-",
               "newcomer-truth": "newcomer-truth-"}.get(
        writers, f"{writers}{sleeper_documents}-")
    name = (f"{base.name.removeprefix('base-')}-{setting}{family}-"
            f"{'guarded' if guarded else 'plain'}")
    screener = IngestGuard(guard) if guarded else None

    def copy_base(staging: Path) -> None:
        shutil.copytree(base, staging, ignore=shutil.ignore_patterns(MARKER, "kb.lock"))

    def make_single(staging: Path) -> dict:
        copy_base(staging)
        clock = KBClock.of_base(base)
        clock.at(attack_time())
        with KnowledgeBase.open(staging, analyser=DEFAULT_ANALYSER, clock=clock.now) as kb:
            report = kb.ingest(poisons, tier="untrusted", writer=ATTACKER,
                               source=f"attack family {family}", guard=screener)
        return {"poisons": len(poisons), "writers": writers, "batches": 1,
                "quarantined": sorted(q["id"] for q in report.quarantined)}

    def make_one_by_one(staging: Path) -> dict:
        """Sybil and sleeper KBs: each poison in its own batch, round-robin over the targets
        (after the sleepers' records, one batch per sleeper)."""
        records = sleeper_record(base, sleeper_documents) if sleepers else []
        if not (staging / RESUME).is_file():
            copy_base(staging)
            (staging / RESUME).write_text(json.dumps({"fingerprint": fingerprint}))
        number_of = {doc.id: n for docs in per_target for n, doc in enumerate(docs)}
        order = sybil_batches(per_target)
        day = SimulatedDay(base)  # the sleepers' records and posts (patient: days apart)
        with KnowledgeBase.open(staging, analyser=DEFAULT_ANALYSER, clock=day.now) as kb:
            for sleeper, documents in enumerate(records):
                if documents:
                    day.set(1 if writers == "patient" else 0)
                    kb.ingest(documents, tier="neutral", writer=sleeper_writer(sleeper),
                              source="sleeper record", guard=screener)
            for number, doc in enumerate(order, start=1):
                writer = (sybil_writer(doc.id) if writers == "sybil"
                          else sleeper_writer(number_of[doc.id] % SLEEPERS))
                if writers == "patient":
                    day.set(1 + PATIENT_LEAD_DAYS + number_of[doc.id] % SLEEPERS)
                kb.ingest([doc], tier="neutral", writer=writer,
                          source=f"attack family {family}", guard=screener)
                if say is not None and number % SAY_EVERY == 0:
                    say(f"  {name}: {number} of {len(order)} {writers} batches ingested")
            ids = {doc.id for doc in poisons}
            held_now = kb.store.quarantined()
        facts = {"poisons": len(poisons), "writers": writers,
                 "batches": len(order) + sum(1 for documents in records if documents),
                 "quarantined": sorted(q["id"] for q in held_now if q["id"] in ids)}
        if sleepers:
            facts |= {"sleeper_documents": sleeper_documents,
                      "sleeper_documents_quarantined": sum(1 for q in held_now
                                                           if q["id"] not in ids)}
        return facts

    def make_timed(staging: Path) -> dict:
        """A timed setting (:mod:`.schedules`): the campaign on the KB's clock."""
        copy_base(staging)
        clock = KBClock.of_base(base)
        with KnowledgeBase.open(staging, analyser=DEFAULT_ANALYSER, clock=clock.now) as kb:
            facts = write_timed(kb, clock, writers, targets, per_target, family=family,
                                screener=screener, documents=sleeper_documents, say=say)
            ids = {doc.id for doc in poisons}
            held = kb.store.quarantined()
        return facts | {"poisons": len(poisons), "writers": writers,
                        "quarantined": sorted(q["id"] for q in held if q["id"] in ids)}

    if writers == "attacker":
        return _build(work_dir / name, fingerprint, make_single)
    if timed:
        return _build(work_dir / name, fingerprint, make_timed)
    return _build(work_dir / name, fingerprint, make_one_by_one, resumable=True)


def ingest_label(family: str, writers: str) -> str:
    """How the report names a family KB's Ring 1 ingest figures (``claim-only/sybil``)."""
    return family if writers == "attacker" else f"{family}/{writers}"


def quarantined(directory: Path) -> list[str]:
    """Poison ids Ring 1 held at ingest (recorded when the family KB was built)."""
    return json.loads((directory / MARKER).read_text()).get("quarantined", [])


def screen_clean(base: Path, guard: GuardConfig | None = None, *, code: str) -> dict:
    """Ring 1's ingest verdict on every clean passage of the base, as if each were written
    now: the false-positive side of detection at ingest (the benchmark writes the clean
    passages unscreened, as a KB that existed before the attack). Cached next to the base,
    by the guard's settings and ``code`` (the hash of the defense code: a changed detector
    with the same settings must not read the old verdicts)."""
    import numpy as np

    from trishield.rings.ingest_guard import outlier_scores

    guard = guard or GuardConfig()
    key = _fingerprint({"guard": asdict(guard), "code": code})
    cache_path = base / f"screening-{key[:12]}.json"
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
