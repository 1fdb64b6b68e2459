"""Time in the benchmark's knowledge bases: when each side of a dispute was written.

The evidence weighs time (how long a source stood uncontested, how long a writer has been
writing), so a benchmark whose base KB and poisons are written minutes apart measures
nothing about it: there, "stood uncontested" means "was written a few minutes earlier". The
KB's clock is injected (``KnowledgeBase.open(clock=...)``; the product never exposes it), and
every poisoned KB is written on a schedule counted from its base KB's last document:

* the base (the clean profile, one neutral writer) stands :data:`BASE_AGE_DAYS` (a year)
  before the attack: every family and writer setting posts its poisons "now", a year later;
* ``attacker-first``: the targets' true passages are taken out of the base copy (deleted,
  audited) and written again by a new neutral writer :data:`ATTACKER_FIRST_LEAD_S` after the
  poisons (ten minutes; a week for ``attacker-first-week``), each poison by its own writer;
* ``farming``: each poison's own writer first writes :data:`FARMING_DOCUMENTS` filler
  documents (another corpus) minutes before its poison: volume bought in an afternoon;
* ``insider``: one writer stores :data:`INSIDER_DOCUMENTS` filler documents with the base (a
  year of tenure, a full record) and then posts every poison;
* ``newcomer-truth``: no poisons; the targets' true passages are taken out of the base and
  written again by a new neutral writer at the attack time (a year after the base): the
  control for the rest, since a new writer's fact must not be refused for being new, or
  outweighed by a year-old writer's unrelated paragraph.

The filler comes from :data:`FILLER_CORPUS` (paragraphs the base does not hold) under ids
``filler:<writer>:<n>``, so a tier re-labelling (:mod:`.provenance`) can tell it from the
clean passages.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from trishield.errors import InputError
from trishield.eval.poisonedrag.attacks import Target
from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import DATASETS
from trishield.rings.evidence import DAY_S

BASE_AGE_DAYS = 365
"""How long the base KB stood before the attack: the full precedence and tenure scale."""
TIMED_SETTINGS = ("attacker-first", "attacker-first-week", "farming", "insider",
                  "newcomer-truth")
ATTACKER_FIRST_LEAD_S = {"attacker-first": 600.0, "attacker-first-week": 7 * DAY_S}
"""How long after the poisons the true passages are written again."""
FARMING_DOCUMENTS = 200
INSIDER_DOCUMENTS = 1000
FILLER_CORPUS = "squadshifts-new-wiki"
FILLER_PREFIX = "filler:"
REWRITTEN_SUFFIX = "@rewritten"


class KBClock:
    """A KB clock counted from ``origin`` (the base KB's last document): the offset set with
    :meth:`at` plus the wall clock's seconds since this build began, so that writes keep their
    order. The offsets do not depend on when the build runs, so a rebuilt KB has the same
    history (the seconds of building aside)."""

    def __init__(self, origin: float):
        self.origin = origin
        self.offset = 0.0
        self.started = time.time()

    @classmethod
    def of_base(cls, base: Path) -> KBClock:
        with KnowledgeBase.open(base, read_only=True) as kb:
            return cls(max((d["ingested_at"] for d in kb.documents()), default=0.0))

    def at(self, offset_s: float) -> None:
        self.offset = offset_s

    def now(self) -> float:
        return self.origin + self.offset + (time.time() - self.started)


def attack_time() -> float:
    """When every poison is written: the base's age after its last document."""
    return BASE_AGE_DAYS * DAY_S


def timed_writer(role: str, key: str) -> str:
    """A writer name saying nothing about the attack (the defense must not read it)."""
    return "contributor-" + hashlib.sha256(f"{role}:{key}".encode()).hexdigest()[:12]


def filler_pool(base: Path, count: int) -> list[Document]:
    """``count`` paragraphs of :data:`FILLER_CORPUS` whose text the base does not hold, in
    file order (refused when the corpus has too few)."""
    corpus = list(DATASETS[FILLER_CORPUS].documents())
    with KnowledgeBase.open(base, read_only=True) as kb:
        _, stored = kb.store.existing((), {d.content_hash for d in corpus})
    pool = [d for d in corpus if d.content_hash not in stored]
    if len(pool) < count:
        raise InputError(f"the filler needs {count} paragraphs of {FILLER_CORPUS} outside "
                         f"the base KB, found {len(pool)}")
    return pool[:count]


def filler_for(writer: str, pool: Sequence[Document]) -> list[Document]:
    """``writer``'s copies of the filler paragraphs (ids are global, texts are per writer)."""
    return [Document(id=f"{FILLER_PREFIX}{writer}:{n}", text=d.text, title=d.title,
                     source=f"filler ({FILLER_CORPUS})") for n, d in enumerate(pool)]


def write_timed(kb: KnowledgeBase, clock: KBClock, setting: str, targets: Sequence[Target],
                per_target: Sequence[Sequence[Document]], *, family: str,
                screener: object | None, documents: int,
                say: Callable[[str], None] | None = None) -> dict:
    """Write one timed setting's campaign into ``kb`` (a copy of the base) on ``clock``;
    ``documents``: the filler per writer (farming, insider). Returns the build's facts."""
    if setting not in TIMED_SETTINGS:
        raise InputError(f"unknown timed setting {setting!r}; choose from "
                         f"{', '.join(TIMED_SETTINGS)}")
    now = attack_time()
    stored: list[str] = []
    source = f"attack family {family}"
    batches = 0
    facts: dict = {}
    if setting == "insider":
        insider = timed_writer("insider", "0")
        clock.at(0.0)  # with the base: a year of tenure when it posts
        if documents:
            kb.ingest(filler_for(insider, filler_pool(kb.directory, documents)),
                      tier="neutral", writer=insider, source="insider record", guard=screener)
            batches += 1
        clock.at(now)
        for docs in per_target:
            kb.ingest(list(docs), tier="neutral", writer=insider, source=source,
                      guard=screener)
            batches += 1
        return {"batches": batches, "filler_documents": documents, "insider": insider}
    rewrites_truth = setting.startswith("attacker-first") or setting == "newcomer-truth"
    if rewrites_truth:
        truths = {doc_id: text for target in targets for doc_id, text in target.gt_passages}
        stored = [doc_id for doc_id in truths if kb.store.document(doc_id) is not None]
        clock.at(now - 60.0)  # taken out just before the attack
        if stored:
            kb.delete_many(stored, by="benchmark", reason="written again by a new writer"
                           if setting == "newcomer-truth" else "written again after the poisons")
        facts["truths_rewritten"] = len(stored)
    if setting == "newcomer-truth":  # the truths alone, a year after the base
        editor = timed_writer("editor", setting)
        clock.at(now)
        _write_truths(kb, editor, stored, truths, screener,
                      source="the true passage, written again by a new writer")
        return facts | {"batches": 1 if stored else 0, "filler_documents": 0,
                        "editor": editor}
    pool = filler_pool(kb.directory, documents) if setting == "farming" and documents else []
    order = [doc for layer in zip(*per_target, strict=False) for doc in layer]
    leftovers = [doc for docs in per_target for doc in docs[min(map(len, per_target)):]]
    for number, doc in enumerate(order + leftovers, start=1):
        writer = timed_writer("poison", doc.id)
        clock.at(now + number)  # a second apart: minutes for the whole campaign
        if pool:
            kb.ingest(filler_for(writer, pool), tier="neutral", writer=writer,
                      source="farmed record", guard=screener)
            batches += 1
        kb.ingest([doc], tier="neutral", writer=writer, source=source, guard=screener)
        batches += 1
        if say is not None and number % 250 == 0:
            say(f"  {setting}: {number} poisons written")
    if setting.startswith("attacker-first"):
        editor = timed_writer("editor", setting)
        clock.at(now + len(order) + len(leftovers) + ATTACKER_FIRST_LEAD_S[setting])
        if _write_truths(kb, editor, stored, truths, screener,
                         source="the true passage, written after the poisons"):
            batches += 1
        facts["editor"] = editor
    return facts | {"batches": batches, "filler_documents": documents if pool else 0}


def _write_truths(kb: KnowledgeBase, editor: str, stored: Sequence[str],
                  truths: dict[str, str], screener: object | None, *, source: str) -> bool:
    """The true passages taken out of the base, written again by ``editor`` under new ids
    (``<id>@rewritten``); whether there were any."""
    rewritten = [Document(id=doc_id + REWRITTEN_SUFFIX, text=truths[doc_id], source=source)
                 for doc_id in stored]
    if rewritten:
        kb.ingest(rewritten, tier="neutral", writer=editor, source="editor", guard=screener)
    return bool(rewritten)
