"""The orchestrator and its trace, with the extractive reader (real, deterministic, no LLM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trishield.demo import ATTACKER, attacks
from trishield.errors import InputError
from trishield.kb import Document, KnowledgeBase
from trishield.llm import ExtractiveReader
from trishield.pipeline import DEFENSES, RINGS_OF, Pipeline

REFUND = next(a for a in attacks() if a.id == "refund-window")


@pytest.fixture
def poisoned_kb(demo_kb_dir: Path):
    """The demo KB with the refund-window poisons written by an untrusted writer, unscreened."""
    with KnowledgeBase.open(demo_kb_dir) as kb:
        kb.ingest([Document(id=d["id"], text=d["text"]) for d in REFUND.documents],
                  tier="untrusted", writer=ATTACKER)
        yield kb


@pytest.mark.parametrize("defense", DEFENSES)
def test_every_defense_returns_a_complete_trace(poisoned_kb: KnowledgeBase,
                                                defense: str) -> None:
    answer = Pipeline(poisoned_kb, [ExtractiveReader()]).ask(REFUND.question, defense=defense)
    trace = answer.trace
    assert trace["defense"] == defense and trace["question"] == REFUND.question
    rings = RINGS_OF[defense]
    assert trace["rings"] == sorted(rings)
    assert len(trace["candidates"]) == (20 if rings - {3} else 5)
    assert len(trace["context"]) <= 5
    assert ("ring1" in trace) == (1 in rings)
    assert ("ring2" in trace) == (2 in rings)
    assert ("ring3" in trace) == (3 in rings) == ("gate" in trace) == ("reader" not in trace)
    assert trace["llm_calls"] == 0  # the extractive reader is not an LLM
    assert set(trace["timings_s"]) >= {"retrieval", "answer", "total"}
    json.dumps(answer.as_dict())  # the trace is plain JSON


def test_undefended_pipeline_is_poisoned_and_rings_remove_the_poison(
        poisoned_kb: KnowledgeBase) -> None:
    pipeline = Pipeline(poisoned_kb, [ExtractiveReader()])
    undefended = pipeline.ask(REFUND.question, defense="none")
    poison_in_context = [p for p in undefended.trace["context"] if p["tier"] == "untrusted"]
    assert len(poison_in_context) >= 3

    ring1 = pipeline.ask(REFUND.question, defense="ring1")
    blocked = {c.split("#")[0] for c in ring1.trace["ring1"]["blocked"]}
    assert {"mallory/refund-faq-1", "mallory/refund-faq-2", "mallory/refund-faq-3"} <= blocked
    for verdict in ring1.trace["ring1"]["verdicts"]:
        if verdict["blocked"]:
            assert verdict["reasons"] and verdict["c"] >= ring1.trace["ring1"]["config"]["theta"]

    full = pipeline.ask(REFUND.question, defense="full")
    assert full.trace["gate"]["use_panel"]
    assert "90" not in (full.answer or "")
    ranked = {row["doc_id"]: row for row in full.trace["ring2"]["ranked"]}
    near_duplicate = ranked.get("mallory/refund-policy-v2")
    if near_duplicate is not None:  # the adaptive copy survives Ring 1: Ring 2 must see it
        assert near_duplicate["w_prov"] == 0.8
        assert any({c["a"], c["b"]} & {"mallory/refund-policy-v2#0"}
                   for c in full.trace["ring2"]["conflicts"])


def test_benign_question_is_answered_with_citations(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        answer = Pipeline(kb, [ExtractiveReader()]).ask(
            "How much does shipping to Canada cost?", defense="full")
    assert not answer.refused and "$15" in answer.answer
    assert answer.citations == ["shipping-policy"]


def test_bad_arguments(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        pipeline = Pipeline(kb, [ExtractiveReader()])
        with pytest.raises(InputError, match="unknown defense"):
            pipeline.ask("q", defense="partial")
        with pytest.raises(InputError, match="empty"):
            pipeline.ask("  ")
        with pytest.raises(InputError, match="at least one reader"):
            Pipeline(kb, [])


def test_ask_cli_prints_the_documented_json(demo_kb_dir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trishield.cli", "ask", "What discount do students get?",
         "--kb", str(demo_kb_dir), "--panel", "extractive", "--json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert list(payload) == ["answer", "citations", "reason", "refused", "trace"]
    assert payload["refused"] is False and "15%" in payload["answer"]
    assert {"ring1", "ring2", "ring3", "gate", "context", "candidates"} <= set(payload["trace"])
    bad = subprocess.run(
        [sys.executable, "-m", "trishield.cli", "ask", "q", "--kb", str(demo_kb_dir),
         "--panel", "nonexistent-model"], capture_output=True, text=True, timeout=300,
        check=False)
    assert bad.returncode == 2 and "unknown panel member" in bad.stderr


@pytest.mark.parametrize(("gate", "expect_panel"), [("always", True), ("never", False)])
def test_gate_modes(poisoned_kb: KnowledgeBase, gate: str, expect_panel: bool) -> None:
    from dataclasses import replace

    from trishield.pipeline import PipelineConfig
    from trishield.rings.consensus import ConsensusConfig

    config = PipelineConfig(consensus=replace(ConsensusConfig(), gate=gate))
    panel = [ExtractiveReader(), ExtractiveReader()]
    answer = Pipeline(poisoned_kb, panel, config).ask("What discount do students get?",
                                                      defense="full")
    assert answer.trace["gate"]["use_panel"] is expect_panel
    assert len(answer.trace["ring3"]["rounds"][0]["votes"]) == (2 if expect_panel else 1)


def test_gated_mode_opens_on_uncertainty_and_stays_shut_when_confident(
        demo_kb_dir: Path, poisoned_kb: KnowledgeBase) -> None:
    opened = Pipeline(poisoned_kb, [ExtractiveReader()]).ask(REFUND.question, defense="full")
    assert opened.trace["gate"]["use_panel"]
    reasons = " ".join(opened.trace["gate"]["reasons"])
    assert "low-trust" in reasons or "Ring 1" in reasons or "conflict" in reasons
    from dataclasses import replace

    from trishield.pipeline import PipelineConfig
    from trishield.rings.consensus import ConsensusConfig
    from trishield.rings.ingest_guard import GuardConfig

    # flagging and conflict detection off, no margin rule, only trusted sources: confident
    from trishield.rings.retrieval_scorer import ScorerConfig

    calm = PipelineConfig(guard=replace(GuardConfig(), flag_theta=1.0),
                          scorer=replace(ScorerConfig(), detect_conflicts=False),
                          consensus=replace(ConsensusConfig(), trust_margin=0.0))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        answer = Pipeline(kb, [ExtractiveReader()], calm).ask(
            "What are the customer support opening hours?", defense="full")
    assert answer.trace["gate"] == {"mode": "gated", "use_panel": False,
                                    "reasons": ["Rings 1-2 confident: one model answers"]}


def test_relevance_floor_refuses_when_nothing_relevant_was_found(demo_kb_dir: Path) -> None:
    from dataclasses import replace

    from trishield.pipeline import PipelineConfig
    from trishield.rings.retrieval_scorer import ScorerConfig

    config = PipelineConfig(scorer=replace(ScorerConfig(), min_relevance={"dense": 0.45}))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        pipeline = Pipeline(kb, [ExtractiveReader()], config)
        off_topic = pipeline.ask("Who wrote the play Hamlet?", defense="full")
        on_topic = pipeline.ask("How much does shipping to Canada cost?", defense="full")
    floor = off_topic.trace["ring2"]["relevance_floor"]
    assert off_topic.refused and "no relevant passage" in off_topic.reason
    assert floor["best_score"] < 0.45 and not floor["passed"] and off_topic.trace["context"] == []
    assert not on_topic.refused and on_topic.trace["ring2"]["relevance_floor"]["passed"]


def test_closed_domain_mode_refuses_what_the_kb_never_mentions(demo_kb_dir: Path) -> None:
    from dataclasses import replace

    from trishield.pipeline import PipelineConfig
    from trishield.rings.retrieval_scorer import ScorerConfig

    closed = PipelineConfig(scorer=replace(ScorerConfig(), refuse_unknown_terms=True))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.unknown_terms("How long does shipping to India take?") == ["long", "india"]
        pipeline = Pipeline(kb, [ExtractiveReader()], closed)
        india = pipeline.ask("How long does shipping to India take?", defense="full")
        canada = pipeline.ask("How long does shipping to Canada take?", defense="full")
        open_domain = Pipeline(kb, [ExtractiveReader()]).ask(
            "How long does shipping to India take?", defense="full")
    assert india.refused and "never mentions 'india'" in india.reason
    assert india.trace["ring2"]["unknown_terms"] == ["india"]  # "long" is question phrasing
    assert not canada.refused and canada.trace["ring2"]["unknown_terms"] == []
    assert "unknown_terms" not in open_domain.trace["ring2"]
    assert "never mentions" not in open_domain.reason
