"""RobustRAG-style isolate-then-aggregate with secure keyword aggregation (Xiang et al., 2024).

Each of the top ``k`` passages is answered *in isolation* (``k`` reader calls, one passage
each), so a poison can sway only its own answer. Keywords are extracted from every isolated
answer that did not abstain; a keyword is kept when it occurs in at least
``min(beta, alpha * n)`` of the ``n`` non-abstaining answers (RobustRAG's ``KeywordAgg``:
``alpha`` 0.3, ``beta`` 3, thresholding on the non-abstained count as its code does). The
reader then answers the question from the kept keywords alone (one more call).

Differences from the reference implementation, and why:

* keywords: RobustRAG takes spaCy lemmas and POS-delimited phrases; TriShield has no spaCy
  model offline, so a response's keywords are its content words (``trishield.text``, stopwords
  removed), the maximal runs of consecutive content words, and the whole answer, each counted
  once per response and matched on Snowball stems (the stand-in for lemmas);
* when no keyword reaches the threshold, RobustRAG still asks the LLM with an empty hint list
  (which then answers from its own memory); here that is a refusal, since nothing the passages
  agree on remains to answer from;
* the final prompt is TriShield's short instruction in RobustRAG's spirit (answer from the
  experts' keywords), not its four-shot template; the extractive reader (no LLM) gets the
  keyword list as its only passage.

Every one of the ``k`` passages is read (alone: ``trace.details["robustrag-keyword"]``). The
trace's ``context`` is the passages whose isolated answer contributed a kept keyword, i.e. what
reached the final answer; ``removed`` is the others (their isolated answer abstained or was
outvoted), so ``context`` and ``removed`` partition the candidates as for the other defenses.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trishield.answers import contains_answer
from trishield.defenses.answerers import single_vote
from trishield.errors import InputError
from trishield.eval.baselines.base import check_fraction, check_reader
from trishield.llm.base import Reader, ReaderAnswer
from trishield.llm.reader import LLMReader, cite, parse_reply
from trishield.rings.consensus import Vote
from trishield.stages import ContextPassage, Outcome, Run
from trishield.text import STOPWORDS, stem, words

NAME = "robustrag-keyword"
DEFAULT_ALPHA = 0.3
DEFAULT_BETA = 3
HINT_INSTRUCTION = ("Experts extracted the keywords below from several sources. Answer the "
                    "question using only these keywords. Reply with a short answer (a few "
                    "words). If the keywords do not answer it, reply exactly: I don't know.")


def response_keywords(response: str) -> dict[str, str]:
    """``{stemmed key: surface form}`` of one response: its content words, the maximal runs of
    consecutive content words, and the whole response (all lower-cased)."""
    tokens = words(response)
    found: dict[str, str] = {}

    def add(run: Sequence[str]) -> None:
        if run:
            found.setdefault(" ".join(stem(w) for w in run), " ".join(run))

    current: list[str] = []
    for token in tokens:
        if token in STOPWORDS:
            add(current)
            current = []
            continue
        current.append(token)
        add([token])
    add(current)
    if any(token not in STOPWORDS for token in tokens):
        add(tokens)
    return found


@dataclass(frozen=True)
class KeywordAggregate:
    """The outcome of counting keywords over the isolated answers."""

    counts: dict[str, int]
    """Surface form -> number of non-abstaining responses holding it."""
    kept: list[str]
    threshold: float
    answered: int
    abstained: int
    per_response: list[list[str]]
    """Keywords (surface forms) of each response; empty for an abstention."""

    def as_dict(self) -> dict[str, Any]:
        return {"counts": dict(sorted(self.counts.items())), "kept": self.kept,
                "threshold": self.threshold, "answered": self.answered,
                "abstained": self.abstained, "per_response": self.per_response}


def aggregate_keywords(responses: Sequence[str | None], *, alpha: float = DEFAULT_ALPHA,
                       beta: float = DEFAULT_BETA) -> KeywordAggregate:
    """Count keywords over responses (``None`` = abstained); keep those with a count of at
    least ``min(beta, alpha * answered)``, longest first (RobustRAG's hint order)."""
    counts: dict[str, int] = {}
    surface: dict[str, str] = {}
    per_response: list[list[str]] = []
    answered = 0
    for response in responses:
        if response is None:
            per_response.append([])
            continue
        answered += 1
        keywords = response_keywords(response)
        per_response.append(sorted(keywords.values()))
        for key, form in keywords.items():
            counts[key] = counts.get(key, 0) + 1
            surface.setdefault(key, form)
    threshold = min(float(beta), alpha * answered)
    kept_keys = [key for key, count in counts.items() if answered and count >= threshold]
    kept = sorted((surface[key] for key in kept_keys), key=lambda s: (len(s), s), reverse=True)
    return KeywordAggregate({surface[key]: count for key, count in counts.items()}, kept,
                            round(threshold, 6), answered, len(responses) - answered,
                            per_response)


class RobustRAGKeyword:
    """An answerer: each context passage is answered alone, keywords of the isolated answers
    are aggregated, and the reader answers from the keywords that enough answers share."""

    name = NAME

    def __init__(self, reader: Reader, *, k: int = 5, alpha: float = DEFAULT_ALPHA,
                 beta: float = DEFAULT_BETA):
        self.reader = check_reader(reader)
        self.readers = [self.reader]
        self.alpha = check_fraction(alpha, "alpha")
        self.beta = check_fraction(beta, "beta", low=0.0, high=float(k) * 1000)
        if self.alpha == 0 or self.beta == 0:
            raise InputError("alpha and beta must be > 0: a zero threshold keeps every keyword")

    def _final(self, question: str, hints: str) -> ReaderAnswer:
        """The reader's answer from the keywords: the hint prompt for an LLM reader, the
        keyword list as the only passage for the extractive reader."""
        if not isinstance(self.reader, LLMReader):
            return self.reader.answer(question, [("keywords", hints)])
        messages = [{"role": "system", "content": HINT_INSTRUCTION},
                    {"role": "user", "content": f"Keywords: {hints}\n"
                                                f"Question: {' '.join(question.split())}"}]
        if not getattr(self.reader.backend, "chat_template", True):
            messages = [{"role": "user", "content": f"{HINT_INSTRUCTION}\n\n"
                                                    f"{messages[1]['content']}"}]
        response = self.reader.backend.chat(messages, self.reader.params)
        text, refused = parse_reply(response.text)
        return ReaderAnswer(text=text, citations=[] if refused else cite(text, [("k", hints)]),
                            refused=refused, raw=response.text,
                            prompt_tokens=response.prompt_tokens,
                            completion_tokens=response.completion_tokens,
                            seconds=response.seconds, cached=response.cached,
                            model=response.model)

    def answer(self, run: Run, question: str, context: list[ContextPassage]) -> Outcome:
        mark = time.perf_counter()
        isolated, responses = [], []
        for passage in context:
            reply = self.reader.answer(question, [(passage.id, passage.text)])
            run.paid("isolated answer", self.reader, reply)
            vote = Vote.of(self.reader, reply)
            responses.append(None if vote.refused else reply.text)
            isolated.append({"id": passage.id, "doc_id": passage.doc_id,
                             "answer": reply.text, "refused": vote.refused, "raw": reply.raw})
        run.timed("isolated", mark)
        aggregate = aggregate_keywords(responses, alpha=self.alpha, beta=self.beta)
        kept = set(aggregate.kept)
        contributing = []
        for passage, keywords, response in zip(context, aggregate.per_response, responses,
                                               strict=True):
            if response is None:
                run.removed(passage, "its isolated answer abstained")
            elif not kept & set(keywords):
                run.removed(passage, "none of its isolated answer's keywords reached the "
                                     f"threshold {aggregate.threshold:g}")
            else:
                contributing.append(passage)
        # every passage was read (alone); the context is what reached the final answer
        run.trace.context = [p.row() for p in contributing]
        for row, keywords in zip(isolated, aggregate.per_response, strict=True):
            row["keywords"] = keywords
        details: dict[str, Any] = {"alpha": self.alpha, "beta": self.beta,
                                   "isolated": isolated, **aggregate.as_dict()}
        run.trace.details[self.name] = details
        run.trace.reader = None
        if not aggregate.answered:
            return Outcome.refusal("every isolated answer abstained")
        if not aggregate.kept:
            return Outcome.refusal("no keyword reached the aggregation threshold "
                                   f"{aggregate.threshold:g}")
        hints = ", ".join(aggregate.kept)
        details["hints"] = hints
        reply = self._final(question, hints)
        if single_vote(run, "keyword answer", self.reader, reply).refused:
            return Outcome.refusal(f"{self.reader.name} declined to answer from the "
                                   "aggregated keywords")
        cited = sorted({p.doc_id for p in context if contains_answer(p.text, reply.text)})
        return Outcome(reply.text, False, "answered from keywords that at least "
                                          f"{aggregate.threshold:g} isolated answers share",
                       cited)
