"""Answerers: one reader, or Ring 3's panel behind its gate.

Both record every reader call on the run (the trace's ``calls``, from which LLM calls and
tokens are counted) and the votes in the trace: ``reader`` for one reader, ``ring3`` for the
panel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from trishield.answers import contains_answer, same_answer
from trishield.defenses.disputes import note_dispute
from trishield.llm.base import Reader, ReaderAnswer
from trishield.rings.claim_rules import answers_as_asked, heading_titles
from trishield.rings.claims import SPAN_KINDS, answer_type, spans_in
from trishield.rings.consensus import (
    Consensus,
    ConsensusConfig,
    ConsensusResult,
    Round,
    Vote,
    context_evidence,
    presented_to,
)
from trishield.rings.evidence import (
    SHORT_ANSWER_WORDS,
    TIER_ORDER,
    ClaimSide,
    Evidence,
    Item,
    Source,
    Verdict,
    answer_states,
)
from trishield.stages import ContextPassage, Outcome, Run
from trishield.trace import CallRow, EvidenceTrace, GateTrace, Ring3Trace, VoteRow, WeighingRow

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
    """Ring 3 over the evidence Ring 2 read from the pool.

    When one independent source speaks about the question, one model answers from the
    context (the panel votes only when Ring 1 flagged something, or in gate mode
    ``always``). When several do, the question is *contested*: each of the heaviest
    ``max_sources`` sources is asked for its own answer from its own passages, the answers
    are grouped into claims, and the claims are weighed (:mod:`trishield.rings.evidence`):
    the best claim is given when it clearly outweighs the runner-up, else TriShield refuses
    with "conflicting sources" and both claims. Either way the answer must be stated by its
    evidence (the consensus's support check)."""

    name = "ring3"

    def __init__(self, panel: Sequence[Reader], config: ConsensusConfig | None = None, *,
                 second_reader: Reader | None = None):
        self.config = config or ConsensusConfig()
        self.consensus = Consensus(panel, self.config, second_reader=second_reader)
        self.readers = list(panel) + ([second_reader] if second_reader is not None else [])

    def gate(self, run: Run, context: Sequence[ContextPassage],
             sides: Sequence[Source] = ()) -> tuple[bool, list[str]]:
        """Whether the panel votes, and why: a passage Ring 1 flagged (not blocked: blocked
        ones never reach the context) is in the context. A contested question is answered
        source by source instead (one call per source), so it does not need the panel."""
        reasons = []
        if len(sides) > 1:
            reasons.append(f"contested: {len(sides)} independent sources speak about the "
                           "question; each is asked for its own answer")
        mode = self.config.gate
        if mode == "always":
            return True, [*reasons, "gate mode 'always'"]
        if mode == "never":
            return False, [*reasons, "gate mode 'never'"]
        flagged = [p.id for p in context if p.id in set(run.signals.flagged)]
        if flagged:
            return False, [*reasons, f"Ring 1 flagged {len(flagged)} context passage(s): the "
                           "panel reads if an answer rests on one"]
        return False, reasons or ["Rings 1-2 saw no risk: one model answers"]

    def _suspects(self, run: Run) -> list[str]:
        """The passages whose use as an answer's support makes the panel read: those Ring 1
        flagged, in gate mode ``gated`` (``always`` asks the panel anyway, ``never`` never)."""
        return run.signals.flagged if self.config.gate == "gated" else []

    def answer(self, run: Run, question: str, context: list[ContextPassage]) -> Outcome:
        """The answer or refusal; a conflict between writers that the weighing met is then
        recorded in the retriever's disputes queue (:mod:`trishield.defenses.disputes`),
        which changes nothing of the outcome."""
        evidence = run.evidence if isinstance(run.evidence, Evidence) else context_evidence(
            question, context)
        outcome = self._answer(run, question, context, evidence)
        note_dispute(run, question, evidence, outcome)
        return outcome

    def _answer(self, run: Run, question: str, context: list[ContextPassage],
                evidence: Evidence) -> Outcome:
        position = evidence.position
        evidence.suspects = frozenset(position[i] for i in run.signals.flagged if i in position)
        in_context = [position[p.id] for p in context if p.id in position]
        sides = evidence.sides(in_context) if context else []
        use_panel, reasons = self.gate(run, context, sides)
        contested = len(sides) > 1
        run.trace.gate = GateTrace(mode=self.config.gate, use_panel=use_panel, reasons=reasons)
        if contested:
            return self._by_source(run, question, evidence, sides, use_panel)
        result = self.consensus.decide(question, context, use_panel=use_panel,
                                       evidence=evidence, suspects=self._suspects(run))
        convened(run, [result])
        unread = [] if result.refused else unread_support(evidence, result, position)
        recount = evidence.sides(in_context, answered=[position[i] for i in unread]
                                 ) if unread else []
        if len(recount) > 1:
            read = (f"another source than the {len(sides)} that did" if sides
                    else "sources none of whose passages it read")
            reason = (f"contested after the answer: {result.answer!r} rests on "
                      f"{', '.join(unread)}, which Ring 2 did not read as speaking about the "
                      f"question, from {read}; each of the {len(recount)} sources is asked "
                      "for its own answer")
            run.trace.gate = GateTrace(mode=run.trace.gate.mode, use_panel=use_panel,
                                       reasons=[*run.trace.gate.reasons, reason])
            return self._by_source(run, question, evidence, recount, use_panel,
                                   prior=result.rounds, escalated=result.escalated)
        if result.verdict is not None:
            record_verdict(run, evidence, result.verdict)
        return self._finish(run, result, context)

    def _by_source(self, run: Run, question: str, evidence: Evidence, sides: list[Source],
                   use_panel: bool, prior: Sequence[Round] = (),
                   escalated: bool = False) -> Outcome:
        """Ask each heavy source for its own answer (one model, or the panel when the gate
        opened), group the answers into claims, weigh them. ``prior``: rounds already asked
        of the whole context (their calls are counted and traced with the rest), and
        ``escalated`` whether they asked the second reader."""
        claims: dict[str, list[int]] = {}
        rounds: list[Round] = list(prior)
        silent: list[Source] = []
        distrusted: list[Source] = []  # answered, but on a single low-trust source alone
        # whether the prior rounds or any source's question went to the second reader
        for source in sides[:self.config.max_sources]:
            members = sorted(source.members, key=lambda i: -evidence.claims[i].relevance)
            passages = [evidence_passage(evidence.items[i]) for i in members[:5]]
            heard = self.consensus.decide(question, passages, use_panel=use_panel,
                                          evidence=evidence,
                                          suspects=self._suspects(run))
            convened(run, [heard])
            rounds += heard.rounds
            escalated = escalated or heard.escalated
            if heard.refused or heard.answer is None:
                silent.append(source)
                if heard.distrusted:
                    distrusted.append(source)
                continue
            label = next((known for known in claims
                          if same_answer(known, heard.answer, question)), heard.answer)
            claims.setdefault(label, []).extend(source.members)
        unheard: list[Source] = []  # not asked, and stating no claim that was given
        for source in sides[self.config.max_sources:]:  # not asked: join what they state
            stated = [label for label in claims if any(
                answer_states(label, evidence.items[i].text, question) for i in source.members)]
            if len(stated) == 1:
                claims[stated[0]].extend(source.members)
            elif not stated:
                unheard.append(source)
        answering = answers_only(claims, question, evidence)
        if (overruled := _filtered_winner(claims, answering, question, evidence)) is not None:
            record_verdict(run, evidence, overruled)
            result = ConsensusResult(None, True, overruled.reason, rounds)
            return self._finish(run, result, [], escalated=escalated)
        claims = answering
        # silence is not opposition: only a side with a passage about the question that
        # gives an answer of the asked type (which its reader did not read) stands against
        silent = [source for source in silent
                  if any(evidence.answers(i) for i in source.members)]
        unheard = [source for source in unheard
                   if any(evidence.answers(i) for i in source.members)]
        if not claims:
            why = "every source declined"
            if distrusted:
                named = "; ".join("+".join(source.writers) for source in distrusted)
                why = (f"{len(silent) - len(distrusted)} declined, {len(distrusted)} answered "
                       f"on a single low-trust source alone: {named}")
            result = ConsensusResult(None, True, "no independent source about the question "
                                     f"gives an answer ({why})", rounds)
            return self._finish(run, result, [], escalated=escalated)
        verdict = evidence.judge(claims)
        record_verdict(run, evidence, verdict)
        if verdict.outcome not in ("stands", "unopposed"):
            result = ConsensusResult(None, True, verdict.reason, rounds)
            return self._finish(run, result, [], escalated=escalated)
        for quiet, why in ((silent, "gives no answer"),
                           (unheard, f"was not asked (only the {self.config.max_sources} "
                                     "heaviest sides are) and states no answer given")):
            if (silence := outweighed_by_silence(evidence, verdict.support, quiet)) is None:
                continue
            heavier, claim = silence
            stood = ", in the knowledge base first" if heavier.established else ""
            reason = (f"insufficient evidence: {verdict.support.label!r} rests on lighter "
                      f"sources (weight {claim.weight:.2f} against it) while a heavier source "
                      f"about the question ({'+'.join(heavier.writers)}, {heavier.tier}, "
                      f"weight {heavier.weight:.2f}{stood}) {why}")
            # the weighing that refused, both sides as weighed against each other
            record_verdict(run, evidence, Verdict(
                "silenced", reason, claim,
                ClaimSide(f"(no answer: {'+'.join(heavier.writers)})", (heavier,))))
            result = ConsensusResult(None, True, reason, rounds)
            return self._finish(run, result, [], escalated=escalated)
        winners = [evidence_passage(evidence.items[i])
                   for source in verdict.support.sources for i in source.members]
        result = self.consensus.check_evidence(question, [verdict.support.label], winners,
                                               rounds, evidence)
        if not result.refused:
            result.reason = f"weighed: {verdict.reason}"
        return self._finish(run, result, winners, escalated=escalated)

    @staticmethod
    def _finish(run: Run, result: ConsensusResult, context: Sequence[ContextPassage], *,
                escalated: bool = False) -> Outcome:
        """The outcome and the trace; ``escalated``: a contested question's source rounds
        asked the second reader (each source's own result says so only for itself)."""
        if escalated:
            result.escalated = True
        run.trace.ring3 = Ring3Trace.model_validate(result.as_dict())
        for round_ in result.rounds:
            run.calls.extend(vote_call(vote) for vote in round_.votes)
        citations = sorted({p.doc_id for p in context if p.id in set(result.support)})
        return Outcome(result.answer, result.refused, result.reason, citations)


def answers_only(claims: dict[str, list[int]], question: str,
                 evidence: Evidence) -> dict[str, list[int]]:
    """The sources' claims that take part in the weighing: where several compete, only
    answers of the asked kind (:func:`~trishield.rings.claim_rules.answers_as_asked`) given
    by a source with a passage about the question, by its words (:meth:`Evidence.about
    <trishield.rings.evidence.Evidence.about>`) or by its meaning
    (:meth:`~trishield.rings.evidence.Evidence.about_by_meaning`: a true passage worded
    otherwise than the question). A heavy source asked on its own passages
    answers with whatever they hold (the extractive reader's best sentence about leave for a
    lighthouse's year; a Super Bowl paragraph's "February 1, 2016" for Groundhog Day), and
    its weight outweighed the sources that did answer; such a claim is neither an answer nor
    a refusal, so it is dropped, not counted as silence. Each filter applies only where it
    leaves a claim (else every claim is weighed as before)."""
    if len(claims) < 2:
        return claims
    titles = heading_titles((item.title, item.text) for item in evidence.items)
    typed = {label: members for label, members in claims.items()
             if answers_as_asked(label, question, titles)} or claims
    if len(typed) < 2:
        return typed
    return {label: members for label, members in typed.items()
            if any(evidence.about(i) or evidence.about_by_meaning(i) for i in members)} or typed


def _filtered_winner(claims: dict[str, list[int]], answering: dict[str, list[int]],
                     question: str, evidence: Evidence) -> Verdict | None:
    """A conflict when :func:`answers_only` dropped, for its words, the claim of the asked
    type that would have won the weighing: a title, or a reading of passages that share too
    few of the question's words, is never the answer, but it does not leave its rival
    unopposed either. A claim of another type (a sentence about leave for "which year"), or a
    sentence (more than :data:`~trishield.rings.evidence.SHORT_ANSWER_WORDS` words) holding
    no candidate of the asked kind (the extractive reader's best sentence of a warranty
    page, asked who designed a bridge), is no answer whoever gives it, and is simply
    dropped.

    Why: those two filters read words, and a poison is written to pass them (it echoes the
    question, and its lie is never a heading), while a true passage often uses other words
    ("singer" for "sings") or is the article the answer names ("Tiber"). Dropping the
    year-old truth as "not about the question" left five new poisons unopposed: the matrix's
    claim-only, split-claim, diverse and refute families rose from ASR 0.00 to 0.24-0.30
    under ``full-gated`` (docs/decisions.md, D38). A dropped claim that would only have
    conflicted is noise, and the filters still clear it."""
    kind = answer_type(question)
    kinds = SPAN_KINDS if kind == "any" else (kind,)
    dropped = {label: members for label, members in claims.items()
               if label not in answering and answers_as_asked(label, question)
               and (len(label.split()) <= SHORT_ANSWER_WORDS
                    or any(spans_in(" ".join(label.split()), k) for k in kinds))}
    if not answering or not dropped:
        return None
    typed = answering | dropped
    everything = evidence.judge(typed)
    if everything.support.label in answering or everything.outcome == "conflict":
        return None
    kept = evidence.judge(answering).support
    heaviest = everything.support
    return Verdict("conflict", f"conflicting sources: {heaviest.label!r} (weight "
                   f"{heaviest.weight:.2f}, {heaviest.top_tier}) outweighs {kept.label!r} but "
                   "is not read as an answer (a title, or passages about the question "
                   "neither by its words nor by meaning); neither is given", heaviest, kept)


def unread_support(evidence: Evidence, result: ConsensusResult,
                   position: dict[str, int]) -> list[str]:
    """The passages an answer rests on that share no term with the question. The reader read
    them as answering it, so they speak about it, and Ring 3 counts the sides again with them
    (Ring 2 reads claims by the question's words, and a paraphrase or a misspelling has none
    of them); more than one side then means the question is contested after all."""
    return [i for i in result.support
            if i in position and not evidence.claims[position[i]].relevance]


def convened(run: Run, results: Sequence[ConsensusResult]) -> None:
    """The gate's trace, when an answer that rested on a passage Ring 1 flagged made the
    rest of the panel read: the panel did vote, and the reason says on what."""
    why = [r.convened for r in results if r.convened]
    if why and run.trace.gate is not None:
        run.trace.gate = GateTrace(mode=run.trace.gate.mode, use_panel=True,
                                   reasons=[*run.trace.gate.reasons, *why])


def outweighed_by_silence(evidence: Evidence, claim: ClaimSide, silent: Sequence[Source]
                          ) -> tuple[Source, ClaimSide] | None:
    """A source about the question that gave no answer and outweighs the claim (higher tier,
    or the same tier and more weight), weighed against each other as opposing claims are
    (each side's precedence, bursts and newcomers' tenure measured against the other's
    passages): then the claim rests on the lighter evidence and is not believed. Returns
    that source and the claim as weighed against it. Silence is no contradiction, but an
    attacker's passages always speak, and the truth is often only implied by the heavier
    source, or stated in words no lexical check can match (a reader's "No" that no sentence
    decides). Weighed apart, as the sides were ranked, an archive that stood first weighed
    as little as a newcomer's claim: the precedence it earned only counted against a claim."""
    members = [i for source in claim.sources for i in source.members]
    for source in silent:
        # a side is one origin (Evidence.sides), so regrouped by origin it is one source
        (quiet,) = evidence.sources(source.members, members, by_origin=True)
        heard = ClaimSide(claim.label, evidence.sources(members, source.members))
        theirs, ours = TIER_ORDER[quiet.tier], TIER_ORDER[heard.top_tier or "untrusted"]
        if theirs > ours or (theirs == ours and quiet.weight > heard.weight):
            return quiet, heard
    return None


def record_verdict(run: Run, evidence: Evidence, verdict: Verdict) -> None:
    """The claims weighed, both sides with their sources, into the trace's evidence."""
    if run.trace.evidence is None:
        run.trace.evidence = EvidenceTrace.model_validate(evidence.as_dict())
    row = WeighingRow.model_validate(verdict.as_dict(evidence.items))
    run.trace.evidence.verdicts = [*run.trace.evidence.verdicts, row]  # marks it set


def evidence_passage(item: Item) -> ContextPassage:
    return ContextPassage(item.id, item.doc_id, item.tier, 1.0, item.text, item.writer,
                          item.title)


def vote_call(vote: Vote) -> CallRow:
    """The call behind a panel vote, as the run records it."""
    return CallRow(purpose="vote", model=vote.member, llm=vote.llm, cached=vote.cached,
                   prompt_tokens=vote.prompt_tokens, completion_tokens=vote.completion_tokens,
                   seconds=round(vote.seconds, 3))
