"""The PoisonedRAG benchmark: attack generators, provenance, the composed sweep, the resumable
checkpoint, scoring arithmetic, and a ``--quick`` smoke run that must be complete, consistent
and byte-identical when answered again. No test asserts an ASR or accuracy value."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trishield.answers import contains_answer
from trishield.errors import InputError
from trishield.eval.metrics import OUTCOMES
from trishield.eval.poisonedrag.attacks import (
    FAMILIES,
    get_family,
    is_poison,
    load_targets,
    poison_target,
    seeded_order,
)
from trishield.eval.poisonedrag.conditions import Condition, poisons_in_context
from trishield.eval.poisonedrag.plan import Block, full_plan
from trishield.eval.poisonedrag.provenance import Provenance
from trishield.eval.poisonedrag.questions import target_questions
from trishield.eval.poisonedrag.records import Checkpoint
from trishield.eval.poisonedrag.render import render_markdown
from trishield.eval.poisonedrag.scoring import score
from trishield.eval.report import markdown_table

TARGETS = load_targets()


def test_targets_are_the_published_hundred_in_order() -> None:
    assert len(TARGETS) == 100
    numbers = [t.number for t in TARGETS]
    assert numbers == sorted(numbers) and len(set(numbers)) == 100
    assert all(len(t.adv_texts) == 5 and t.incorrect and t.correct for t in TARGETS)


def test_published_family_is_question_dot_adv_text() -> None:
    target = TARGETS[0]
    docs = get_family("published").poisons(target, seed=0)
    assert [d.text for d in docs] == [f"{target.question}. {a}" for a in target.adv_texts]
    assert all(is_poison(d.id) and poison_target(d.id) == target.id for d in docs)


def test_every_family_carries_the_wrong_answer_and_is_seed_deterministic() -> None:
    for family in FAMILIES.values():
        for target in TARGETS[:10]:
            first = family.poisons(target, seed=0)
            assert [d.text for d in first] == [d.text for d in family.poisons(target, seed=0)]
            assert len({d.id for d in first}) == len(first)
            if family.name in ("template", "gt-swap"):  # the published texts may only
                for document in first:                     # imply a yes/no answer
                    assert contains_answer(document.text, target.incorrect), (family.name,
                                                                             document.text)


def test_gt_swap_replaces_only_the_answer_or_declines() -> None:
    swapped = declined = 0
    for target in TARGETS:
        docs = get_family("gt-swap").poisons(target, seed=0)
        word = re.compile(rf"(?<!\w){re.escape(target.correct)}(?!\w)", re.IGNORECASE)
        has_answer = [text for _, text in target.gt_passages
                      if word.search(text) and target.correct.lower() not in ("yes", "no")]
        assert len(docs) == len(has_answer)
        swapped += bool(docs)
        declined += not docs
        for document in docs:
            assert not word.search(document.text) or word.search(target.incorrect)
    assert swapped > 50 and declined > 0  # both paths are exercised on the real data


def test_split_claim_separates_topic_from_claim() -> None:
    target = TARGETS[3]
    docs = get_family("split-claim").poisons(target, seed=0)
    assert len(docs) == 4
    for topic, claim in zip(docs[::2], docs[1::2], strict=True):
        assert target.question in topic.text and target.question not in claim.text
        record = topic.text.rsplit("given in ", 1)[1].rstrip(".")
        assert claim.text.lower().startswith(record.lower())


def test_unknown_family_and_bad_condition_are_refused() -> None:
    with pytest.raises(InputError, match="unknown attack family"):
        get_family("nope")
    with pytest.raises(InputError, match="provenance"):
        Condition("x", "published", provenance="sort-of-trusted")
    with pytest.raises(InputError, match="fraction"):
        Condition("x", "mixed", fraction=1.5)


@pytest.mark.parametrize("fraction", [0.2, 0.4, 0.5, 0.6, 0.8])
def test_poison_fraction_is_exact_on_average(fraction: float) -> None:
    counts = [poisons_in_context(fraction, 5, number) for number in range(1, 101)]
    assert sum(counts) / len(counts) == pytest.approx(fraction * 5)
    assert max(counts) - min(counts) <= 1


def test_provenance_is_decided_by_the_services_signature_check(tmp_path: Path) -> None:
    provenance = Provenance(tmp_path / "keys", seed=0)
    digest = "ab" * 32
    tier = provenance.tier_of
    assert tier("nq-gt:doc1", digest, stored="neutral", setting="trusted-clean") == "trusted"
    assert "signed by trusted publisher wiki-publisher" in provenance.checks["nq-gt:doc1"]
    assert tier("atk:mixed:test1:0", digest, stored="untrusted",
                setting="trusted-clean") == "untrusted"
    assert tier("atk:mixed:test1:0", digest, stored="untrusted", setting="forged") == "untrusted"
    assert "signature does not verify" in provenance.checks["atk:mixed:test1:0"]
    assert tier("atk:mixed:test1:1", digest, stored="untrusted",
                setting="forged-unchecked") == "trusted"
    assert tier("atk:mixed:test1:0", digest, stored="untrusted", setting="neutral") == "neutral"
    assert tier("atk:mixed:test1:0", digest, stored="untrusted",
                setting="untrusted") == "untrusted"
    # a genuine tag covers one content hash only: moved to another text, it fails
    from trishield.provenance.signing import decide_provenance

    genuine = provenance.tag(digest, forged=False)
    writer = provenance.store.api_keys()[0]
    assert decide_provenance(provenance.store, writer, digest, genuine).verified
    assert not decide_provenance(provenance.store, writer, "cd" * 32, genuine).verified
    # reopening the same key store reuses the registered publisher and writers
    again = Provenance(tmp_path / "keys", seed=0)
    assert len(again.store.api_keys()) == 2 and len(again.store.publishers()) == 1


def test_subsets_nest() -> None:
    order = seeded_order(TARGETS, 0)
    assert order == seeded_order(TARGETS, 0) != seeded_order(TARGETS, 1)
    small, large = target_questions(order, 20), target_questions(order, 30)
    assert [q.id for q in small] == [q.id for q in large[:20]]


def test_plan_covers_every_family_and_setting() -> None:
    blocks = full_plan()
    names = {b.name for b in blocks}
    assert {"published", "template", "question-moved", "claim-only", "gt-swap", "split-claim",
            "single", "published/untrusted", "mixed/forged", "mixed/forged-unchecked",
            "benign-targets", "benign-squad", "benign-nq"} <= names
    assert {f"fraction-{p}/{s}" for p in (0.2, 0.4, 0.5, 0.6, 0.8)
            for s in ("neutral", "trusted-clean")} <= names
    with pytest.raises(InputError, match="unknown defense"):
        full_plan(("none", "magic"))


# -- checkpoint --------------------------------------------------------------------------------

def test_checkpoint_resumes_and_survives_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    checkpoint = Checkpoint(path, "fp")
    checkpoint.add({"key": "a|none|q1", "answer": "x"})
    checkpoint.add({"key": "a|none|q2", "answer": "y"})
    with path.open("a") as handle:
        handle.write('{"key": "a|none|q3", "ans')  # killed mid-write
    reopened = Checkpoint(path, "fp")
    assert reopened.dropped_torn_line
    assert set(reopened.records) == {"a|none|q1", "a|none|q2"}
    assert Checkpoint(path, "fp").records == reopened.records  # rewritten clean
    with pytest.raises(InputError, match="another configuration"):
        Checkpoint(path, "other")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    with pytest.raises(InputError, match="corrupt checkpoint line"):
        Checkpoint(path, "fp")


# -- scoring arithmetic ------------------------------------------------------------------------

def _record(answer: str | None, *, retrieved: list[str], context: list[str],
            removed: dict | None = None, inputs: dict | None = None) -> dict:
    return {"answer": answer, "refused": answer is None, "reason": "", "retrieved": retrieved,
            "context": context, "removed": removed or {}, "inputs": inputs or {},
            "llm_calls": 2, "llm_calls_uncached": 2,
            "tokens": {"prompt": 100, "completion": 5}, "latency_s": 1.0}


def test_scoring_counts_outcomes_and_detection_by_hand() -> None:
    order = [TARGETS[0], TARGETS[1], TARGETS[2]]
    questions = target_questions(order, 3)
    block = Block("published", "targets", Condition("published", "published"), ("ring1",), 3)
    p = [f"atk:published:{t.id}:0" for t in order]
    records = {
        ("published", "ring1", order[0].id): _record(
            f"It is {order[0].incorrect}.", retrieved=[p[0], "c1"], context=[p[0], "c1"],
            removed={"ring1": ["c2"]}, inputs={"ring1": [p[0], "c1", "c2"]}),
        ("published", "ring1", order[1].id): _record(
            order[1].correct, retrieved=[p[1], "c3"], context=["c3"],
            removed={"ring1": [p[1]]}, inputs={"ring1": [p[1], "c3"]}),
        ("published", "ring1", order[2].id): _record(
            None, retrieved=[p[2]], context=[p[2]], removed={"ring1": []},
            inputs={"ring1": [p[2]]}),
    }
    result = score(block, questions, records)["ring1"]
    assert result["complete"] and result["answered"] == 3
    assert result["outcomes"] == {"succeeded": 1, "blocked": 1, "evaded": 1}
    assert sum(result["outcomes"][o] for o in OUTCOMES) == result["applicable"] == 3
    assert result["asr"] == pytest.approx(1 / 3)
    assert result["retrieval_asr"] == 1.0
    assert result["context_exposure"] == pytest.approx(2 / 3)
    assert result["refusals"] == 1
    assert result["accuracy_under_attack"] == pytest.approx(1 / 3)
    detection = result["detection"]["ring1"]
    assert (detection["removed"], detection["poisons_removed"], detection["poisons_seen"]) == (
        2, 1, 3)
    assert detection["precision"] == 0.5 and detection["recall"] == pytest.approx(1 / 3)
    low, high = result["asr_ci95"]
    assert 0.0 <= low <= result["asr"] <= high <= 1.0


def test_scoring_reports_missing_answers_as_incomplete() -> None:
    questions = target_questions([TARGETS[0], TARGETS[1]], 2)
    block = Block("published", "targets", Condition("published", "published"), ("none",), 2)
    records = {("published", "none", TARGETS[0].id): _record(
        "x", retrieved=["c"], context=["c"])}
    result = score(block, questions, records)["none"]
    assert not result["complete"] and (result["answered"], result["asked"]) == (1, 2)


def test_markdown_headline_says_what_each_cell_stands_on() -> None:
    attacked = {"name": "published", "condition": {"family": "published"}, "size": 4}
    benign = {"name": "benign-squad", "condition": None, "size": 4}
    sweep = {"name": "fraction-0.5/neutral", "condition": {"family": "mixed"}, "size": 2}

    def attack(answered: int, asked: int, asr: float) -> dict:
        return {"answered": answered, "asked": asked, "complete": answered == asked, "asr": asr,
                "asr_ci95": [0.0, 1.0], "outcomes": {"blocked": 1, "succeeded": 1, "evaded": 0},
                "accuracy_under_attack": 0.5, "refusals": 0, "cost": {"llm_calls_per_query": 1.0}}

    payload = {
        "scoring_version": "v", "configuration": {"kb_profile": "mini", "k": 5, "seed": 0},
        "answers": {"planned": 9, "checkpointed": 8, "complete": False},
        "blocks": [attacked, benign, sweep],
        "results": {"published": {"none": attack(4, 4, 0.75), "paraphrase": attack(2, 2, 0.5),
                                  "expansion-k50": attack(1, 2, 1.0)},
                    "benign-squad": {"none": {"answered": 4, "asked": 4, "complete": True,
                                              "accuracy": 0.25}},
                    "fraction-0.5/neutral": {"none": attack(2, 2, 0.0)}}}
    text = render_markdown(payload)
    assert "(partial: 8 of 9 answers so far)" in text
    assert "| none | 0.75 | 0.25 |" in text
    assert "| paraphrase | 0.50 (n=2) | not run |" in text
    assert "| expansion-k50 | 1.00 (1/2) | not run |" in text
    assert "| fraction-0.5/neutral | 0.00 |" in text
    assert markdown_table(["a|b"], [[None], [0.5]]) == "| a\\|b |\n|---|\n|  |\n| 0.500 |\n"


# -- the CLI smoke run -------------------------------------------------------------------------

def _run(out: Path, work: Path, *extra: str) -> subprocess.CompletedProcess:
    # TriShield's settings and RAGDefender with the extractive reader, so the smoke run needs
    # no LLM (the perplexity filter's real LM is exercised in test_baselines.py)
    defenses = [arg for name in ("none", "ring1", "ring2", "full-gated", "ragdefender-pool20")
                for arg in ("--defense", name)]
    return subprocess.run(
        [sys.executable, "-m", "trishield.cli", "eval", "poisonedrag", "--quick", "--out",
         str(out), "--work-dir", str(work), "--panel", "extractive", *defenses, *extra],
        capture_output=True, text=True, timeout=1200, check=False)


def _assert_consistent(report: dict) -> None:
    assert report["scoring_version"] and len(report["datasets"]) == 5
    answers = report["answers"]
    assert answers["complete"] and answers["checkpointed"] == answers["planned"] > 0
    for block in report["blocks"]:
        results = report["results"][block["name"]]
        assert set(results) == set(block["defenses"])
        for result in results.values():
            assert result["complete"] and result["answered"] == result["asked"] > 0
            if block["condition"] is None:
                assert 0 <= result["false_refusals"] <= result["questions"]
                continue
            assert sum(result["outcomes"].values()) == result["applicable"]
            assert result["applicable"] + len(result["not_applicable"]) == result["targets"]
            for case in result["cases"]:
                if case["outcome"] == "blocked":
                    assert not case["poison_in_context"]
                if case["outcome"] == "evaded":
                    assert case["poison_in_context"] and not case["succeeded"]
            for stage in result["detection"].values():
                assert stage["poisons_removed"] <= min(stage["removed"], stage["poisons_seen"])


@pytest.mark.slow
def test_quick_benchmark_is_complete_consistent_and_reproducible(tmp_path: Path) -> None:
    work = tmp_path / "work"
    first = _run(tmp_path / "a", work)
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["configuration"]["quick"] and report["configuration"]["kb_profile"] == "mini"
    _assert_consistent(report)
    assert "<svg" in (tmp_path / "a" / "report.html").read_text()
    markdown = (tmp_path / "a" / "report.md").read_text()
    assert "partial" not in markdown and "| ring1 |" in markdown
    assert json.loads((tmp_path / "a" / "timing.json").read_text())["latency_by_defense"]

    # answer everything again from scratch (the KBs are reused, the checkpoint is not)
    for checkpoint in work.glob("records-*.jsonl"):
        checkpoint.unlink()
    # --report-only asks nothing: from an empty checkpoint the report says it is partial
    partial = _run(tmp_path / "p", work, "--report-only")
    assert partial.returncode == 0, partial.stderr[-3000:]
    empty = json.loads((tmp_path / "p" / "report.json").read_text())
    assert empty["answers"] == {"planned": report["answers"]["planned"], "checkpointed": 0,
                                "complete": False}
    assert all(not result["complete"] and result["answered"] == 0
               for block in empty["results"].values() for result in block.values())
    assert "partial: 0 of" in (tmp_path / "p" / "report.html").read_text()
    assert "partial: 0 of" in (tmp_path / "p" / "report.md").read_text()
    assert not list(work.glob("records-*.jsonl")) or all(
        len(path.read_text().splitlines()) <= 1 for path in work.glob("records-*.jsonl"))

    second = _run(tmp_path / "b", work)
    assert second.returncode == 0, second.stderr[-3000:]
    for name in ("report.json", "report.html", "report.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

    # resuming from a complete checkpoint answers nothing and writes the same bytes
    third = _run(tmp_path / "c", work)
    assert third.returncode == 0
    assert json.loads((tmp_path / "c" / "timing.json").read_text())[
        "answers_computed_this_run"] == 0
    assert (tmp_path / "a" / "report.json").read_bytes() == (
        tmp_path / "c" / "report.json").read_bytes()


def test_cli_refuses_an_unknown_defense(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trishield.cli", "eval", "poisonedrag", "--quick", "--out",
         str(tmp_path / "o"), "--work-dir", str(tmp_path / "w"), "--defense", "magic"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "unknown defense 'magic'" in result.stderr
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()
