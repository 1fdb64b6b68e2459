"""Ring 3, Cross-LLM Consensus: what the panel's answers are worth is what the evidence says.

Every member answers from the same context. Answers are normalised and grouped
(``trishield.answers.same_answer``) into *claims*; a claim counts only when a context passage
states it (an answer no passage states is a misreading or a guess, whoever gave it). One
stated claim is the answer, however many members declined or rambled: small models word the
same answer differently and decline often, and a headcount turned that into refusals. Several
stated claims are weighed by their independent evidence (:meth:`Evidence.judge`); when the
evidence cannot tell them apart because they rest on one source, the readers disagree about
what that source says and the larger group needs ``tau`` of the panel. Without an answer
the least-trusted third of the context is dropped and the panel asked once more; then
TriShield answers or refuses with the reason.

A *second reader* (optional; a stronger model than the panel's first member) is asked only
when a round leaves no stated claim (the first model's answer is in no passage, or every
member declined) or the panel read one source two ways without a majority (a reading dispute
the evidence cannot settle). Its answer must pass the same evidence check, so it can recover
a misread answer but never brings in an answer the context does not state. A yes/no question
whose readers agree on a "yes" or "no" that no passage states is read one passage at a time by
the second reader, so that the answer rests on the passages read that way.

Over 500 lines on purpose: the rounds, the support check and the settling of one question are
read together when a decision is questioned; what may be a claim at all is apart
(:mod:`trishield.rings.claim_rules`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, get_args

from pydantic import Field
from pydantic.dataclasses import dataclass as config_dataclass

from trishield.answers import (
    answer_core,
    decides,
    is_bare_polar,
    is_refusal,
    names_an_offer,
    normalize_answer,
    offered_terms,
    own_terms,
    polarity,
    same_answer,
    speaks_about,
)
from trishield.llm.base import Reader, ReaderAnswer
from trishield.rings.claim_rules import (
    answers_as_asked,
    as_witnesses,
    exact_tokens,
    heading_titles,
    holds_token,
    is_dump,
)
from trishield.rings.config_types import CONFIG, GateMode, TierTuple, Unit
from trishield.rings.evidence import Evidence, Item, Verdict
from trishield.rings.questions import asks_for_a_thing, asks_yes_or_no
from trishield.stages import ContextPassage

GATE_MODES: tuple[str, ...] = get_args(GateMode)


@config_dataclass(frozen=True, config=CONFIG)
class ConsensusConfig:
    tau: Annotated[float, Field(gt=0.0, le=1.0)] = 2 / 3
    """Only for claims the evidence cannot tell apart (stated by one source): the share of
    the panel the larger group needs. Claims with different evidence are weighed,
    not counted (0 would accept anything)."""
    retry: bool = True
    drop_fraction: Unit = 1 / 3
    gate: GateMode = "gated"
    """always: every query goes to the panel; never: one model; gated: panel when uncertain."""
    require_support: bool = True
    low_trust_tiers: TierTuple = ("untrusted",)
    max_sources: Annotated[int, Field(ge=2)] = 3
    """A contested question: how many independent sources (heaviest first) are asked for
    their own answer, one call each. Lighter sources join the claim whose answer they state."""
    polar_readings: Annotated[int, Field(ge=0)] = 3
    """A yes/no question whose readers agree on a bare yes or no that no passage states, even
    after the second reader: how many context passages (most trusted first, outside the
    low-trust tiers, each holding every term of the question but one) the second reader reads
    one at a time, one call each; 0 turns the reading by passage off
    (docs/design/ring3-consensus.md, "Yes or no, one passage at a time")."""


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
    packing: str = ""

    @classmethod
    def of(cls, member: Reader, reply: ReaderAnswer) -> Vote:
        """The vote a reader's reply casts (an answer that says "I don't know" is a refusal)."""
        return cls(member.name, member.vendor, reply.text,
                   bool(reply.refused) or is_refusal(reply.text), list(reply.citations),
                   bool(reply.cached), reply.seconds, reply.prompt_tokens,
                   reply.completion_tokens, member.uses_llm,
                   getattr(reply, "packing", ""))  # readers written before packing

    def as_dict(self) -> dict[str, object]:
        row: dict[str, object] = {
            "member": self.member, "vendor": self.vendor, "llm": self.llm,
            "answer": self.answer,
            "normalised": normalize_answer(self.answer), "refused": self.refused,
            "citations": self.citations, "cached": self.cached,
            "seconds": round(self.seconds, 3), "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens}
        if self.packing:  # only when the context was cut: older traces stay as they were
            row["packing"] = self.packing
        return row


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
    escalated: bool = False
    """Whether the second reader was asked (no stated claim, or a reading dispute)."""
    disputed: bool = False
    """Refused because the panel read one source two ways without a majority (not in the
    trace's dictionary: the reason says it)."""
    convened: str | None = None
    """Why the rest of the panel was asked after the first member (its answer rested on a
    passage Ring 1 flagged), or None."""
    unstated: bool = False
    """Refused because the round left no stated claim: every answer is in no passage, or
    every member declined (not in the trace's dictionary: the reason says it)."""
    verdict: Verdict | None = None
    """When the panel's answers made several stated claims: how their evidence was weighed
    (the trace's evidence section shows it)."""
    distrusted: bool = False
    """Refused because the answer rests on one low-trust source alone
    (:func:`lone_low_trust_source`; not in the trace's dictionary: the reason says it)."""

    def as_dict(self) -> dict[str, object]:
        return {"answer": self.answer, "refused": self.refused, "reason": self.reason,
                "rounds": [r.as_dict() for r in self.rounds], "support": self.support,
                "retried": self.retried, "escalated": self.escalated}


def presented_to(member: Reader, passages: Sequence[ContextPassage]) -> list[tuple[str, str]]:
    """The context as ``(id, text)`` pairs in the order the member reads it: most trusted
    first, for every member.

    The paper's design put the most trusted passage last (next to the question), on the
    belief that small LLMs weigh what they read last. Measured on the benchmark's benign
    questions with the default reader (Qwen2.5-0.5B, docs/decisions.md, "Departures from the
    paper", row 10) the
    opposite holds: it answers from the first passage more often, and reversing the order cost
    benign accuracy. The extractive reader breaks ties towards earlier passages as well.
    """
    del member  # the same order for every member; kept so the call sites say who reads
    return [(p.id, p.text) for p in passages]


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
    """Passages that contain every term of the answer's core (see ``answer_core``); for a bare
    yes/no, passages with a sentence that decides it (``trishield.answers.decides``: every
    content term of the question, negated exactly when the answer is "no").

    Matching a bare yes/no to a sentence sharing only *half* the question's terms was tried on
    the safety suite and made things worse (two refusals became wrong answers, two
    unanswerable questions were answered): a near-miss sentence decides nothing. With every
    term required, the safety suite's near misses ("water damage to a headlamp" against "what
    the warranty does not cover") stay unanswered (docs/decisions.md, "Departures from the paper",
    row 11). A "yes" answering a
    question that asks *what* (``asks_for_a_thing``) is a word like any other: "Yes" is what
    one shouts at bingo."""
    if is_bare_polar(answer) and not asks_for_a_thing(question):
        return [p for p in passages if decides(answer, p.text, question)]
    asked = set(exact_tokens(question))
    exact = [token for token in exact_tokens(answer) if token not in asked]
    if exact:  # an option, path, identifier or file name is stated verbatim or not at all
        return [p for p in passages if all(holds_token(p.text, t) for t in exact)]
    core = set(own_terms(answer, question))  # an echo of the question states nothing
    if not core:  # unless the question offers alternatives and the answer picks one
        offered = offered_terms(answer, question)
        return [p for p in passages if names_an_offer(p.text, offered)]
    return [p for p in passages if core <= set(answer_core(p.text))]


def drop_least_trusted(passages: Sequence[ContextPassage],
                       fraction: float) -> list[ContextPassage]:
    """Remove the lowest-trust ``ceil(fraction * n)`` passages (never all of them)."""
    drop = min(len(passages) - 1, math.ceil(fraction * len(passages)))
    keep = sorted(passages, key=lambda p: -p.trust)[:len(passages) - drop]
    kept_ids = {p.id for p in keep}
    return [p for p in passages if p.id in kept_ids]


@dataclass
class StatedClaim:
    """One group of agreeing answers that a context passage states: the answer given (the
    group's first answer a passage states, statements before a bare yes/no) and those
    passages."""

    answer: str
    support: list[ContextPassage]
    members: int


def stated_claims(round_: Round, passages: Sequence[ContextPassage],
                  question: str) -> list[StatedClaim]:
    """The round's answer groups that the context states and that answer the question,
    largest group first. A bare yes/no has nothing a passage could contain, so it counts only
    through an agreeing statement.

    What may be a claim (docs/answers.md, "What is a claim"): an extractive member's sentence
    is a witness for the model answer it contains, never a rival to it
    (:func:`as_witnesses`); a dump of numbers is never an answer (:func:`is_dump`); and
    where several claims would be weighed, only answers of the asked type take part
    (:func:`answers_as_asked`), so a title or a stray sentence cannot outweigh the answer a
    majority read."""
    claims = []
    for group in group_answers(as_witnesses(round_.votes, question), question):
        answer, support = first_stated([v.answer for v in group], passages, question)
        if support and not is_dump(answer):
            claims.append(StatedClaim(answer, support, len(group)))
    if len(claims) > 1:
        titles = heading_titles((p.title, p.text) for p in passages)
        typed = [c for c in claims if answers_as_asked(c.answer, question, titles)]
        if typed:
            claims = typed
    return claims


def first_stated(answers: Sequence[str], passages: Sequence[ContextPassage],
                 question: str) -> tuple[str, list[ContextPassage]]:
    """The first of ``answers`` (shortest first, statements before a bare yes/no) that a
    passage states, with those passages; else the shortest answer and no passage."""
    ordered = sorted(sorted(answers, key=len), key=lambda a: polarity(a) is not None)
    for candidate in ordered:
        support = supporting_passages(candidate, passages, question)
        if support:
            return candidate, support
    return ordered[0], []


def context_evidence(question: str, passages: Sequence[ContextPassage]) -> Evidence:
    """The context as evidence when no pool was read (Ring 3 alone): the tier and writer each
    passage came with, no embeddings, no track records."""
    return Evidence(question, [Item(p.id, p.doc_id, p.writer or p.doc_id, p.tier, p.text,
                                    title=p.title) for p in passages], None, None)


def same_source(evidence: Evidence, first: Sequence[ContextPassage],
                second: Sequence[ContextPassage]) -> bool:
    """Whether two claims rest on one source: every passage of one of them shares a writer, a
    batch or near-duplicate text with a passage of the other. Then the evidence cannot tell
    them apart (one witness, read two ways) and the readers' agreement decides."""
    position = evidence.position
    ours = [position[p.id] for p in first if p.id in position]
    theirs = [position[p.id] for p in second if p.id in position]
    if not ours or not theirs:
        return False

    def covered(these: list[int], those: list[int]) -> bool:
        return all(any(evidence.linked[a, b] for b in those) for a in these)

    return covered(ours, theirs) or covered(theirs, ours)


def lone_low_trust_source(support: Sequence[ContextPassage], evidence: Evidence | None,
                          low_trust_tiers: Collection[str]) -> str | None:
    """What to call the one low-trust source all of ``support`` is, or None when the support
    holds a passage of a better tier or more than one independent source.

    One *source*, not one document (the paper's rule counted documents): an untrusted writer
    who splits a lie over two documents, or posts it twice, is still one witness, and so are
    near-duplicates and a burst of writers posting together (:class:`Evidence`'s
    independence, from ``evidence``, the pool the support came from). Without the pool, or for
    a passage of unknown writer (given from outside a KB), documents are the unit as before."""
    if not support or any(p.tier not in low_trust_tiers for p in support):
        return None
    documents = sorted({p.doc_id for p in support})
    if len(documents) == 1:
        return documents[0]
    if evidence is None:
        return None
    position = evidence.position
    members = [position.get(p.id) for p in support]
    if any(m is None or not evidence.items[m].writer for m in members):
        return None
    sources = evidence.sources(sorted({m for m in members if m is not None}))
    if len(sources) != 1:
        return None
    writers = ", ".join(sources[0].writers)
    return f"{'writers' if len(sources[0].writers) > 1 else 'writer'} {writers}: " + \
        ", ".join(documents)


def decided_other_way(answer: str, question: str, evidence: Evidence) -> str | None:
    """The opposite of a bare ``answer`` ("Yes"/"No") when a passage of ``evidence`` (the
    whole pool) decides it by its words (:func:`~trishield.answers.decides`), else None: an
    answer the context gave without a reader stating it must not stand against such a
    sentence (Ring 3 leaves that conflict refused)."""
    other = "No" if answer == "Yes" else "Yes"
    return other if any(decides(other, item.text, question) for item in evidence.items) else None


class Consensus:
    """The panel's rounds, settled on the evidence; ``second_reader`` (optional) is asked only
    when a round leaves no stated claim (see the module docstring)."""

    def __init__(self, panel: Sequence[Reader], config: ConsensusConfig | None = None, *,
                 second_reader: Reader | None = None):
        if not panel:
            raise ValueError("the panel needs at least one member")
        self.panel = list(panel)
        self.config = config or ConsensusConfig()
        self.second_reader = second_reader

    def _round(self, question: str, passages: Sequence[ContextPassage],
               members: Sequence[Reader], heard: Sequence[Vote] = ()) -> Round:
        """One round: every member's vote on ``passages``; ``heard`` are votes the first
        members already cast on the same passages (not asked again)."""
        votes = list(heard)
        for member in members[len(heard):]:
            reply = member.answer(question, presented_to(member, passages))
            votes.append(Vote.of(member, reply))
        groups = group_answers(votes, question)
        largest = groups[0] if groups else []
        agreement = len(largest) / len(members)
        described = [{"answer": g[0].answer, "members": [v.member for v in g],
                      "size": len(g)} for g in groups]
        return Round([p.id for p in passages], votes, described, agreement, None,
                     sorted((v.answer for v in largest), key=len))

    def decide(self, question: str, passages: Sequence[ContextPassage], *,
               use_panel: bool = True, evidence: Evidence | None = None,
               suspects: Collection[str] = ()) -> ConsensusResult:
        """Ask (once, or twice with the least-trusted third dropped when the first round gives
        no answer), then settle the stated claims on their evidence. ``evidence`` is the pool
        Ring 2 read (it knows writers' records and near-duplicates); without it the context
        alone is the evidence.

        ``suspects``: passages Ring 1 flagged. Without ``use_panel`` the first member answers
        alone, and the rest of the panel reads the same context only when that answer rests
        on a suspect (its supporting passages include one): Ring 1's doubt about a passage
        matters when the answer depends on it (docs/design/ring3-consensus.md, "Gate")."""
        if not passages:
            return ConsensusResult(None, True, "insufficient evidence: no passage survived the "
                                   "defense to answer from")
        members = self.panel if use_panel else self.panel[:1]
        evidence = evidence or context_evidence(question, passages)
        current = list(passages)
        rounds = [self._round(question, current, members)]
        result = self._settle(question, rounds, current, evidence, members)
        convened = None
        suspected = set(suspects)
        doubted = [i for i in result.support if i in suspected]
        if not use_panel and doubted and len(self.panel) > 1:
            members, use_panel = self.panel, True
            rounds = [self._round(question, current, members, heard=rounds[0].votes)]
            result = self._settle(question, rounds, current, evidence, members)
            convened = (f"the first answer rests on {', '.join(doubted)}, which Ring 1 "
                        "flagged: the panel reads")
        escalated = retried = False
        why = self._second_reader_needed(result)
        if why is not None:
            second = self._second_reading(question, rounds[-1])
            asked = second.name + (", asked for the context's exact words"
                                   if second is not self.second_reader else "")
            rounds.append(self._round(question, current, [second]))
            heard = self._settle(question, rounds, current, evidence, [second])
            escalated = True
            if heard.refused:
                heard.reason = (f"{result.reason}; the second reader ({asked}) did not "
                                f"resolve it: {heard.reason}")
            else:
                heard.reason += f" (by the second reader, {asked}: {why})"
            result = heard
            if result.refused and result.unstated:
                result = self._read_by_passage(question, rounds, current, evidence, result)
        if result.refused and self.config.retry and use_panel and len(passages) > 1:
            if self._one_low_trust_source(passages, evidence):
                result.reason += (" (not asked again without the least-trusted third: the "
                                  "whole context is that one low-trust source)")
            else:
                current = drop_least_trusted(passages, self.config.drop_fraction)
                rounds.append(self._round(question, current, members))
                retried = True
                result = self._settle(question, rounds, current, evidence, members)
                if result.refused and "after dropping" not in result.reason:
                    result.reason += " (also after dropping the least-trusted third)"
        return replace(result, retried=retried, escalated=escalated, convened=convened)

    def reread(self, question: str, passages: Sequence[ContextPassage],
               evidence: Evidence) -> ConsensusResult:
        """The second reader's own reading of ``passages`` (one call), settled as a round is:
        an answer no passage states is a refusal. Asked when another reader's reading of one
        source decides a dispute by that source's standing (Ring 3's
        ``PanelConsensus._doubted``)."""
        second = self.second_reader
        if second is None:
            raise ValueError("reread() needs a second reader")
        current = list(passages)
        rounds = [self._round(question, current, [second])]
        return self._settle(question, rounds, current, evidence, [second])

    def _read_by_passage(self, question: str, rounds: list[Round],
                         passages: Sequence[ContextPassage], evidence: Evidence,
                         refused: ConsensusResult) -> ConsensusResult:
        """A yes/no question that every reader answered, on the whole context, with the same
        bare "yes" or "no" (none declined, none answered otherwise, none the other way), that
        no passage states and no sentence decides by its words (:meth:`_decided_by_context`):
        the second reader reads the passages that speak about the question
        (:func:`~trishield.answers.speaks_about`), most trusted first, outside the low-trust
        tiers, up to ``polar_readings``, one at a time. The readers' polarity is the answer
        when at least one passage is read that way and none the other way, and no passage of
        the evidence decides the other way by its words; its support is the passages read that
        way, and it must pass the single-low-trust-source check like any answer
        (:meth:`_given`). Else ``refused``, with what each passage was read as.

        Why: a bare "yes" or "no" states nothing a passage contains, so the support check
        refused every one that a passage implies in other words ("The stories are set in a
        forest in India" for "Does the Jungle Book take place in India?"). Reading one passage
        at a time makes the reading attributable (which source says it), so the evidence
        rules still apply, and a passage that does not hold the answer is declined ("I don't
        know"). Readers that disagree are left refused: both local readers lean to "yes" on a
        passage read alone, and letting them settle a dispute passage by passage gave wrong
        answers where the refusal had been right (the safety suite's "Was the proposal ...
        accepted?", read "Yes" from the minutes' paragraph about the proposal, by both;
        docs/design/ring3-consensus.md, "Yes or no, one passage at a time")."""
        second = self.second_reader
        limit = self.config.polar_readings
        if second is None or not limit or not asks_yes_or_no(question):
            return refused
        given = {polarity(v.answer) for r in rounds for v in r.votes if not v.refused}
        if len(given) != 1 or None in given:
            return refused
        about = [p for p in passages if p.tier not in self.config.low_trust_tiers
                 and speaks_about(p.text, question)][:limit]
        if not about:
            return refused
        read: dict[bool, list[ContextPassage]] = {True: [], False: []}
        said = []
        for passage in about:
            rounds.append(self._round(question, [passage], [second]))
            vote = rounds[-1].votes[0]
            side = None if vote.refused else polarity(vote.answer)
            if side is not None:
                read[side].append(passage)
            said.append(f"{passage.id} {'declined' if vote.refused else vote.answer}")
        note = f"; read passage by passage by {second.name}: {'; '.join(said)}"
        sides = [side for side in (True, False) if read[side]]
        if sides != list(given):
            return replace(refused, reason=refused.reason + note)
        answer = "Yes" if sides[0] else "No"
        if (other := decided_other_way(answer, question, evidence)) is not None:
            return replace(refused, reason=refused.reason + note + f" (a passage's words "
                           f"decide '{other}')")
        rounds[-1].winner = answer
        sources = ", ".join(p.id for p in read[sides[0]])
        return self._given(answer, read[sides[0]], rounds,
                           f"read passage by passage: '{answer}' by {sources} "
                           f"({second.name}), and no passage read the other way; the "
                           "readers' answers on the whole context are in no passage",
                           evidence=evidence)

    def _one_low_trust_source(self, passages: Sequence[ContextPassage],
                              evidence: Evidence) -> bool:
        """Whether the whole context is one low-trust source: then no answer from it can be
        given (:meth:`_given`), and dropping its least-trusted third changes nothing, so the
        retry would only spend calls (a contested question asks each source alone)."""
        return (self.config.require_support
                and lone_low_trust_source(passages, evidence, self.config.low_trust_tiers)
                is not None)

    def _second_reading(self, question: str, last: Round) -> Reader:
        """The second reader as it is asked after ``last``: asked for the context's exact
        words (``quoting()``) when it already voted in that round on the same passages, else
        as it is.

        Why: at temperature 0 the same model and prompt give the same answer, so with the
        default panel (whose reader is the second reader's model) the second reading repeated
        the answer that no passage states, and the question was refused. Asked to copy the
        phrase, the same model often gives the span it had reworded. Yes/no questions keep the
        plain prompt: their answer is a polarity no passage states, read passage by passage
        (:meth:`_read_by_passage`), not a phrase to copy."""
        second = self.second_reader
        assert second is not None  # no reason to ask without one
        quoting = getattr(second, "quoting", None)
        if (quoting is None or asks_yes_or_no(question)
                or all(vote.member != second.name for vote in last.votes)):
            return second
        return quoting()

    def _second_reader_needed(self, result: ConsensusResult) -> str | None:
        """Why the second reader is asked, or None: there is one, the round refused, and either
        it left no stated claim (every answer is in no passage, or every member declined) or
        the panel read one source two ways without a majority. A conflict between sources is
        the evidence's to settle, not a stronger reader's."""
        if self.second_reader is None or not result.refused:
            return None
        if result.disputed:
            return "the panel read one source two ways"
        if result.unstated:
            return "the first answer was in no passage"
        return None

    def _settle(self, question: str, rounds: list[Round], passages: Sequence[ContextPassage],
                evidence: Evidence, members: Sequence[Reader]) -> ConsensusResult:
        final = rounds[-1]
        claims = stated_claims(final, passages, question)
        if not claims:
            unsettled = self._unstated(question, rounds, passages, evidence, members)
            return replace(unsettled, unstated=unsettled.refused)
        chosen, verdict, disputed = self._weigh(claims, evidence, len(members))
        if chosen is None:
            return ConsensusResult(None, True, verdict.reason if verdict else "", rounds,
                                   verdict=verdict, disputed=disputed)
        final.winner = chosen.answer
        reason = ("agreed" if verdict is None else f"weighed: {verdict.reason}")
        return self._given(chosen.answer, chosen.support, rounds, reason, verdict, evidence)

    def _unstated(self, question: str, rounds: list[Round], passages: Sequence[ContextPassage],
                  evidence: Evidence, members: Sequence[Reader]) -> ConsensusResult:
        """A round whose answers no passage states: a refusal with the reason, unless the
        context decides a yes/no question (:meth:`_decided_by_context`) or support is not
        required and the panel agrees."""
        final = rounds[-1]
        if all(v.refused for v in final.votes):
            reason = ("the context does not contain the answer (every member declined)"
                      if len(members) > 1 else
                      f"{members[0].name} declined: the context does not hold the answer")
            return ConsensusResult(None, True, reason, rounds)
        given = "', '".join(dict.fromkeys(v.answer for v in final.votes if not v.refused))
        decided = self._decided_by_context(question, passages, evidence, rounds, given)
        if decided is not None:
            return decided
        if not self.config.require_support:
            winner = final.agreed_answers[0] if final.agreed_answers else None
            if winner is not None and final.agreement >= self.config.tau:
                final.winner = winner
                return ConsensusResult(winner, False, "agreed (support not required)",
                                       rounds)
        return ConsensusResult(None, True, f"insufficient evidence: no context passage "
                               f"supports the answer '{given}'", rounds)

    def _decided_by_context(self, question: str, passages: Sequence[ContextPassage],
                            evidence: Evidence, rounds: list[Round],
                            given: str) -> ConsensusResult | None:
        """A yes/no question the readers answered with nothing a passage states, when the
        context decides it one way only: a sentence holds every content term of the question
        and is negated exactly for "no" (:func:`trishield.answers.decides`), and no passage of
        the evidence (the whole pool Ring 2 read, or the first context: not only what is left
        after dropping the least trusted) decides it the other way. Then that polarity is the
        answer, from those passages.

        Why: a bare yes/no is a reading of one sentence, and the panel's small models misread
        negation ("Opened software is not refundable" read as "Yes" by every member and by
        the second reader on the safety suite). The deciding sentence is the evidence itself;
        an answer no passage states was already worth nothing. Context that decides both
        ways is left to the readers (a conflict is not settled by this rule). Only passages
        outside the low-trust tiers decide: no reader stated this answer, so the context's
        own reading must not rest on a writer TriShield already distrusts (several untrusted
        documents would pass the single-low-trust-source check of :meth:`_given`)."""
        if not asks_yes_or_no(question):
            return None
        trusted_enough = [p for p in passages if p.tier not in self.config.low_trust_tiers]
        decided = {answer: supporting_passages(answer, trusted_enough, question)
                   for answer in ("Yes", "No")}
        stated = [answer for answer, support in decided.items() if support]
        if len(stated) != 1:
            return None
        answer = stated[0]
        if decided_other_way(answer, question, evidence) is not None:
            return None
        rounds[-1].winner = answer
        sources = ", ".join(p.id for p in decided[answer])
        return self._given(answer, decided[answer], rounds,
                           f"decided by the context: '{answer}' by {sources}, and no passage "
                           f"read the other way; the readers' answer '{given}' is in no passage",
                           evidence=evidence)

    def _given(self, answer: str, support: Sequence[ContextPassage], rounds: list[Round],
               reason: str, verdict: Verdict | None = None,
               evidence: Evidence | None = None) -> ConsensusResult:
        """``answer``, stated by ``support``, unless all of it is one low-trust source
        (:func:`lone_low_trust_source`)."""
        support_ids = [p.id for p in support]
        lone = (lone_low_trust_source(support, evidence, self.config.low_trust_tiers)
                if self.config.require_support else None)
        if lone is not None:
            return ConsensusResult(None, True, f"insufficient evidence: the answer {answer!r} "
                                   f"rests on a single low-trust source ({lone})",
                                   rounds, support_ids, verdict=verdict, distrusted=True)
        return ConsensusResult(answer, False, reason, rounds, support_ids, verdict=verdict)

    def _weigh(self, claims: list[StatedClaim], evidence: Evidence,
               panel_size: int) -> tuple[StatedClaim | None, Verdict | None, bool]:
        """One stated claim is the answer; several are weighed by their evidence. Claims the
        evidence cannot tell apart (one source states both: :func:`same_source`) are a reading
        dispute: the larger group needs ``tau`` of the panel. The flag says a refusal is such
        an unsettled dispute (not a conflict between sources)."""
        if len(claims) == 1:
            return claims[0], None, False
        position = evidence.position
        by_label = {c.answer: c for c in claims}
        verdict = evidence.judge({c.answer: [position[p.id] for p in c.support
                                             if p.id in position] for c in claims})
        if verdict.opposition is None:
            return by_label[verdict.support.label], verdict, False
        best, runner_up = by_label[verdict.support.label], by_label[verdict.opposition.label]
        # one source stating both is read two ways, whatever the weights: a writer never
        # outweighs itself (its passages stating one reading are no evidence against the other)
        one_source = same_source(evidence, best.support, runner_up.support)
        if verdict.outcome != "conflict" and not one_source:
            return best, verdict, False
        larger = max(claims, key=lambda c: c.members)
        if one_source and larger.members / panel_size >= self.config.tau:
            other = best if larger is runner_up else runner_up
            return larger, Verdict("stands", f"{larger.answer!r} and {other.answer!r} "
                                   "rest on the same source; "
                                   f"{larger.members} of {panel_size} members read "
                                   f"{larger.answer!r} (tau {self.config.tau:.2f})",
                                   verdict.support, verdict.opposition), False
        return None, verdict, one_source

    def check_evidence(self, question: str, answers: Sequence[str],
                       passages: Sequence[ContextPassage], rounds: list[Round],
                       evidence: Evidence | None = None) -> ConsensusResult:
        """Whether the answer (the first of ``answers`` a passage states) is stated by
        ``passages``: the last check before a weighed claim is given. ``evidence``: the pool
        the passages came from, which tells whether several of them are one source."""
        answer, support = first_stated(answers, passages, question)
        if not support:
            if self.config.require_support:
                return ConsensusResult(None, True, f"insufficient evidence: no context passage "
                                       f"supports the answer {answer!r}", rounds)
            return ConsensusResult(answer, False, "agreed", rounds)
        return self._given(answer, support, rounds, "agreed", evidence=evidence)
