"""The benchmark's timed conditions (issue 50): the KB's clock writes the base a year before
the attack, and each timed setting writes its campaign on a schedule (eval/poisonedrag/
schedules.py). Real KBs (MiniLM, SQLite) on a small base; the answers are the matrix's own
code path (`trishield eval poisonedrag --time-conditions`), read with the extractive reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trishield.errors import InputError
from trishield.eval.poisonedrag import knowledge_bases as kbs
from trishield.eval.poisonedrag import schedules
from trishield.eval.poisonedrag.attacks import get_family, load_targets
from trishield.eval.poisonedrag.conditions import Condition
from trishield.eval.poisonedrag.plan import TIME_DEFENSES, Sizes, families_of, time_plan
from trishield.kb import KnowledgeBase
from trishield.kb.datasets import wiki5k_documents
from trishield.rings.evidence import DAY_S

TARGETS = load_targets()
YEAR = schedules.BASE_AGE_DAYS * DAY_S


def _small_base(tmp_path: Path, targets, *, extra: int) -> Path:
    truth = {doc_id for t in targets for doc_id, _ in t.gt_passages}
    documents = wiki5k_documents()
    clean = [d for d in documents if d.id in truth] + [
        d for d in documents if d.id not in truth][:extra]
    return kbs.build_base(tmp_path, "mini", clean)


def _origin(base: Path) -> float:
    with KnowledgeBase.open(base, read_only=True) as kb:
        return max(d["ingested_at"] for d in kb.documents())


def test_time_plan_asks_every_timed_condition_of_the_four_defenses() -> None:
    blocks = time_plan(TIME_DEFENSES, Sizes())
    names = [b.name for b in blocks]
    assert names == ["benign-targets", "attacker-first/minutes", "attacker-first/week",
                     "farming", "insider", "insider/trusted-truth", "silencing",
                     "newcomer-truth"]
    assert all(b.size == 50 and b.defenses == TIME_DEFENSES for b in blocks
               if b.name != "insider/trusted-truth")
    signed = next(b for b in blocks if b.name == "insider/trusted-truth")
    assert signed.condition is not None and signed.condition.provenance == "trusted-clean"
    assert "ring12" in signed.defenses and "full-gated" in signed.defenses
    # the insider and its signed-truth variant share one KB
    assert ("diverse", "insider") in families_of(blocks)
    assert len([f for f in families_of(blocks) if f[1] == "insider"]) == 1
    with pytest.raises(InputError, match="writer setting is defined"):
        Condition("x", "diverse", "untrusted", writers="farming")


def test_a_run_may_ask_only_some_timed_conditions() -> None:
    """``--time-block``: the chosen conditions beside the clean floor; a name that is not a
    timed condition is refused with the ones that are."""
    blocks = time_plan(TIME_DEFENSES, Sizes(), only=["silencing", "attacker-first/week"])
    assert [b.name for b in blocks] == ["benign-targets", "attacker-first/week", "silencing"]
    with pytest.raises(InputError, match="unknown timed condition farmin; choose from"):
        time_plan(TIME_DEFENSES, Sizes(), only=["farmin"])
    with pytest.raises(InputError, match="unknown timed condition"):
        time_plan(TIME_DEFENSES, Sizes(), only=[])


@pytest.mark.slow
def test_every_poisoned_kb_is_written_a_year_after_its_base(tmp_path: Path) -> None:
    targets = TARGETS[:2]
    base = _small_base(tmp_path, targets, extra=10)
    origin = _origin(base)
    poisons = [d.id for t in targets for d in get_family("published").poisons(t, 0)]
    for writers in ("attacker", "sybil", "sleeper"):
        family = kbs.build_family(tmp_path, base, "published", targets, 0, guarded=False,
                                  writers=writers, sleeper_documents=1)
        with KnowledgeBase.open(family, read_only=True) as kb:
            times = [kb.store.document(p)["ingested_at"] - origin for p in poisons]
            since = kb.writers_since()
        assert all(YEAR <= t < YEAR + 600 for t in times), writers
        assert since[kbs.CLEAN_WRITER] <= origin


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["attacker-first", "attacker-first-week"])
def test_attacker_first_writes_the_truth_again_after_the_poisons(tmp_path: Path,
                                                                 setting: str) -> None:
    """The targets' true passages leave the base copy (tombstoned) and a new neutral writer
    writes them again after every poison: ten minutes, or a week."""
    targets = TARGETS[:2]
    base = _small_base(tmp_path, targets, extra=10)
    origin = _origin(base)
    built = kbs.build_family(tmp_path, base, "diverse", targets, 0, guarded=False,
                             writers=setting)
    poisons = [d.id for t in targets for d in get_family("diverse").poisons(t, 0)]
    truths = {doc_id for t in targets for doc_id, _ in t.gt_passages}
    facts = json.loads((built / kbs.MARKER).read_text())
    with KnowledgeBase.open(built, read_only=True) as kb:
        posted = {p: kb.store.document(p) for p in poisons}
        rewritten = {d: kb.store.document(d + schedules.REWRITTEN_SUFFIX) for d in truths}
        assert all(kb.store.document(d) is None for d in truths)
    writers = {row["writer"] for row in posted.values()}
    assert len(writers) == len(poisons)  # each poison its own writer
    last_poison = max(row["ingested_at"] for row in posted.values())
    lead = schedules.ATTACKER_FIRST_LEAD_S[setting]
    assert facts["truths_rewritten"] == len(truths) and facts["editor"] not in writers
    for row in rewritten.values():
        assert row is not None and row["writer"] == facts["editor"]
        assert lead <= row["ingested_at"] - last_poison < lead + 600
    assert all(YEAR <= row["ingested_at"] - origin < YEAR + 600 for row in posted.values())


@pytest.mark.slow
def test_newcomer_truth_writes_the_truth_again_with_no_poison(tmp_path: Path) -> None:
    """The control: the targets' true passages leave the base copy and a new neutral writer
    writes them again a year later; nothing else is written (no poison, no filler)."""
    targets = TARGETS[:2]
    base = _small_base(tmp_path, targets, extra=10)
    origin = _origin(base)
    built = kbs.build_family(tmp_path, base, "diverse", targets, 0, guarded=False,
                             writers="newcomer-truth")
    truths = {doc_id for t in targets for doc_id, _ in t.gt_passages}
    facts = json.loads((built / kbs.MARKER).read_text())
    poisons = [d.id for t in targets for d in get_family("diverse").poisons(t, 0)]
    with KnowledgeBase.open(built, read_only=True) as kb:
        assert all(kb.store.document(p) is None for p in poisons)
        assert all(kb.store.document(d) is None for d in truths)
        rewritten = [kb.store.document(d + schedules.REWRITTEN_SUFFIX) for d in truths]
        writers = kb.documents_per_writer()
    assert facts["truths_rewritten"] == len(truths) and facts["poisons"] == 0
    assert writers[facts["editor"]] == len(truths)
    assert set(writers) == {kbs.CLEAN_WRITER, facts["editor"]}
    for row in rewritten:
        assert row is not None and row["writer"] == facts["editor"]
        assert YEAR <= row["ingested_at"] - origin < YEAR + 600


@pytest.mark.slow
def test_farming_and_insider_buy_volume_and_tenure(tmp_path: Path) -> None:
    """Farming: each poison's writer first stores its filler (minutes before its poison);
    insider: one writer stores its filler with the base, a year before it posts."""
    targets = TARGETS[:1]
    base = _small_base(tmp_path, targets, extra=10)
    origin = _origin(base)
    poisons = [d.id for d in get_family("diverse").poisons(targets[0], 0)]
    farmed = kbs.build_family(tmp_path, base, "diverse", targets, 0, guarded=False,
                              writers="farming", filler_documents=3)
    with KnowledgeBase.open(farmed, read_only=True) as kb:
        counts = kb.documents_per_writer()
        rows = {p: kb.store.document(p) for p in poisons}
        since = kb.writers_since()
    for row in rows.values():
        assert counts[row["writer"]] == 3 + 1
        assert 0 <= row["ingested_at"] - since[row["writer"]] < 60  # no tenure to speak of
    insider = kbs.build_family(tmp_path, base, "diverse", targets, 0, guarded=False,
                               writers="insider", filler_documents=4)
    facts = json.loads((insider / kbs.MARKER).read_text())
    with KnowledgeBase.open(insider, read_only=True) as kb:
        counts = kb.documents_per_writer()
        rows = {p: kb.store.document(p) for p in poisons}
        since = kb.writers_since()
    assert {row["writer"] for row in rows.values()} == {facts["insider"]}
    assert counts[facts["insider"]] == 4 + len(poisons)
    assert since[facts["insider"]] - origin < 600
    assert all(YEAR <= row["ingested_at"] - since[facts["insider"]] < YEAR + 600
               for row in rows.values())
    with pytest.raises(InputError, match="filler documents"):
        kbs.build_family(tmp_path, base, "diverse", targets, 0, guarded=False,
                         writers="farming", filler_documents=-1)


@pytest.mark.slow
def test_time_conditions_run_through_the_cli_with_the_extractive_reader(
        tmp_path: Path) -> None:
    """`trishield eval poisonedrag --quick --time-conditions`: every timed block answered,
    the silencing block says which clean answers the attack silenced."""
    result = subprocess.run(
        [sys.executable, "-m", "trishield.cli", "eval", "poisonedrag", "--quick",
         "--time-conditions", "--time-targets", "1", "--panel", "extractive",
         "--defense", "none", "--defense", "full-gated",
         "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["configuration"]["time_conditions"] and report["answers"]["complete"]
    assert set(report["results"]) == {b.name for b in time_plan(("none", "full-gated"),
                                                                Sizes(adaptive=1))}
    silencing = report["results"]["silencing"]["full-gated"]
    assert "kept_of_clean_correct" in silencing and isinstance(silencing["silenced"], list)
    week = report["results"]["attacker-first/week"]["full-gated"]
    assert week["disputes_weighed"] == len(week["disputes"])
    assert all(len(d["sides"]) == 2 and all(side["writers"] for side in d["sides"])
               for d in week["disputes"])
    for flags in (["--time-targets", "2"], ["--time-block", "farming"]):
        refused = subprocess.run([sys.executable, "-m", "trishield.cli", "eval", "poisonedrag",
                                  "--out", str(tmp_path / "x"), *flags],
                                 capture_output=True, text=True, check=False, timeout=120)
        assert refused.returncode == 2 and "need --time-conditions" in refused.stderr


def test_attacker_first_blocks_list_every_dispute_weighed() -> None:
    """Where the truth is written after the poisons, every answer that weighed claims of
    different writers is listed with its decision (the product's disputes queue, which the
    benchmark cannot write: it only reads its KBs), in the JSON and in the Markdown report;
    other blocks list none."""
    from trishield.eval.poisonedrag.plan import Block
    from trishield.eval.poisonedrag.questions import target_questions
    from trishield.eval.poisonedrag.render import render_markdown
    from trishield.eval.poisonedrag.scoring import score

    questions = target_questions(TARGETS, 2)
    first, second = questions
    week = Condition("attacker-first/week", "diverse", writers="attacker-first-week")
    sybil = Condition("diverse", "diverse", writers="sybil")
    lie = {"outcome": "stands", "reason": "'x' has independent support 0.41 >= 2 x 0.10",
           "sides": [{"claim": first.target.incorrect, "weight": 0.41,
                      "writers": ["contributor-1"], "stood_s": 7 * DAY_S},
                     {"claim": first.target.correct, "weight": 0.1,
                      "writers": ["editor"], "stood_s": 0.0}]}

    def record(question, answer, dispute):
        return {"answer": answer, "refused": answer is None, "reason": "", "context": [],
                "retrieved": [], "pool": [], "inputs": {}, "removed": {}, "llm_calls": 1,
                "llm_calls_uncached": 1, "tokens": {"prompt": 10, "completion": 2},
                "dispute": dispute}

    blocks = [Block("attacker-first/week", "targets", week, ("full-gated",), 2, {}),
              Block("diverse/sybil", "targets", sybil, ("full-gated",), 2, {})]
    records = {}
    for block in blocks:
        records[(block.name, "full-gated", first.id)] = record(first, first.target.incorrect,
                                                                lie)
        records[(block.name, "full-gated", second.id)] = record(second, None, None)
    timed = score(blocks[0], questions, records)["full-gated"]
    assert timed["disputes_weighed"] == 1
    listed = timed["disputes"][0]
    assert listed["question"] == first.id and listed["lie"] and listed["outcome"] == "stands"
    assert "disputes" not in score(blocks[1], questions, records)["full-gated"]
    payload = {"blocks": [blocks[0].as_dict()],
        "results": {"attacker-first/week": {"full-gated": timed}},
        "configuration": {"kb_profile": "wiki5k", "k": 5, "seed": 0},
        "scoring_version": "test", "answers": {"complete": True}}
    markdown = render_markdown(payload)
    assert "Disputes weighed where the truth was written after the poisons" in markdown
    assert "stood 7.0 d" in markdown and first.id in markdown
