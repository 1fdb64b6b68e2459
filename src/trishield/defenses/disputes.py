"""Ring 3's conflicts between writers, handed to the knowledge base's disputes queue.

After Ring 3 has decided (an answer or a refusal), the last weighing in the trace that set
claims of *different writers* against each other (``stands``: decided for one side;
``conflict``: refused with both shown; ``silenced``: a heavier source about the question gave
no answer) is recorded as a dispute (:mod:`trishield.kb.store.disputes`), when the retriever keeps
a queue (:class:`~trishield.stages.DisputeLog`: a knowledge base does, passages handed over
from elsewhere do not). The answer is already decided: recording reads the trace, changes
nothing in it but its note, and a KB that cannot record (read-only, busy) says so in the note.
"""

from __future__ import annotations

from trishield.kb.store.disputes import (
    Dispute,
    DisputePassage,
    DisputeSide,
    DisputeSource,
)
from trishield.rings.evidence import Evidence
from trishield.stages import DisputeLog, Outcome, Run
from trishield.trace import ClaimRow, DisputeNote, WeighingRow


def contested(row: WeighingRow) -> bool:
    """Whether a weighing set claims of different writers against each other."""
    if row.opposition is None:
        return False
    writers = {w for claim in (row.support, row.opposition) for s in claim.sources
               for w in s.writers}
    return len(writers) >= 2


def dispute_of(question: str, evidence: Evidence, row: WeighingRow,
               outcome: Outcome) -> Dispute:
    """The dispute a weighing ``row`` records: both claims with their sources (each
    passage's document, writer, tier and ingest time from the pool), weights, time stood,
    and the decision (the answer given, '' when refused) with the weighing's reason."""
    assert row.opposition is not None
    reason = row.reason
    if outcome.refused and row.outcome == "stands":
        reason += f"; the answer was then refused: {outcome.reason}"
    return Dispute(origin="question", question=question, outcome=row.outcome, reason=reason,
                   decision="" if outcome.refused else (outcome.answer or ""),
                   sides=(_side(row.support, evidence), _side(row.opposition, evidence)))


def _side(claim: ClaimRow, evidence: Evidence) -> DisputeSide:
    position = evidence.position
    sources = []
    for source in claim.sources:
        passages = []
        for chunk_id in source.passages:
            item = evidence.items[position[chunk_id]] if chunk_id in position else None
            passages.append(DisputePassage(
                chunk_id, item.doc_id if item else chunk_id.rsplit("#", 1)[0],
                item.writer if item else "+".join(source.writers),
                item.tier if item else source.tier, item.ingested_at if item else None))
        sources.append(DisputeSource(tuple(source.writers), source.tier, tuple(passages),
                                     weight=source.weight, record=source.record,
                                     established=source.established, stood_s=source.stood_s))
    return DisputeSide(claim.claim, tuple(sources), top_tier=claim.top_tier,
                       weight=claim.weight)


def note_dispute(run: Run, question: str, evidence: Evidence, outcome: Outcome) -> None:
    """Record the last weighing of the run that opposed different writers, if the run's
    retriever keeps a disputes queue, and say in the trace what became of it."""
    trace = run.trace.evidence
    if trace is None or not isinstance(run.retriever, DisputeLog):
        return
    rows = [row for row in trace.verdicts if contested(row)]
    if not rows:
        return
    recorded = run.retriever.record_dispute(dispute_of(question, evidence, rows[-1], outcome))
    trace.dispute = DisputeNote.model_validate(recorded.as_dict())
