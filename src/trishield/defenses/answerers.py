"""Answerers: one reader, or Ring 3's panel behind its gate.

Both record every reader call on the run (the trace's ``calls``, from which LLM calls and
tokens are counted) and the votes in the trace: ``reader`` for one reader, ``ring3`` for the
panel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from trishield.answers import contains_answer
from trishield.llm.base import Reader, ReaderAnswer
from trishield.rings.consensus import Consensus, ConsensusConfig, Vote, presented_to
from trishield.stages import ContextPassage, Outcome, Run
from trishield.trace import CallRow, GateTrace, Ring3Trace, VoteRow

Order = Literal["retrieval", "trust"]


class SingleReader:
    """One reader answers from the context, no vote (the undefended baseline, the ablations
    without Ring 3, and every baseline defense).

    ``order``: ``retrieval`` hands the passages over as ranked, as a normal RAG pipeline does;
    ``trust`` presents them as Ring 3 would (most trusted next to the question for an LLM, see
    :func:`~trishield.rings.consensus.presented_to`). The reasons are parameters because the
    benchmark's records keep them and TriShield's and the baselines' wording differ.
    """

    name = "reader"

    def __init__(self, reader: Reader, *, order: Order = "retrieval",
                 empty_reason: str = "no passage survived the defense to answer from",
                 answered_reason: str = "answered by one model"):
        self.reader = reader
        self.readers = [reader]
        self.order = order
        self.empty_reason = empty_reason
        self.answered_reason = answered_reason

    def answer(self, run: Run, question: str, context: list[ContextPassage]) -> Outcome:
        if not context:
            run.trace.reader = None
            return Outcome.refusal(self.empty_reason)
        pairs = ([(p.id, p.text) for p in context] if self.order == "retrieval"
                 else presented_to(self.reader, context))
        reply = self.reader.answer(question, pairs)
        vote = single_vote(run, "answer", self.reader, reply)
        if vote.refused:
            return Outcome.refusal(f"{self.reader.name} declined: the context does not hold "
                                   "the answer")
        cited = {p.doc_id for p in context if p.id in set(reply.citations)}
        cited |= {p.doc_id for p in context if contains_answer(p.text, reply.text)}
        return Outcome(reply.text, False, self.answered_reason, sorted(cited))


def single_vote(run: Run, purpose: str, reader: Reader, reply: ReaderAnswer) -> VoteRow:
    """Record one reader's call and its vote as the trace's ``reader``; the vote says whether
    it refused (a reply that says "I don't know" is a refusal too)."""
    run.paid(purpose, reader, reply)
    vote = VoteRow.model_validate(Vote.of(reader, reply).as_dict())
    run.trace.reader = vote
    return vote


class PanelConsensus:
    """Ring 3: the panel votes when the gate opens (one model answers when it stays shut),
    then the agreed answer must be supported by the evidence (see
    :mod:`trishield.rings.consensus`)."""

    name = "ring3"

    def __init__(self, panel: Sequence[Reader], config: ConsensusConfig | None = None):
        self.config = config or ConsensusConfig()
        self.consensus = Consensus(panel, self.config)
        self.readers = list(panel)

    def gate(self, run: Run, context: Sequence[ContextPassage]) -> tuple[bool, list[str]]:
        """Whether Rings 1-2 left enough uncertainty to pay for the panel, and why."""
        mode = self.config.gate
        if mode == "always":
            return True, ["gate mode 'always'"]
        if mode == "never":
            return False, ["gate mode 'never'"]
        signals, reasons = run.signals, []
        if signals.flagged:
            reasons.append(f"Ring 1 flagged or blocked {len(signals.flagged)} candidate(s)")
        if signals.conflicts:
            reasons.append(f"{signals.conflicts} numeric conflict(s) between passages")
        low = [p.id for p in context if p.tier in self.config.low_trust_tiers]
        if low:
            reasons.append(f"{len(low)} low-trust passage(s) in the context")
        trust = signals.ranked_trust
        if len(trust) > len(context) and context:
            margin = trust[0] - trust[len(context)]
            if margin < self.config.trust_margin:
                reasons.append(f"thin trust margin {margin:.3f} < {self.config.trust_margin}")
        if not reasons:
            return False, ["Rings 1-2 confident: one model answers"]
        return True, reasons

    def answer(self, run: Run, question: str, context: list[ContextPassage]) -> Outcome:
        use_panel, reasons = self.gate(run, context)
        run.trace.gate = GateTrace(mode=self.config.gate, use_panel=use_panel, reasons=reasons)
        result = self.consensus.decide(question, context, use_panel=use_panel)
        run.trace.ring3 = Ring3Trace.model_validate(result.as_dict())
        for round_ in result.rounds:
            run.calls.extend(vote_call(vote) for vote in round_.votes)
        citations = sorted({p.doc_id for p in context if p.id in set(result.support)})
        return Outcome(result.answer, result.refused, result.reason, citations)


def vote_call(vote: Vote) -> CallRow:
    """The call behind a panel vote, as the run records it."""
    return CallRow(purpose="vote", model=vote.member, llm=vote.llm, cached=vote.cached,
                   prompt_tokens=vote.prompt_tokens, completion_tokens=vote.completion_tokens,
                   seconds=round(vote.seconds, 3))
