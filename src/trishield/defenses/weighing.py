"""Weighing the claims of a contested question's sources (Ring 3, answered source by source).

Each heavy source was asked for its own answer (:class:`SourceReading`); here the answers
are grouped into claims, filtered to answers of the asked type about the question, weighed
by their evidence (:meth:`~trishield.rings.evidence.Evidence.judge`) and checked against the
silence of heavier sources. The answerer (:mod:`trishield.defenses.answerers`) asks the
readers and gives or refuses what :func:`weigh_readings` decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from trishield.answers import same_answer
from trishield.rings.claim_rules import answers_as_asked, heading_titles
from trishield.rings.claims import SPAN_KINDS, answer_type, spans_in
from trishield.rings.consensus import ConsensusResult
from trishield.rings.evidence import (
    SHORT_ANSWER_WORDS,
    TIER_ORDER,
    ClaimSide,
    Evidence,
    Source,
    Verdict,
    answer_states,
)
from trishield.stages import ContextPassage


@dataclass(frozen=True)
class SourceReading:
    """One heavy source asked for its own answer: the passages it was read from, what its
    readers gave (``answer`` None when they declined) and who they were."""

    source: Source
    passages: list[ContextPassage]
    answer: str | None
    refused: bool
    distrusted: bool
    """Answered, but on a single low-trust source alone (so it counts as silent)."""
    readers: frozenset[str]
    read_again_by_second: bool = False

    def read_again(self, result: ConsensusResult) -> SourceReading:
        """This source as the second reader read it (:meth:`Consensus.reread`)."""
        return replace(self, answer=None if result.refused else result.answer,
                       refused=result.refused, distrusted=result.distrusted,
                       read_again_by_second=True)


@dataclass(frozen=True)
class Weighing:
    """What weighing the sources' readings gave: the verdicts to record (the trace's
    evidence), the refusal's reason or None, and, when a claim decides the question against
    another (it is given, or it makes a conflict although it is not read as an answer), those
    two claims as weighed (:meth:`PanelConsensus._doubted` reads them)."""

    verdicts: tuple[Verdict, ...] = ()
    refusal: str | None = None
    deciding: ClaimSide | None = None
    against: ClaimSide | None = None

    @property
    def verdict(self) -> Verdict | None:
        return self.verdicts[0] if self.verdicts else None


def weigh_readings(question: str, evidence: Evidence, readings: Sequence[SourceReading],
                   unasked: Sequence[Source], max_sources: int) -> Weighing:
    """Group the sources' answers into claims (a source not asked joins the one claim its
    passages state) and weigh them: :func:`answers_only` keeps the answers of the asked type
    about the question, :func:`filtered_winner` refuses when a dropped claim would have won,
    the best claim must stand (:meth:`Evidence.judge`), and a heavier source about the
    question that gave no answer refuses it (:func:`outweighed_by_silence`)."""
    claims: dict[str, list[int]] = {}
    silent: list[Source] = []
    distrusted: list[Source] = []
    for reading in readings:
        if reading.refused or reading.answer is None:
            silent.append(reading.source)
            if reading.distrusted:
                distrusted.append(reading.source)
            continue
        label = next((known for known in claims
                      if same_answer(known, reading.answer, question)), reading.answer)
        claims.setdefault(label, []).extend(reading.source.members)
    unheard: list[Source] = []  # not asked, and stating no claim that was given
    for source in unasked:  # not asked: join what they state
        stated = [label for label in claims if any(
            answer_states(label, evidence.items[i].text, question) for i in source.members)]
        if len(stated) == 1:
            claims[stated[0]].extend(source.members)
        elif not stated:
            unheard.append(source)
    answering = answers_only(claims, question, evidence)
    if (overruled := filtered_winner(claims, answering, question, evidence)) is not None:
        return Weighing((overruled,), overruled.reason, overruled.support,
                        overruled.opposition)
    claims = answering
    # silence is not opposition: only a side with a passage about the question that
    # gives an answer of the asked type (which its reader did not read) stands against
    silent = [source for source in silent if any(evidence.answers(i) for i in source.members)]
    unheard = [source for source in unheard
               if any(evidence.answers(i) for i in source.members)]
    if not claims:
        why = "every source declined"
        if distrusted:
            named = "; ".join("+".join(source.writers) for source in distrusted)
            why = (f"{len(silent) - len(distrusted)} declined, {len(distrusted)} answered "
                   f"on a single low-trust source alone: {named}")
        return Weighing(refusal="no independent source about the question gives an answer "
                                f"({why})")
    verdict = evidence.judge(claims)
    if verdict.outcome not in ("stands", "unopposed"):
        return Weighing((verdict,), verdict.reason)
    for quiet, why in ((silent, "gives no answer"),
                       (unheard, f"was not asked (only the {max_sources} heaviest sides "
                                 "are) and states no answer given")):
        if (silence := outweighed_by_silence(evidence, verdict.support, quiet)) is None:
            continue
        heavier, claim = silence
        stood = ", in the knowledge base first" if heavier.established else ""
        reason = (f"insufficient evidence: {verdict.support.label!r} rests on lighter "
                  f"sources (weight {claim.weight:.2f} against it) while a heavier source "
                  f"about the question ({'+'.join(heavier.writers)}, {heavier.tier}, "
                  f"weight {heavier.weight:.2f}{stood}) {why}")
        # the weighing that refused, both sides as weighed against each other
        return Weighing((verdict, Verdict("silenced", reason, claim, ClaimSide(
            f"(no answer: {'+'.join(heavier.writers)})", (heavier,)))), reason)
    return Weighing((verdict,), None, verdict.support, verdict.opposition)


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


def filtered_winner(claims: dict[str, list[int]], answering: dict[str, list[int]],
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
