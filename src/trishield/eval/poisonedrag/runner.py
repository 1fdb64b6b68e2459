"""``trishield eval poisonedrag``: build the KBs, ask every block's questions under every
defense, checkpoint each answer, then score and write the report.

Resumable: answers are checkpointed one by one (:mod:`.records`) and LLM responses are
cached, so an interrupted run picks up at the question it was on. The checkpoint file is named
by a fingerprint of everything that changes an answer (profile, seed, panel, k, ring settings,
scoring version, and a hash of the defense code), so a changed configuration or a changed
defense never reuses stale answers.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from trishield.defenses.retrievers import KBRetriever
from trishield.eval import report as rep
from trishield.eval.poisonedrag import knowledge_bases as kbs
from trishield.eval.poisonedrag.attacks import load_targets, seeded_order
from trishield.eval.poisonedrag.conditions import ConditionedKB
from trishield.eval.poisonedrag.defenses import DEFENSES, info, make_asker
from trishield.eval.poisonedrag.plan import (
    QUICK_DEFENSES,
    QUICK_SIZES,
    TIME_DEFENSES,
    Block,
    Sizes,
    families_of,
    full_plan,
    time_plan,
)
from trishield.eval.poisonedrag.provenance import Provenance
from trishield.eval.poisonedrag.questions import (
    Question,
    nq_questions,
    squad_questions,
    target_questions,
)
from trishield.eval.poisonedrag.records import Checkpoint, extract
from trishield.eval.poisonedrag.render import render_html, render_markdown, render_timing
from trishield.eval.poisonedrag.scoring import SCORING_VERSION, score, timing
from trishield.kb import KnowledgeBase
from trishield.kb.datasets import DATASETS, file_sha256
from trishield.llm.panel import (
    DEFAULT_SECOND_READER,
    FAST_PANEL,
    MemberSpec,
    build_panel,
    build_second_reader,
)
from trishield.settings import PipelineConfig

Progress = Callable[[int, int, str], None]
QUICK_FILLER = {"farming": 20, "insider": 100}
"""``--quick``: the filler each farming writer and the insider store (200 and 1,000 in the
real run): embedding them is most of a timed KB's build."""


@dataclass(frozen=True)
class PoisonedRAGOptions:
    out: Path
    kb_profile: str = "wiki5k"
    work_dir: Path = Path(".trishield/eval/poisonedrag")
    defenses: tuple[str, ...] = DEFENSES
    panel: tuple[MemberSpec, ...] = FAST_PANEL
    second_reader: str | None = DEFAULT_SECOND_READER
    """Ring 3's second reader (``None``: none); the single-reader rows never ask it."""
    k: int = 5
    seed: int = 0
    quick: bool = False
    report_only: bool = False
    """Score what is checkpointed and ask nothing: the full matrix takes hours on 2 cores, and
    its rows can be read while it runs (incomplete rows say how many answers they hold)."""
    checkpoint: Path | None = None
    """The answer checkpoint; None: ``records-<configuration>.jsonl`` in ``work_dir``. A
    matrix spread over several machines carries its checkpoint from one to the next (the
    KBs are rebuilt identically from the data and the seed); one of another configuration
    is refused, as in the work dir."""
    sizes: Sizes = field(default_factory=Sizes)
    time_conditions: bool = False
    """Ask the timed conditions instead of the matrix (:func:`.plan.time_plan`: who writes
    first and when, farming, insider, silencing), each on ``sizes.adaptive`` targets."""
    time_targets: int | None = None
    """With ``time_conditions``: the targets per block (default ``sizes.adaptive``)."""
    time_blocks: tuple[str, ...] | None = None
    """With ``time_conditions``: the timed conditions to ask (default every one)."""
    progress: Progress = field(default=lambda done, total, label: None)
    say: Callable[[str], None] = field(default=lambda message: None)


def _config(options: PoisonedRAGOptions) -> PipelineConfig:
    config = PipelineConfig(backend="dense")
    return replace(config, scorer=replace(config.scorer, context=options.k))


DEFENSE_CODE = ("rings", "defenses", "llm", "answers.py", "pipeline.py", "stages.py",
                "text.py", "kb/indexes/retrieval.py")
"""The code that decides an answer, relative to the ``trishield`` package."""


def defense_code_sha256(package: Path | None = None) -> str:
    """One hash over the source of :data:`DEFENSE_CODE`: answers checkpointed by other code
    are another experiment, so a resumed matrix refuses them (delete the checkpoint to start
    over) instead of mixing them into one table."""
    package = package or Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for name in DEFENSE_CODE:
        path = package / name
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(source.relative_to(package).as_posix().encode() + b"\0")
            digest.update(source.read_bytes() + b"\0")
    return digest.hexdigest()


