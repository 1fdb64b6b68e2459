"""Answerers: one reader, or Ring 3's panel behind its gate.

Both record every reader call on the run (the trace's ``calls``, from which LLM calls and
tokens are counted) and the votes in the trace: ``reader`` for one reader, ``ring3`` for the
panel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from trishield.answers import contains_answer
from trishield.defenses.disputes import note_dispute
from trishield.defenses.weighing import SourceReading, Weighing, weigh_readings
from trishield.llm.base import Reader, ReaderAnswer
from trishield.rings.claim_rules import answers_as_asked
from trishield.rings.consensus import (
    Consensus,
    ConsensusConfig,
    ConsensusResult,
    Round,
    Vote,
    context_evidence,
    presented_to,
)
from trishield.rings.evidence import Evidence, Item, Source, Verdict
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
        ``escalated`` whether they asked the second reader.

        A claim that decides against a new side only by its source's time stood or tier is
        read again from that source alone by the second reader (:meth:`_doubted`), and the
        weighing is redone with that reading: precedence multiplies a misreading by the
        source's weight."""
        rounds: list[Round] = list(prior)
        readings: list[SourceReading] = []
        for source in sides[:self.config.max_sources]:
            members = sorted(source.members, key=lambda i: -evidence.claims[i].relevance)
            passages = [evidence_passage(evidence.items[i]) for i in members[:5]]
            heard = self.consensus.decide(question, passages, use_panel=use_panel,
                                          evidence=evidence,
                                          suspects=self._suspects(run))
            convened(run, [heard])
            rounds += heard.rounds
            escalated = escalated or heard.escalated
            readers = frozenset(v.member for r in heard.rounds for v in r.votes)
            readings.append(SourceReading(source, passages, heard.answer, heard.refused,
                                          heard.distrusted, readers))
        unasked = sides[self.config.max_sources:]
        notes: list[str] = []
        while True:
            weighing = weigh_readings(question, evidence, readings, unasked,
                                      self.config.max_sources)
            doubted = self._doubted(weighing, readings)
            if doubted is None:
                break
            reading = readings[doubted]
            again = self.consensus.reread(question, reading.passages, evidence)
            rounds += again.rounds
            escalated = True
            about = any(evidence.about(i) or evidence.about_by_meaning(i)
                        for i in reading.source.members)
            # a reading that is no answer of the asked kind is no reading of the claim
            # (answers_only drops such a claim, and with it the source's standing)
            unread = again.refused or again.answer is None or not answers_as_asked(
                again.answer, question)
            if unread and about:
                # the readers disagree; Ring 2 reads the source as about the question, so the
                # first reading keeps the source's standing (two signals against one)
                readings[doubted] = replace(reading, read_again_by_second=True)
                given = ((f"{again.answer!r}, no answer of the asked kind" if not again.refused
                          else "declined")
                         + "; the source is about the question (Ring 2), so the first "
                           "reading stands")
            else:
                readings[doubted] = reading.read_again(again)
                given = "declined" if again.refused else repr(again.answer)
            notes.append(f"{weighing.deciding.label!r} decides against a new side by its "
                         f"source's standing alone: the second reader read that source "
                         f"({'+'.join(reading.source.writers)}) again: {given}")
        if notes and run.trace.gate is not None:
            run.trace.gate = GateTrace(mode=run.trace.gate.mode, use_panel=use_panel,
                                       reasons=[*run.trace.gate.reasons, *notes])
        for verdict in weighing.verdicts:
            record_verdict(run, evidence, verdict)
        if weighing.refusal is not None:
            result = ConsensusResult(None, True, weighing.refusal, rounds)
            return self._finish(run, result, [], escalated=escalated)
        verdict = weighing.verdict
        assert verdict is not None  # a weighing that is no refusal gave a claim
        winners = [evidence_passage(evidence.items[i])
                   for source in verdict.support.sources for i in source.members]
        result = self.consensus.check_evidence(question, [verdict.support.label], winners,
                                               rounds, evidence)
        if not result.refused:
            result.reason = f"weighed: {verdict.reason}"
        return self._finish(run, result, winners, escalated=escalated)

    def _doubted(self, weighing: Weighing, readings: list[SourceReading]) -> int | None:
        """The reading to ask the second reader for again, or None: the claim that decides
        (the one given, or a dropped claim that makes a conflict) has a source that is not
        new (it stood, is signed or trusted) while every source of the claim it decides
        against is new, and that source's reading was by other readers than the second
        reader (read once more at most).

        Why: the weight of time stood multiplies a reading. A small reader asked on a
        year-old article about something near the question answers with a rewording of the
        question and a name from the passage ("The river associated with the city of Rome is
        the Rhine", from the Rhine's article), and that misreading, weighing 2.00 against a
        new writer's 0.10, overturned the truth: on the timed conditions' control with no
        attacker (newcomer-truth), six of nine answers lost against undefended reading were
        that. The second reader is the strongest local reader; when it reads the source
        otherwise, its reading is the source's claim."""
        second = self.consensus.second_reader
        deciding, against = weighing.deciding, weighing.against
        if second is None or deciding is None or against is None:
            return None
        if deciding.only_new or not against.only_new:
            return None
        standing = sorted((s for s in deciding.sources if not s.new), key=lambda s: -s.weight)
        for source in standing:
            for n, reading in enumerate(readings):
                if (not reading.read_again_by_second and second.name not in reading.readers
                        and reading.answer is not None
                        and set(reading.source.members) & set(source.members)):
                    return n
        return None

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
