"""The orchestrator and its trace, with the extractive reader (real, deterministic, no LLM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reader_doubles import InventingReader
from trishield.defenses import build_defense
from trishield.defenses.trishield import RINGS_OF
from trishield.demo import ATTACKER, attacks
from trishield.errors import InputError
from trishield.kb import Document, KnowledgeBase
from trishield.llm import ExtractiveReader
from trishield.settings import PipelineConfig

DEFENSES = tuple(RINGS_OF)

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
    answer = build_defense(defense, poisoned_kb, [ExtractiveReader()]).ask(REFUND.question)
    trace = answer.trace.as_dict()
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
    def pipeline(defense: str):
        return build_defense(defense, poisoned_kb, [ExtractiveReader()])

    undefended = pipeline("none").ask(REFUND.question)
    poison_in_context = [p for p in undefended.trace.context if p.tier == "untrusted"]
    assert len(poison_in_context) >= 3

    ring1 = pipeline("ring1").ask(REFUND.question)
    blocked = {c.split("#")[0] for c in ring1.trace.ring1.blocked}
    assert {"mallory/refund-faq-1", "mallory/refund-faq-2", "mallory/refund-faq-3"} <= blocked
    for verdict in ring1.trace.ring1.verdicts:
        if verdict.blocked:
            assert verdict.reasons and verdict.c >= ring1.trace.ring1.config.theta

    full = pipeline("full").ask(REFUND.question)
    assert "90" not in (full.answer or "")
    ranked = {row.doc_id: row for row in full.trace.ring2.ranked}
    near_duplicate = ranked.get("mallory/refund-policy-v2")
    if near_duplicate is not None:  # the adaptive copy survives Ring 1: Ring 2 must see it
        assert near_duplicate.w_prov == 0.8
        assert any({c.a, c.b} & {"mallory/refund-policy-v2#0"}
                   for c in full.trace.ring2.conflicts)


def test_benign_question_is_answered_with_citations(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        answer = (build_defense("full", kb, [ExtractiveReader()])
            .ask("How much does shipping to Canada cost?"))
    assert not answer.refused and "$15" in answer.answer
    assert answer.citations == ["shipping-policy"]


def test_bad_arguments(demo_kb_dir: Path) -> None:
    with KnowledgeBase.open(demo_kb_dir) as kb:
        with pytest.raises(InputError, match="unknown defense"):
            build_defense("partial", kb, [ExtractiveReader()])
        with pytest.raises(InputError, match="empty"):
            build_defense("full", kb, [ExtractiveReader()]).ask("  ")
        with pytest.raises(InputError, match="at least one reader"):
            build_defense("full", kb, [])
        with pytest.raises(InputError, match="unknown config key"):
            build_defense("full", kb, [ExtractiveReader()], options={"tau": 1})


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

    from trishield.rings.consensus import ConsensusConfig

    config = PipelineConfig(consensus=replace(ConsensusConfig(), gate=gate))
    panel = [ExtractiveReader(), ExtractiveReader()]
    answer = (build_defense("full", poisoned_kb, panel, config=config)
        .ask("What discount do students get?"))
    assert answer.trace.gate.use_panel is expect_panel
    assert len(answer.trace.ring3.rounds[0].votes) == (2 if expect_panel else 1)


def test_gated_mode_opens_on_uncertainty_and_stays_shut_when_confident(
        demo_kb_dir: Path, poisoned_kb: KnowledgeBase) -> None:
    from dataclasses import replace

    from trishield.rings.consensus import ConsensusConfig
    from trishield.rings.ingest_guard import GuardConfig

    # Ring 1 blocks nothing, so the untrusted writer's passages reach the pool and the context:
    # two writers answer the question, each is read on its own and the claims are weighed
    lenient = PipelineConfig(guard=replace(GuardConfig(), theta=0.99, flag_theta=0.98))
    opened = build_defense("full", poisoned_kb, [ExtractiveReader()],
                           config=lenient).ask(REFUND.question)
    reasons = " ".join(opened.trace.gate.reasons)
    assert "contested" in reasons, reasons
    assert opened.trace.evidence.verdicts and "90" not in (opened.answer or "")

    # flagging off, one trusted writer: no risk
    from trishield.rings.retrieval_scorer import ScorerConfig

    calm = PipelineConfig(guard=replace(GuardConfig(), flag_theta=1.0),
                          scorer=replace(ScorerConfig(), detect_conflicts=False),
                          consensus=ConsensusConfig())
    with KnowledgeBase.open(demo_kb_dir) as kb:
        answer = (build_defense("full", kb, [ExtractiveReader()], config=calm)
            .ask("What are the customer support opening hours?"))
    assert answer.trace.gate.model_dump() == {"mode": "gated", "use_panel": False,
                                    "reasons": ["Rings 1-2 saw no risk: one model answers"]}


def test_gated_mode_convenes_the_panel_when_the_answer_rests_on_a_flagged_passage(
        demo_kb_dir: Path) -> None:
    """Ring 1 flags every passage (a flag threshold near 0): the first reader's answer rests
    on a flagged passage, so the rest of the panel reads and the gate's trace says so. With
    nothing flagged, one reader answers."""
    from dataclasses import replace

    from trishield.rings.consensus import ConsensusConfig
    from trishield.rings.ingest_guard import GuardConfig
    from trishield.rings.retrieval_scorer import ScorerConfig

    question = "How much does shipping to Canada cost?"
    scorer = replace(ScorerConfig(), detect_conflicts=False)
    wary = PipelineConfig(guard=replace(GuardConfig(), flag_theta=0.001), scorer=scorer,
                          consensus=ConsensusConfig())
    calm = replace(wary, guard=replace(GuardConfig(), flag_theta=1.0))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        flagged = build_defense("full", kb, [ExtractiveReader(), ExtractiveReader()],
                                config=wary).ask(question)
        unflagged = build_defense("full", kb, [ExtractiveReader(), ExtractiveReader()],
                                  config=calm).ask(question)
    gate = flagged.trace.gate
    assert gate is not None and gate.use_panel
    assert "the panel reads if an answer rests on one" in gate.reasons[0]
    assert "which Ring 1 flagged: the panel reads" in gate.reasons[-1]
    assert len(flagged.trace.ring3.rounds[0].votes) == 2
    assert not flagged.refused and flagged.answer == unflagged.answer
    assert unflagged.trace.gate is not None and not unflagged.trace.gate.use_panel
    assert len(unflagged.trace.ring3.rounds[0].votes) == 1


def test_relevance_floor_refuses_when_nothing_relevant_was_found(demo_kb_dir: Path) -> None:
    from dataclasses import replace

    from trishield.rings.retrieval_scorer import ScorerConfig

    config = PipelineConfig(backend="dense",  # the floor below is on dense scores
                            scorer=replace(ScorerConfig(), min_relevance={"dense": 0.45}))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        pipeline = build_defense("full", kb, [ExtractiveReader()], config=config)
        off_topic = pipeline.ask("Who wrote the play Hamlet?")
        on_topic = pipeline.ask("How much does shipping to Canada cost?")
    floor = off_topic.trace.ring2.relevance_floor
    assert off_topic.refused and "no relevant passage" in off_topic.reason
    assert floor.best_score < 0.45 and not floor.passed and off_topic.trace.context == []
    assert not on_topic.refused and on_topic.trace.ring2.relevance_floor.passed


def test_closed_domain_mode_refuses_what_the_kb_never_mentions(demo_kb_dir: Path) -> None:
    from dataclasses import replace

    from trishield.rings.retrieval_scorer import ScorerConfig

    closed = PipelineConfig(scorer=replace(ScorerConfig(), refuse_unknown_terms=True))
    with KnowledgeBase.open(demo_kb_dir) as kb:
        assert kb.unknown_terms("How long does shipping to India take?") == ["long", "india"]
        pipeline = build_defense("full", kb, [ExtractiveReader()], config=closed)
        india = pipeline.ask("How long does shipping to India take?")
        canada = pipeline.ask("How long does shipping to Canada take?")
        open_domain = (build_defense("full", kb, [ExtractiveReader()])
            .ask("How long does shipping to India take?"))
    assert india.refused and "never mentions 'india'" in india.reason
    assert india.trace.ring2.unknown_terms == ["india"]  # "long" is question phrasing
    assert not canada.refused and canada.trace.ring2.unknown_terms == []
    assert open_domain.trace.ring2.unknown_terms is None  # closed-domain mode off
    assert "never mentions" not in open_domain.reason


def test_the_second_reader_answers_where_the_first_misread(demo_kb_dir: Path) -> None:
    """Without a second reader the invented answer is refused; with one (here the extractive
    reader) its stated answer is given and the trace says the second reader was asked."""
    question = "How much does shipping to Canada cost?"
    with KnowledgeBase.open(demo_kb_dir) as kb:
        alone = build_defense("full", kb, [InventingReader()]).ask(question)
        helped = build_defense("full", kb, [InventingReader()],
                               second_reader=ExtractiveReader()).ask(question)
    assert alone.refused and "no context passage supports" in alone.reason
    assert not helped.refused and "$15" in helped.answer
    assert helped.trace.ring3 is not None and helped.trace.ring3.escalated
    assert [m.name for m in helped.trace.panel] == ["inventing", "extractive"]
    assert "second reader, extractive" in helped.reason
