"""One record per (block, defense, question), and the append-only checkpoint that holds them.

A record keeps what scoring needs (answer, refusal, which documents were retrieved, shown and
removed by whom, LLM calls and tokens) and the latency measured when it was first computed.
The checkpoint is JSON Lines, one fsync'ed line per record: an interrupted run loses at most
the question in flight, and a restarted run skips every record already there. A torn last
line (a kill in the middle of a write) is dropped with a warning, never trusted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trishield.defenses.disputes import contested
from trishield.errors import InputError
from trishield.pipeline import Answer
from trishield.trace import CandidateRow, ClaimRow, Trace


def _doc_ids(rows: list[CandidateRow], chunk_ids: set[str] | list[str]) -> list[str]:
    wanted = set(chunk_ids)
    return sorted({row.doc_id for row in rows if row.chunk_id in wanted})


def extract(answer: Answer, *, k: int) -> dict[str, Any]:
    """The scoring-relevant facts of one answer, from the pipeline's or a baseline's trace."""
    trace = answer.trace
    candidates = sorted(trace.candidates, key=lambda row: row.rank)
    context = trace.context
    every = [row.chunk_id for row in candidates]
    # per stage: what it could have removed (its input) and what it removed
    inputs: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {}
    if trace.ring1 is not None:
        inputs["ring1"] = _doc_ids(candidates, every)
        removed["ring1"] = _doc_ids(candidates, trace.ring1.blocked)
    if trace.ring2 is not None:
        # what Ring 2's re-ranking pushed out of the retrieval top-k (the rest of the pool
        # was never going to be read, so it is not a detection)
        blocked = set(trace.ring1.blocked if trace.ring1 is not None else [])
        top = [chunk for chunk in every if chunk not in blocked][:k]
        shown = {row.id for row in context}
        inputs["ring2"] = _doc_ids(candidates, top)
        removed["ring2"] = _doc_ids(candidates, [c for c in top if c not in shown])
    rounds = trace.ring3.rounds if trace.ring3 is not None else []
    if rounds:
        inputs["ring3"] = _doc_ids(candidates, rounds[0].context)
        removed["ring3"] = _doc_ids(candidates,
                                    set(rounds[0].context) - set(rounds[-1].context))
    if trace.removed is not None:
        inputs["baseline"] = _doc_ids(candidates, every)
        removed["baseline"] = sorted({row.doc_id for row in trace.removed})
    return {
        "answer": answer.answer,
        "refused": answer.refused,
        "reason": answer.reason,
        "retrieved": [row.doc_id for row in candidates[:k]],
        "pool": sorted({row.doc_id for row in candidates}),
        "context": sorted({row.doc_id for row in context}),
        "inputs": inputs,
        "removed": removed,
        "llm_calls": trace.llm_calls + trace.llm_calls_cached,
        "llm_calls_uncached": trace.llm_calls,
        "tokens": {"prompt": trace.tokens.prompt, "completion": trace.tokens.completion},
        "latency_s": trace.timings_s.get("total"),
        "dispute": dispute(trace),
    }


def dispute(trace: Trace) -> dict[str, Any] | None:
    """The last weighing that set claims of different writers against each other (what the
    product records in a knowledge base's disputes queue: ``defenses/disputes.py``), or None:
    the benchmark's KBs are read, not written, so the report lists these instead (issue 50:
    every answer weighed against a week-old claim is a dispute a person can see)."""
    if trace.evidence is None:
        return None
    rows = [row for row in trace.evidence.verdicts if contested(row)]
    if not rows:
        return None
    row = rows[-1]
    assert row.opposition is not None
    return {"outcome": row.outcome, "reason": row.reason,
            "sides": [_side(row.support), _side(row.opposition)]}


def _side(claim: ClaimRow) -> dict[str, Any]:
    stood = [s.stood_s for s in claim.sources if s.stood_s is not None]
    return {"claim": claim.claim, "weight": round(claim.weight, 4),
            "writers": sorted({w for s in claim.sources for w in s.writers}),
            "stood_s": round(max(stood), 1) if stood else None}


class Checkpoint:
    """Append-only JSON Lines of finished records, keyed by ``block|defense|question``."""

    def __init__(self, path: Path, fingerprint: str):
        self.path = path
        self.fingerprint = fingerprint
        self.records: dict[str, dict[str, Any]] = {}
        self.dropped_torn_line = False
        if path.exists():
            self._load()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._append({"fingerprint": fingerprint})

    def _load(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                row = json.loads(line)
            except ValueError:
                if number == len(lines):  # a kill mid-write: drop it, redo that question
                    self.dropped_torn_line = True
                    self._rewrite()
                    return
                raise InputError(f"{self.path}:{number}: corrupt checkpoint line; delete "
                                 "the file to start over") from None
            if number == 1:
                if row.get("fingerprint") != self.fingerprint:
                    raise InputError(f"{self.path} belongs to another configuration")
                continue
            self.records[row["key"]] = row

    def _rewrite(self) -> None:
        staging = self.path.with_suffix(".rewrite")
        with staging.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps({"fingerprint": self.fingerprint}) + "\n")
            for row in self.records.values():
                handle.write(json.dumps(row, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        staging.replace(self.path)

    def _append(self, row: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def add(self, row: dict[str, Any]) -> None:
        self._append(row)
        self.records[row["key"]] = row

    def rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.records.values())