def _fingerprint(options: PoisonedRAGOptions, config: PipelineConfig) -> str:
    parts = {"scoring": SCORING_VERSION, "code": defense_code_sha256(),
             "profile": options.kb_profile, "seed": options.seed,
             "panel": [m if isinstance(m, str) else dict(m) for m in options.panel],
             "second_reader": options.second_reader, "k": options.k,
             "config": asdict(config), "quick": options.quick}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def block_questions(block: Block, order: list, stored: set[str], seed: int) -> list[Question]:
    """The questions ``block`` asks: the first of the targets' seeded ``order``, or SQuAD /
    NQ questions about documents the KB ``stored`` (``benchmarks/studies/misspelt_detector.py``
    reads the matrix's questions from here too)."""
    if block.questions in ("targets", "benign-targets"):
        return target_questions(order, block.size)
    if block.questions == "benign-squad":
        return squad_questions(stored, block.size, seed)
    return nq_questions(stored, block.size, seed)


def _stored_ids(path: Path) -> set[str]:
    with KnowledgeBase.open(path) as kb:
        return set(kb.document_ids())


def run_poisonedrag(options: PoisonedRAGOptions) -> dict[str, Any]:
    """Run (or resume) the matrix; write report.json/.html/.md, timing.json, timing.html."""
    started = time.perf_counter()
    if options.quick:
        options = replace(options, sizes=QUICK_SIZES, kb_profile="mini")
        if options.defenses == DEFENSES:
            options = replace(options, defenses=QUICK_DEFENSES)
    if options.time_conditions:
        if options.defenses in (DEFENSES, QUICK_DEFENSES):
            options = replace(options, defenses=TIME_DEFENSES)
        if options.time_targets is not None:
            options = replace(options, sizes=replace(options.sizes,
                                                     adaptive=options.time_targets))
    config = _config(options)
    fingerprint = _fingerprint(options, config)
    blocks = (time_plan(options.defenses, options.sizes, options.time_blocks)
              if options.time_conditions
              else full_plan(options.defenses, options.sizes, quick=options.quick))
    targets = load_targets()
    order = seeded_order(targets, options.seed)
    attacked = order[:max(b.size for b in blocks if b.questions == "targets")]
    say = options.say
    # opened first: a checkpoint of another configuration is refused before hours of KBs
    checkpoint = Checkpoint(options.checkpoint or
                            options.work_dir / f"records-{fingerprint[:16]}.jsonl", fingerprint)
    if checkpoint.dropped_torn_line:
        say("the checkpoint's last line was torn by an interruption; that answer is redone")

    say(f"building the {options.kb_profile} base KB (embedding the clean passages)")
    clean = kbs.profile_documents(options.kb_profile, targets, options.seed)
    base = kbs.build_base(options.work_dir, options.kb_profile, clean)
    family_kbs: dict[tuple[str, str, bool], Path] = {}
    for family, writers in families_of(blocks):
        for guarded in (False, True):
            say(f"building the {family} KB (poisons by {writers}; "
                f"{'Ring 1 at ingest' if guarded else 'plain'})")
            family_kbs[family, writers, guarded] = kbs.build_family(
                options.work_dir, base, family, attacked, options.seed, guarded=guarded,
                writers=writers, say=say,
                filler_documents=QUICK_FILLER.get(writers) if options.quick else None)
    stored = _stored_ids(base)

    asked = {block.name: block_questions(block, order, stored, options.seed)
             for block in blocks}
    planned = [_key(block, defense, question) for block in blocks for defense in block.defenses
               for question in asked[block.name][:block.limit(defense)]]
    pending = [key for key in planned if key not in checkpoint]
    say(f"{len(planned) - len(pending)} of {len(planned)} answers already checkpointed, "
        f"{len(pending)} to go")
    blocks_to_ask = [] if options.report_only else blocks
    panel = [] if options.report_only else build_panel(options.panel)
    second = None if options.report_only else build_second_reader(options.second_reader)
    provenance = Provenance(options.work_dir / "keys", options.seed)
    # the perplexity threshold is calibrated on clean training passages: 300 for the real
    # run, 30 for the smoke run (scoring a passage takes seconds on 2 cores)
    baseline_config = {"perplexity-filter": {"sample": 30 if options.quick else 300,
                                             "seed": options.seed}}
    done = 0
    for block in blocks_to_ask:
        for defense in block.defenses:
            todo = [q for q in asked[block.name][:block.limit(defense)]
                    if _key(block, defense, q) not in checkpoint]
            if not todo:
                continue
            path = base if block.condition is None else family_kbs[
                block.condition.family, block.condition.writers, info(defense).uses_ring1_kb]
            with KnowledgeBase.open(path) as kb:
                view = KBRetriever(kb, config.backend) if block.condition is None \
                    else ConditionedKB(kb, block.condition, provenance,
                                       backend=config.backend, k=options.k)
                ask = make_asker(defense, view, panel, config, baseline_config,
                                 second_reader=second)
                for question in todo:
                    if isinstance(view, ConditionedKB) and question.target is not None:
                        view.target = question.target.id
                        view.target_number = question.target.number
                    record = extract(ask(question.text), k=options.k)
                    if isinstance(view, ConditionedKB):
                        record["realised_poisons"] = view.realised_poisons
                    record |= {"key": _key(block, defense, question), "block": block.name,
                               "defense": defense, "question": question.id}
                    checkpoint.add(record)
                    done += 1
                    options.progress(done, len(pending), f"{block.name} / {defense}")

    payload = _payload(options, blocks, asked, checkpoint, family_kbs, base, config)
    checkpointed = sum(key in checkpoint for key in planned)
    payload["answers"] = {"planned": len(planned), "checkpointed": checkpointed,
                          "complete": checkpointed == len(planned)}
    options.out.mkdir(parents=True, exist_ok=True)
    rep.write_atomic(options.out / "report.json", rep.dumps(payload))
    rep.write_atomic(options.out / "report.html", render_html(payload))
    rep.write_atomic(options.out / "report.md", render_markdown(payload))
    timings = timing(checkpoint.records.values(), blocks) | {
        "wall_seconds_this_run": round(time.perf_counter() - started, 1),
        "answers_computed_this_run": done}
    rep.write_atomic(options.out / "timing.json", rep.dumps(timings))
    rep.write_atomic(options.out / "timing.html", render_timing(timings))
    return payload


