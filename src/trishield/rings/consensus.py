"""Ring 3, Cross-LLM Consensus: a panel of different models must agree on the answer.

Answers are normalised and grouped (``trishield.answers.same_answer``); agreement is the
largest group's size over the panel size. Below ``tau`` the least-trusted third of the context
is dropped and the panel asked once more; if it still disagrees, TriShield refuses with the
reason. An agreed answer that no context passage supports, or that only one low-trust source
supports, is refused as insufficient evidence rather than guessed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, get_args

from pydantic import Field
from pydantic.dataclasses import dataclass as config_dataclass

from trishield.answers import (
    answer_core,
    is_refusal,
    normalize_answer,
    polarity,
    same_answer,
)
from trishield.llm.base import Reader, ReaderAnswer
from trishield.rings.config_types import CONFIG, GateMode, TierTuple, Unit
from trishield.stages import ContextPassage

GATE_MODES: tuple[str, ...] = get_args(GateMode)


@config_dataclass(frozen=True, config=CONFIG)
class ConsensusConfig:
    tau: Annotated[float, Field(gt=0.0, le=1.0)] = 2 / 3
    """Agreement threshold: the largest answer group over the panel size (0 would accept
    anything)."""
    retry: bool = True
    drop_fraction: Unit = 1 / 3
    gate: GateMode = "gated"
    """always: every query goes to the panel; never: one model; gated: panel when uncertain."""
    require_support: bool = True
    low_trust_tiers: TierTuple = ("untrusted",)
    max_sources: Annotated[int, Field(ge=2)] = 3
    """A contested question: how many independent sources (heaviest first) are asked for
    their own answer, one call each. Lighter sources join the claim whose answer they state."""


@dataclass
class Vote:
    member: str
    vendor: str
    answer: str
    refused: bool
    citations: list[str]
    cached: bool
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    llm: bool = True

    @classmethod
    def of(cls, member: Reader, reply: ReaderAnswer) -> Vote:
        """The vote a reader's reply casts (an answer that says "I don't know" is a refusal)."""
        return cls(member.name, member.vendor, reply.text,
                   bool(reply.refused) or is_refusal(reply.text), list(reply.citations),
                   bool(reply.cached), reply.seconds, reply.prompt_tokens,
                   reply.completion_tokens, member.uses_llm)

    def as_dict(self) -> dict[str, object]:
        return {"member": self.member, "vendor": self.vendor, "llm": self.llm,
                "answer": self.answer,
                "normalised": normalize_answer(self.answer), "refused": self.refused,
                "citations": self.citations, "cached": self.cached,
                "seconds": round(self.seconds, 3), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


@dataclass
class Round:
    passages: list[str]
    votes: list[Vote]
    groups: list[dict[str, object]]
    agreement: float
    winner: str | None
    agreed_answers: list[str] = field(default_factory=list)
    """Every answer of the agreeing group, shortest first: the evidence check takes the first
    one a passage supports (a bare "No" rests on the statement that agreed with it)."""

    def as_dict(self) -> dict[str, object]:
        return {"context": self.passages, "votes": [v.as_dict() for v in self.votes],
                "groups": self.groups, "agreement": round(self.agreement, 4),
                "winner": self.winner}


@dataclass
class ConsensusResult:
    answer: str | None
    refused: bool
    reason: str
    rounds: list[Round] = field(default_factory=list)
    support: list[str] = field(default_factory=list)
    retried: bool = False
    """Whether the panel was asked again without the least-trusted third (a contested
    question's rounds are one per source, not retries)."""

    def as_dict(self) -> dict[str, object]:
        return {"answer": self.answer, "refused": self.refused, "reason": self.reason,
                "rounds": [r.as_dict() for r in self.rounds], "support": self.support,
                "retried": self.retried}


def presented_to(member: Reader, passages: Sequence[ContextPassage]) -> list[tuple[str, str]]:
    """The context as ``(id, text)`` pairs in the order this member should read it.

    Passages arrive most-trusted first. Small LLMs weigh what they read last (next to the
    question) most, so an LLM gets them most-trusted *last*; the extractive reader, which
    breaks ties towards earlier passages, keeps the trust order.
    """
    ordered = list(reversed(passages)) if member.uses_llm else list(passages)
    return [(p.id, p.text) for p in ordered]


def group_answers(votes: Sequence[Vote], question: str = "") -> list[list[Vote]]:
    """Greedy grouping in panel order; a vote joins the first group it agrees with."""
    groups: list[list[Vote]] = []
    for vote in votes:
        if vote.refused:
            continue
        for group in groups:
            if same_answer(group[0].answer, vote.answer, question):
                group.append(vote)
                break
        else:
            groups.append([vote])
    return sorted(groups, key=lambda g: -len(g))  # stable: panel order breaks ties


def supporting_passages(answer: str, passages: Sequence[ContextPassage],
                        question: str = "") -> list[ContextPassage]:
    """Passages that contain every term of the answer's core (see ``answer_core``).

    A bare yes/no has no terms to find, so it is supported only through an agreeing statement.
    Matching it to a passage sentence of the same polarity (``polar_support``) was tried on the
    safety suite and made things worse: a sentence without a negation word is not a "yes" (it
    turned two refusals into wrong answers and let two unanswerable questions through)."""
    core = set(answer_core(answer, question))
    return [p for p in passages if core and core <= set(answer_core(p.text))]


def drop_least_trusted(passages: Sequence[ContextPassage],
                       fraction: float) -> list[ContextPassage]:
    """Remove the lowest-trust ``ceil(fraction * n)`` passages (never all of them)."""
    drop = min(len(passages) - 1, math.ceil(fraction * len(passages)))
    keep = sorted(passages, key=lambda p: -p.trust)[:len(passages) - drop]
    kept_ids = {p.id for p in keep}
    return [p for p in passages if p.id in kept_ids]


class Consensus:
    def __init__(self, panel: Sequence[Reader], config: ConsensusConfig | None = None):
        if not panel:
            raise ValueError("the panel needs at least one member")
        self.panel = list(panel)
        self.config = config or ConsensusConfig()

    def _round(self, question: str, passages: Sequence[ContextPassage],
               members: Sequence[Reader]) -> Round:
        votes = []
        for member in members:
            reply = member.answer(question, presented_to(member, passages))
            votes.append(Vote.of(member, reply))
        groups = group_answers(votes, question)
        largest = groups[0] if groups else []
        agreement = len(largest) / len(members)
        # the group's shortest answer is its crispest statement (ties: panel order)
        answers = (sorted((v.answer for v in largest), key=len)
                   if agreement >= self.config.tau and largest else [])
        described = [{"answer": g[0].answer, "members": [v.member for v in g],
                      "size": len(g)} for g in groups]
        return Round([p.id for p in passages], votes, described, agreement,
                     answers[0] if answers else None, answers)

    def decide(self, question: str, passages: Sequence[ContextPassage], *,
               use_panel: bool = True) -> ConsensusResult:
        """Vote (once, or twice with the bottom third dropped), then check the evidence."""
        if not passages:
            return ConsensusResult(None, True, "insufficient evidence: no passage survived the "
                                   "defense to answer from")
        members = self.panel if use_panel else self.panel[:1]
        rounds = [self._round(question, passages, members)]
        current = list(passages)
        if rounds[-1].winner is None and self.config.retry and use_panel and len(passages) > 1:
            current = drop_least_trusted(passages, self.config.drop_fraction)
            rounds.append(self._round(question, current, members))
        final = rounds[-1]
        if final.winner is None:
            if all(v.refused for v in final.votes):
                reason = "the context does not contain the answer (every panel member declined)"
            else:
                reason = (f"no agreement: agreement {final.agreement:.2f} < tau "
                          f"{self.config.tau:.2f}"
                          + (" after dropping the least-trusted third" if len(rounds) > 1
                             else ""))
            return replace(ConsensusResult(None, True, reason, rounds),
                           retried=len(rounds) > 1)
        return replace(self.check_evidence(question, final.agreed_answers, current, rounds),
                       retried=len(rounds) > 1)

    def check_evidence(self, question: str, answers: Sequence[str],
                        passages: Sequence[ContextPassage],
                        rounds: list[Round]) -> ConsensusResult:
        answer, support = answers[0], []
        # a bare yes/no is backed by the agreeing statement, so statements are tried first
        for candidate in sorted(answers, key=lambda a: polarity(a) is not None):
            support = supporting_passages(candidate, passages, question)
            if support:
                answer = candidate
                break
        support_ids = [p.id for p in support]
        if self.config.require_support and not support:
            return ConsensusResult(None, True, f"insufficient evidence: no context passage "
                                   f"supports the answer {answer!r}", rounds)
        documents = {p.doc_id for p in support}
        if (self.config.require_support and len(documents) == 1
                and all(p.tier in self.config.low_trust_tiers for p in support)):
            return ConsensusResult(None, True, f"insufficient evidence: the answer {answer!r} "
                                   f"rests on a single low-trust source ({support[0].doc_id})",
                                   rounds, support_ids)
        return ConsensusResult(answer, False, "agreed", rounds, support_ids)
