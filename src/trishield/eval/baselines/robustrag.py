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

Every one of the ``k`` passages is read (alone, see ``trace["robustrag"]["isolated"]``). The
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
from trishield.errors import InputError
from trishield.eval.baselines.base import (
    Call,
    Run,
    check_backend,
    check_fraction,
    check_k,
    check_question,
    check_reader,
    context_row,
    removed_row,
)
from trishield.kb import KnowledgeBase
from trishield.llm.base import ReaderAnswer
from trishield.llm.reader import cite, parse_reply
from trishield.pipeline import Answer
from trishield.rings.consensus import Vote, is_llm
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
    """Answer each top-``k`` passage alone, aggregate keywords, answer from the keywords."""

    name = NAME

    def __init__(self, kb: KnowledgeBase, reader: object, *, backend: str = "dense",
                 k: int = 5, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA):
        self.kb = kb
        self.reader = check_reader(reader)
        self.backend = check_backend(backend)
        self.k = check_k(k)
        self.alpha = check_fraction(alpha, "alpha")
        self.beta = check_fraction(beta, "beta", low=0.0, high=float(self.k) * 1000)
        if self.alpha == 0 or self.beta == 0:
            raise InputError("alpha and beta must be > 0: a zero threshold keeps every keyword")

    def _final(self, question: str, hints: str) -> ReaderAnswer:
        """The reader's answer from the keywords: the hint prompt for an LLM reader, the
        keyword list as the only passage for the extractive reader."""
        if not is_llm(self.reader):
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

    def ask(self, question: str) -> Answer:
        question = check_question(question)
        run = Run(self.name, question, self.backend, self.k, self.reader)
        candidates = run.retrieve(self.kb, question, self.k)
        mark = time.perf_counter()
        isolated, responses = [], []
        for candidate in candidates:
            reply = self.reader.answer(question, [(candidate.chunk_id, candidate.chunk.text)])
            run.calls.append(Call.of_reply("isolated answer", self.reader, reply))
            vote = Vote.of(self.reader, reply)
            responses.append(None if vote.refused else reply.text)
            isolated.append({"id": candidate.chunk_id, "doc_id": candidate.doc_id,
                             "answer": reply.text, "refused": vote.refused, "raw": reply.raw})
        run.timed("isolated", mark)
        aggregate = aggregate_keywords(responses, alpha=self.alpha, beta=self.beta)
        kept = set(aggregate.kept)
        removed, contributing = [], []
        for candidate, keywords, response in zip(candidates, aggregate.per_response, responses,
                                                 strict=True):
            if response is None:
                removed.append(removed_row(candidate, "its isolated answer abstained"))
            elif not kept & set(keywords):
                removed.append(removed_row(candidate, "none of its isolated answer's keywords "
                                                      f"reached the threshold "
                                                      f"{aggregate.threshold:g}"))
            else:
                contributing.append(candidate)
        # every passage was read (alone); the context is what reached the final answer
        run.trace["context"] = [context_row(c) for c in contributing]
        run.trace["removed"] = removed
        for row, keywords in zip(isolated, aggregate.per_response, strict=True):
            row["keywords"] = keywords
        details: dict[str, Any] = {"alpha": self.alpha, "beta": self.beta,
                                   "isolated": isolated, **aggregate.as_dict()}
        run.trace["robustrag"] = details
        run.trace["reader"] = None
        if not aggregate.answered:
            return run.finish(None, True, "every isolated answer abstained", [])
        if not aggregate.kept:
            return run.finish(None, True, "no keyword reached the aggregation threshold "
                                          f"{aggregate.threshold:g}", [])
        hints = ", ".join(aggregate.kept)
        details["hints"] = hints
        mark = time.perf_counter()
        reply = self._final(question, hints)
        run.timed("answer", mark)
        run.calls.append(Call.of_reply("keyword answer", self.reader, reply))
        vote = Vote.of(self.reader, reply).as_dict()
        run.trace["reader"] = vote
        if vote["refused"]:
            return run.finish(None, True, f"{self.reader.name} declined to answer from the "
                                          "aggregated keywords", [])
        cited = sorted({c.doc_id for c in candidates if contains_answer(c.chunk.text, reply.text)})
        return run.finish(reply.text, False, "answered from keywords that at least "
                                             f"{aggregate.threshold:g} isolated answers share",
                          cited)