def _key(block: Block, defense: str, question: Question) -> str:
    return f"{block.name}|{defense}|{question.id}"


def _payload(options: PoisonedRAGOptions, blocks: list[Block], asked: dict[str, list[Question]],
             checkpoint: Checkpoint, family_kbs: dict[tuple[str, str, bool], Path], base: Path,
             config: PipelineConfig) -> dict[str, Any]:
    records = {(r["block"], r["defense"], r["question"]): r for r in checkpoint.rows()}
    results = {block.name: score(block, asked[block.name], records, options.seed)
               for block in blocks}
    ingest = {kbs.ingest_label(family, writers): {
        "poisons": json.loads((path / kbs.MARKER).read_text())["poisons"],
        "quarantined": len(kbs.quarantined(path))}
        for (family, writers, guarded), path in sorted(family_kbs.items()) if guarded}
    clean = kbs.screen_clean(base, config.guard, code=defense_code_sha256())
    clean_flagged = len(clean["would_quarantine"])
    for facts in ingest.values():
        caught = facts["quarantined"]
        facts["recall"] = caught / facts["poisons"] if facts["poisons"] else None
        facts["precision_vs_clean_base"] = (caught / (caught + clean_flagged)
                                            if caught + clean_flagged else None)
    return {
        "scoring_version": SCORING_VERSION,
        "ring1_clean_screening": {"screened": clean["screened"],
                                  "would_quarantine": clean_flagged,
                                  "false_positive_rate": clean_flagged / clean["screened"],
                                  "ids": clean["would_quarantine"]},
        "configuration": {
            "defense_code_sha256": defense_code_sha256(),
            "kb_profile": options.kb_profile, "quick": options.quick, "seed": options.seed,
            "k": options.k, "panel": [m if isinstance(m, str) else dict(m)
                                      for m in options.panel],
            "second_reader": options.second_reader,
            "reader": "the first panel member answers for every single-reader defense",
            "pipeline": asdict(config), "sizes": asdict(options.sizes),
            "time_conditions": options.time_conditions},
        "datasets": {name: file_sha256(DATASETS[name].verified_path())
                     for name in ("poisonedrag-nq", "poisonedrag-nq-gt", "squad-dev",
                                  "nq-open", "squadshifts-new-wiki")},
        "base_kb": {key: json.loads((base / kbs.MARKER).read_text())[key]
                    for key in ("documents", "chunks")},
        "ring1_at_ingest": ingest,
        "blocks": [block.as_dict() for block in blocks],
        "results": results,
    }
